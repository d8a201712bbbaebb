package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/reports"
	"github.com/stockhold/stockhold/app/stock"
)

// report prints the daily report of one business day (every page of
// pools), as a table or, with --json, as the API's answer with every pool.
func report(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	date := fs.String("date", "", "the business `day`, YYYY-MM-DD (required)")
	zone := fs.String("tz", "", "the time `zone` the day is in, an IANA name (default UTC)")
	asJSON := fs.Bool("json", false, "print JSON (GET /v1/reports/daily's answer, every pool in one list) instead of a table")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *date == "" {
		return fmt.Errorf("%w: report needs --date YYYY-MM-DD", errUsage)
	}
	if _, _, _, err := reports.ParseDay(*date, *zone); err != nil {
		if errors.Is(err, reports.ErrBadDate) {
			return fmt.Errorf("%w: --date: %s", errUsage, err)
		}
		return fmt.Errorf("%w: %s", errUsage, err)
	}
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		q := reports.DailyQuery{Date: *date, TimeZone: *zone, Limit: reports.MaxLimit}
		var all reports.Daily
		for {
			page, err := svc.Reports.Daily(ctx, q)
			if err != nil {
				return err
			}
			pools := append(all.Pools, page.Pools...)
			all, all.Pools = page, pools
			if page.NextCursor == nil {
				break
			}
			q.Cursor = *page.NextCursor
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(all)
		}
		printReport(stdout, all)
		return nil
	})
}

func printReport(w io.Writer, r reports.Daily) {
	fmt.Fprintf(w, "Daily report %s (%s): %s to %s\n", r.Date, r.TimeZone, r.From.Format("2006-01-02 15:04Z07:00"), r.To.Format("2006-01-02 15:04Z07:00"))
	type named struct {
		name string
		f    reports.Figures
	}
	rows := []named{{"all", r.Totals}}
	for _, c := range r.Campaigns {
		rows = append(rows, named{"campaign " + c.Campaign, c.Figures})
	}
	for _, l := range r.Locations {
		rows = append(rows, named{"location " + l.Location, l.Figures})
	}
	for _, p := range r.Pools {
		name := p.SKU
		if p.Location != stock.DefaultLocation {
			name += "@" + p.Location
		}
		rows = append(rows, named{name + " (" + p.Pool + ")", p.Figures})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\theld\tconfirmed\treleased\texpired\trolled back\tadjusted\ttransferred\tmoved\twritten off\tcounted\t"+
		"sent\tin transit\treceived\tlost in transit\tcancelled\tshortfall\tsold short\trepairs\t")
	for _, n := range rows {
		f := n.f
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", n.name,
			f.Held, f.Confirmed, f.Released, f.Expired, f.RolledBack, f.Adjusted, f.Transferred, f.Moved, f.WrittenOff, f.Counted,
			f.TransferredOut, f.TransferredIn, f.Received, f.LostInTransit, f.TransferCancelled, f.Shortfall, f.SoldShort, f.Repairs)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "Change of every state, and of the units promised past what is on hand (backordered):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\ttotal\tavailable\treserved\tsold\tquality control\tdamaged\tsafety stock\tincoming\tshort\tbackordered\t")
	for _, n := range rows {
		c := n.f.Change
		fmt.Fprintf(tw, "%s\t%+d\t%+d\t%+d\t%+d\t%+d\t%+d\t%+d\t%+d\t%+d\t%+d\t\n", n.name,
			c.Total, c.Available, c.Reserved, c.Sold, c.QualityControl, c.Damaged, c.SafetyStock, c.Incoming, c.Short, c.Backordered)
	}
	_ = tw.Flush()
	rc := r.Reconciliations
	fmt.Fprintf(w, "Reconciliations: %d runs, %d failed; found %d auto-fixed, %d retried, %d high-risk\n", rc.Runs, rc.Failed, rc.AutoFixed, rc.Retried, rc.HighRisk)
	for _, run := range rc.WithFindings {
		fmt.Fprintf(w, "  run %d (%s) %s at %s: %d auto-fixed, %d retried, %d high-risk", run.ID, run.Trigger, run.Status,
			run.CreatedAt.Format("15:04:05Z07:00"), run.AutoFixed, run.Retried, run.HighRisk)
		if run.Error != nil {
			fmt.Fprintf(w, "; error: %s", *run.Error)
		}
		fmt.Fprintln(w)
		for _, f := range run.Findings {
			fmt.Fprintf(w, "    %s %s %s (%s): %s\n", f.Class, f.Kind, valueOr(f.SKU, "-"), valueOr(f.Pool, "-"), f.Action)
		}
	}
}
