package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/stock"
)

// stopSale shows or flips the switch for everything, or with --client one
// client's, or with --location one location's: on stops new holds, off
// lets them in again (and prints what it lifted), status prints the
// switches.
func stopSale(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stop-sale", flag.ContinueOnError)
	operator := fs.String("operator", "", "who flips it, for the record (required for on and off)")
	reason := fs.String("reason", "", "why, for the record (required for on and off)")
	client := fs.String("client", "", "the key owner `name` whose holds alone to stop (default: everything)")
	location := fs.String("location", "", "the `location` whose sales alone to stop (default: everything)")
	verb := ""
	if len(args) > 0 && (args[0] == "on" || args[0] == "off" || args[0] == "status") {
		verb, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if verb == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: stop-sale takes on, off or status", errUsage)
	}
	if verb != "status" && (*operator == "" || *reason == "") {
		return fmt.Errorf("%w: stop-sale %s needs --operator and --reason", errUsage, verb)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		if verb == "status" {
			all, err := svc.Inventory.StopSales(ctx)
			if err != nil {
				return err
			}
			printStopSale(stdout, "", "last switched", all.StopSale)
			for _, st := range all.Clients {
				if *location == "" && (*client == "" || st.Client == *client) {
					printStopSale(stdout, "", "last switched", st)
				}
			}
			for _, st := range all.Locations {
				if *client == "" && (*location == "" || st.Location == *location) {
					printStopSale(stdout, "", "last switched", st)
				}
			}
			return nil
		}
		st, err := svc.Inventory.SetStopSale(ctx, stock.StopSaleChange{Client: *client, Location: *location, Active: verb == "on",
			Reason: *reason, Actor: *operator})
		if err != nil {
			return err
		}
		printStopSale(stdout, "", "last switched", st.StopSale)
		if st.Lifted != nil {
			printStopSale(stdout, "lifted: ", "turned on", *st.Lifted)
		}
		return nil
	})
}

func printStopSale(w io.Writer, prefix, switched string, st stock.StopSale) {
	what, whose := "stop-sale", "every new hold"
	switch {
	case st.Client != "":
		what, whose = "stop-sale for "+st.Client, "every new hold by its keys"
	case st.Location != "":
		what, whose = "stop-sale at "+st.Location, "every new hold there"
	}
	state := "off: holds are taken"
	if st.Active {
		state = "ON: " + whose + " is refused (503 stop_sale); confirms and releases go on"
	}
	fmt.Fprintf(w, "%s%s %s\n", prefix, what, state)
	if st.Actor != nil {
		fmt.Fprintf(w, "  %s by %s (key %s) at %s: %s\n", switched, *st.Actor, valueOr(st.ActorKey, "-"),
			st.ChangedAt.Format("2006-01-02 15:04:05Z07:00"), valueOr(st.Reason, "-"))
	}
	if st.Rule != nil {
		fmt.Fprintf(w, "  tripped by rule %s\n", *st.Rule)
	}
}

// repair previews, or with --apply makes, a repair of a pool's books, then
// (applied) reconciles the SKU. --apply shows the preview first and applies
// exactly it: the repair is refused (preview_stale) if the books moved in
// between.
func repair(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	var req stock.RepairRequest
	fs.StringVar(&req.SKU, "sku", "", "the `SKU` to repair (required)")
	fs.StringVar(&req.Location, "location", "", "the `location` (default: default)")
	fs.StringVar(&req.Pool, "pool", "", "the `pool` (default main)")
	fs.StringVar(&req.To, "to", "", "which `side` is right: ledger (set the counters from the ledger) or counters (one ledger row accepts them) (required)")
	fs.StringVar(&req.Actor, "operator", "", "who repairs, for the record (required)")
	fs.StringVar(&req.Reason, "reason", "", "why, for the record (required)")
	apply := fs.Bool("apply", false, "write the repair the preview shows; without it the command only shows what it would do")
	fs.Func("ref", "a `reference` of what the repair fixes: an order ref, a hold or ledger id, a ticket (repeat the flag for more)", func(v string) error {
		req.Refs = append(req.Refs, v)
		return nil
	})
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if req.SKU == "" || req.To == "" || req.Actor == "" || req.Reason == "" {
		return fmt.Errorf("%w: repair needs --sku, --to, --operator and --reason", errUsage)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		preview := req
		preview.DryRun = true
		out, _, err := svc.Reconcile.Repair(ctx, preview)
		if err != nil {
			return err
		}
		d := out.Difference
		before, after := countersLines(out.Before, out.After)
		fmt.Fprintf(stdout, "%s (pool %s), repair to the %s:\n", out.SKU, out.Pool, req.To)
		fmt.Fprintf(stdout, "  before:     %s\n  after:      %s\n", before, after)
		fmt.Fprintf(stdout, "  difference: %s\n", d)
		for _, t := range out.Transfers {
			fmt.Fprintf(stdout, "  transfer %s: sent %d, received %d, lost %d; its ledger rows say sent %d, received %d, lost %d\n",
				t.ID, t.Before.Quantity, t.Before.Received, t.Before.Lost, t.After.Quantity, t.After.Received, t.After.Lost)
		}
		switch {
		case !*apply:
			fmt.Fprintln(stdout, "dry run: nothing changed (add --apply to write it)")
			return nil
		case d.Zero() && len(out.Transfers) == 0:
			fmt.Fprintln(stdout, "nothing to repair: the counters agree with the ledger")
			return nil
		}
		req.ExpectedDifference = &d
		done, run, err := svc.Reconcile.Repair(ctx, req)
		if err != nil {
			return err
		}
		if !done.Applied {
			fmt.Fprintln(stdout, "nothing to repair: the counters agree with the ledger")
		} else {
			fmt.Fprintln(stdout, "applied")
		}
		if len(req.Refs) > 0 {
			fmt.Fprintf(stdout, "refs: %s\n", strings.Join(req.Refs, ", "))
		}
		if run != nil {
			fmt.Fprintf(stdout, "reconciliation run %d %s: %d high risk\n", run.ID, run.Status, run.HighRisk)
		}
		return nil
	})
}

// countersLines writes a repair's counters before and after it: the four a
// hold moves, then each other state either side has (the promise counter,
// backordered, among them), so that a repair of one of those shows it.
func countersLines(before, after stock.Counters) (string, string) {
	states := func(c stock.Counters) []int64 {
		return []int64{c.QualityControl, c.Damaged, c.SafetyStock, c.Incoming, c.Short, c.Backordered}
	}
	names := []string{"quality_control", "damaged", "safety_stock", "incoming", "short", "backordered"}
	b, a := states(before), states(after)
	line := func(c stock.Counters, v []int64) string {
		s := fmt.Sprintf("total %d, available %d, reserved %d, sold %d", c.Total, c.Available, c.Reserved, c.Sold)
		for i, name := range names {
			if b[i] != 0 || a[i] != 0 {
				s += fmt.Sprintf(", %s %d", name, v[i])
			}
		}
		return s
	}
	return line(before, b), line(after, a)
}

func valueOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}
