package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/jobs"
)

// rollback enqueues a manual rollback job, recorded with who and why, and
// prints the request id on the last line. The serving process's workers
// pick it up; follow it with GET /v1/rollbacks/{id}.
func rollback(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		req        = rollbacks.Request{Source: rollbacks.SourceCLI}
		heldBefore string
	)
	fs.StringVar(&req.Operator, "operator", "", "who asks (required)")
	fs.StringVar(&req.Reason, "reason", "", "why (required)")
	fs.Func("reservation", "a hold id to release (repeat the flag for more)", func(v string) error {
		id, err := uuid.Parse(v)
		if err != nil {
			return fmt.Errorf("--reservation %q is not a UUID", v)
		}
		req.Scope.ReservationIDs = append(req.Scope.ReservationIDs, id)
		return nil
	})
	fs.StringVar(&req.Scope.Campaign, "campaign", "", "release the campaign's unpaid holds")
	fs.StringVar(&req.Scope.SKU, "sku", "", "release the holds on this SKU's pool")
	fs.StringVar(&req.Scope.Pool, "pool", "", "with --sku: the pool (default main)")
	fs.StringVar(&heldBefore, "held-before", "", "with --sku: only holds made before this RFC 3339 time (default now)")
	fs.BoolVar(&req.DryRun, "dry-run", false, "count what would be released and change nothing")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if heldBefore != "" {
		t, err := time.Parse(time.RFC3339, heldBefore)
		if err != nil {
			return fmt.Errorf("%w: --held-before: %v", errUsage, err)
		}
		req.Scope.HeldBefore = &t
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		inserter, err := jobs.NewInserter(pool)
		if err != nil {
			return err
		}
		var created rollbacks.Created
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			created, err = rollbacks.New(pool, inserter, 0).CreateTx(ctx, tx, req)
			return err
		})
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
