package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/reconcile"
)

// reconcileCmd runs a reconciliation in this process (no worker needed),
// prints what it found and did, and exits 1 when it found high-risk pools.
func reconcileCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	var skus []string
	fs.Func("sku", "limit the run to this `SKU` (repeat the flag for more); none means every SKU", func(v string) error {
		if err := domain.ValidName("sku", v); err != nil {
			return err
		}
		skus = append(skus, v)
		return nil
	})
	incremental := fs.Bool("incremental", false, "check only the stock rows whose ledger moved since the last clean run")
	deep := fs.Bool("deep", false, "sum each stock row's whole ledger, trusting no checkpoint (every row, or those of --sku)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: reconcile takes no arguments, only --sku, --incremental and --deep flags", errUsage)
	}
	if *incremental && len(skus) > 0 {
		return fmt.Errorf("%w: reconcile takes --sku or --incremental, not both", errUsage)
	}
	if *incremental && *deep {
		return fmt.Errorf("%w: reconcile takes --incremental or --deep, not both", errUsage)
	}
	scope := reconcile.ScopeFull
	switch {
	case *incremental:
		scope = reconcile.ScopeIncremental
	case *deep:
		scope = reconcile.ScopeDeep
	}
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		if len(skus) > 0 {
			unknown, err := svc.Reconcile.UnknownSKUs(ctx, skus)
			if err != nil {
				return err
			}
			if len(unknown) > 0 {
				return fmt.Errorf("%w: --sku %s: no such SKU (no stock row); nothing was checked", errUsage, strings.Join(unknown, ", "))
			}
		}
		run, err := svc.Reconcile.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, SKUs: skus, Scope: scope})
		if err != nil {
			return err
		}
		printRun(stdout, run)
		if run.HighRisk > 0 {
			return exitError(1)
		}
		return nil
	})
}

// printRun writes a run and its findings for a person at a terminal.
func printRun(w io.Writer, run reconcile.Run) {
	scope := "every SKU"
	switch {
	case run.SKUs != nil:
		scope = "SKUs " + strings.Join(run.SKUs, ", ")
	case run.Scope != nil && *run.Scope == reconcile.ScopeIncremental:
		scope = "incremental: the rows whose ledger moved since the last clean run"
	}
	if run.Scope != nil && *run.Scope == reconcile.ScopeDeep {
		scope = "deep: " + scope + ", each against its whole ledger"
	}
	fmt.Fprintf(w, "reconciliation run %d %s: %d stock rows checked (%s)\n", run.ID, reconcile.Outcome(run.Status, run.HighRisk), run.RowsChecked, scope)
	fmt.Fprintf(w, "  high risk: %d   holds released: %d   jobs retried: %d\n", run.HighRisk, run.AutoFixed, run.Retried)
	sections := []struct {
		title    string
		findings []reconcile.Finding
	}{
		{"HIGH RISK (pool paused, no stock moved)", run.Findings.HighRisk},
		{"AUTO-FIX (stuck holds)", run.Findings.AutoFix},
		{"RETRY (failed jobs)", run.Findings.Retry},
	}
	for _, sec := range sections {
		if len(sec.findings) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", sec.title)
		for _, f := range sec.findings {
			fmt.Fprintf(w, "  %-22s %s\n", f.Kind, subject(f))
			fmt.Fprintf(w, "  %-22s -> %s\n", "", f.Action)
			fmt.Fprintf(w, "  %-22s    %s\n", "", f.Details)
		}
	}
	if len(run.Findings.All()) == 0 {
		fmt.Fprintln(w, "\nthe books balance; nothing to do")
	}
}

func subject(f reconcile.Finding) string {
	var parts []string
	if f.SKU != nil {
		s := "sku " + *f.SKU
		if f.Pool != nil {
			s += "/" + *f.Pool
		}
		parts = append(parts, s)
	}
	if f.ReservationID != nil {
		parts = append(parts, "hold "+f.ReservationID.String())
	}
	if f.JobID != nil {
		parts = append(parts, fmt.Sprintf("job %d", *f.JobID))
	}
	return strings.Join(parts, " ")
}
