package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// rollback enqueues a manual rollback job, recorded with who and why, and
// prints the request id on the last line. The serving process's workers
// pick it up; follow it with GET /v1/rollbacks/{id}.
func rollback(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "resume" {
		return rollbackResume(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	var (
		req                = rollbacks.Request{Source: rollbacks.SourceCLI}
		heldBefore, cutoff string
	)
	fs.StringVar(&req.Operator, "operator", "", "who asks, for the record (required)")
	fs.StringVar(&req.Reason, "reason", "", "why, for the record (required)")
	fs.Func("reservation", "a hold `id` to release (repeat the flag for more)", func(v string) error {
		id, err := uuid.Parse(v)
		if err != nil {
			return errors.New("not a hold id (a UUID)")
		}
		req.Scope.ReservationIDs = append(req.Scope.ReservationIDs, id)
		return nil
	})
	fs.StringVar(&req.Scope.Campaign, "campaign", "", "release this `campaign`'s unpaid holds")
	fs.StringVar(&req.Scope.SKU, "sku", "", "hand back this `SKU`'s pool's lines (a hold's other lines stay held)")
	fs.StringVar(&req.Scope.Pool, "pool", "", "with --sku: the `pool` (default main)")
	fs.StringVar(&req.Scope.Location, "location", "", "with --sku: only its lines at this `location`; alone: every line there, of any SKU (a hold's lines elsewhere stay held)")
	fs.StringVar(&heldBefore, "held-before", "", "with --sku or --location: only holds made before this `time`: "+timeForms+" (default: now)")
	fs.StringVar(&cutoff, "cutoff", "", "with any scope: only holds made before this `time`, such as a dry run's requested_at: "+timeForms+" (default: now)")
	fs.BoolVar(&req.DryRun, "dry-run", false, "count the holds and units the scope would hand back and change nothing")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var err error
	if req.Scope.HeldBefore, err = pastTime("held-before", heldBefore); err != nil {
		return err
	}
	if req.Scope.Cutoff, err = pastTime("cutoff", cutoff); err != nil {
		return err
	}
	if err := rollbackFlagsValid(req, heldBefore != ""); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %s", errUsage, asFlags(err.Error()))
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		if req.Scope.SKU != "" {
			unknown, err := svc.Reconcile.UnknownSKUs(ctx, []string{req.Scope.SKU})
			if err != nil {
				return err
			}
			if len(unknown) > 0 {
				return fmt.Errorf("%w: --sku %s: no such SKU (no stock row); nothing was queued", errUsage, req.Scope.SKU)
			}
		}
		created, err := svc.Rollbacks.Create(ctx, req)
		if err != nil {
			return err
		}
		what := "rollback"
		if req.DryRun {
			what = "dry-run rollback"
		}
		fmt.Fprintf(stdout, "queued %s request %d as job %d; follow it with GET /v1/rollbacks/%d or sql/rollback_requests.sql\n%d\n",
			what, created.RollbackID, created.JobID, created.RollbackID, created.RollbackID)
		return nil
	})
}

// pastTime reads flag's time (see parseTime), which may not be later than
// now: a rollback never touches holds made after it was requested. Empty
// is nil.
func pastTime(flag, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	now := time.Now()
	t, err := parseTime(flag, v, now)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if t.After(now) {
		return nil, fmt.Errorf("%w: --%s %s is later than now: a rollback never touches holds made after it was requested", errUsage, flag, v)
	}
	return &t, nil
}

// rollbackResume gives a rollback whose chain of jobs was stranded
// (cancelled, deleted, discarded) a job again, and says what it did. It is
// idempotent: a request with a live job, or a finished one, is left alone.
func rollbackResume(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollback resume", flag.ContinueOnError)
	operator := fs.String("operator", getenv("USER"), "who resumes it (default: $USER)")
	// The id comes first (stockhold rollback resume 7 --operator alice);
	// flags may come before it too.
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	rest := fs.Args()
	if id == "" && len(rest) > 0 {
		id, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, rest[0])
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("%w: rollback resume needs the request's id, a positive whole number (got %q)", errUsage, id)
	}
	if *operator == "" {
		*operator = "cli"
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		out, err := svc.Rollbacks.Resume(ctx, n, *operator)
		if err != nil {
			return err
		}
		switch {
		case out.Resumed && out.JobID != nil:
			fmt.Fprintf(stdout, "rollback %d resumed: batch job %d enqueued (status %s)\n", n, *out.JobID, out.Status)
		case out.Resumed:
			fmt.Fprintf(stdout, "rollback %d resumed: the dry run was counted (status %s)\n", n, out.Status)
		case out.JobID != nil:
			fmt.Fprintf(stdout, "rollback %d has a job to run (job %d, status %s): nothing to resume\n", n, *out.JobID, out.Status)
		default:
			fmt.Fprintf(stdout, "rollback %d is %s: nothing to resume\n", n, out.Status)
		}
		return nil
	})
}

// rollbackFlagsValid checks the rollback's flags as the command line names
// them, before the request's own validation (which names the API's fields).
func rollbackFlagsValid(req rollbacks.Request, heldBefore bool) error {
	var missing []string
	if strings.TrimSpace(req.Operator) == "" {
		missing = append(missing, "--operator")
	}
	if strings.TrimSpace(req.Reason) == "" {
		missing = append(missing, "--reason")
	}
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return fmt.Errorf("%w: %s %s required: a rollback is recorded with who asked and why", errUsage, strings.Join(missing, " and "), verb)
	}
	scopes := 0
	for _, given := range []bool{len(req.Scope.ReservationIDs) > 0, req.Scope.Campaign != "", req.Scope.SKU != "",
		req.Scope.SKU == "" && req.Scope.Location != ""} {
		if given {
			scopes++
		}
	}
	if req.Scope.SKU == "" && (req.Scope.Pool != "" || heldBefore && req.Scope.Location == "") {
		return fmt.Errorf("%w: --pool and --held-before go with --sku (--held-before also with --location)", errUsage)
	}
	if scopes != 1 {
		return fmt.Errorf("%w: give exactly one scope: --reservation ID (repeatable), --campaign C, --sku S (with --pool, --location and --held-before), or --location L", errUsage)
	}
	return nil
}

// apiFields names, for the command line, the fields a request's validation
// speaks of.
var apiFields = strings.NewReplacer(
	"reservation_ids", "--reservation", "held_before", "--held-before", "cutoff", "--cutoff", "campaign", "--campaign",
	"sku", "--sku", "pool", "--pool", "location", "--location", "operator", "--operator", "reason", "--reason",
)

// asFlags rewrites a validation message in terms of flags.
func asFlags(msg string) string { return apiFields.Replace(msg) }
