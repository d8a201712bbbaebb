package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/partitions"
)

// ledgerCmd lists the ledger's partitions and archives, archives old
// months and loads an archive back.
func ledgerCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("ledger", args, stdout); err != nil {
		return err
	}
	fs := flag.NewFlagSet("ledger "+args[0], flag.ContinueOnError)
	var before, dir, operator string
	if args[0] == "archive" {
		fs.StringVar(&before, "before", "", "archive every month before this `month`, YYYY-MM (UTC) (required)")
		fs.StringVar(&dir, "dir", ".", "the `directory` the archive files and manifests are written to")
		fs.StringVar(&operator, "operator", "", "who, for the record (required)")
	}
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	switch args[0] {
	case "partitions":
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
		}
		return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
			return printPartitions(ctx, svc.Partitions, stdout)
		})
	case "archive":
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
		}
		if before == "" || operator == "" {
			return fmt.Errorf("%w: ledger archive needs --before YYYY-MM and --operator", errUsage)
		}
		month, err := time.Parse("2006-01", before)
		if err != nil {
			return fmt.Errorf("%w: --before: %q is not a month (YYYY-MM)", errUsage, before)
		}
		return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
			done, err := svc.Partitions.Archive(ctx, month, dir, operator)
			for _, a := range done {
				fmt.Fprintf(stdout, "archived %s: %d rows to %s (sha256 %s); %d rows kept, %d balances carried; %s\n",
					a.Partition, a.Rows, a.ManifestPath, a.FileSHA256, a.Kept, a.Carried, a.Took.Round(time.Millisecond))
			}
			if err == nil && len(done) == 0 {
				fmt.Fprintf(stdout, "nothing to archive before %s\n", before)
			}
			return err
		})
	default: // restore
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: ledger restore takes one FILE (an archive's .csv.gz)", errUsage)
		}
		return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
			r, err := svc.Partitions.Restore(ctx, fs.Arg(0))
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "restored %s: %d rows into %s, checksums as the manifest says\n", r.Manifest.Partition, r.Rows, r.Table)
			if r.Differ > 0 {
				fmt.Fprintf(stdout, "%d stock rows do not sum to what the ledger carries for %s\n", r.Differ, r.Manifest.Partition)
				return exitError(1)
			}
			fmt.Fprintf(stdout, "summed per stock row, they are what the ledger carries for that range\n")
			return nil
		})
	}
}

func printPartitions(ctx context.Context, p *partitions.Service, w io.Writer) error {
	parts, err := p.List(ctx)
	if err != nil {
		return err
	}
	archives, err := p.Archives(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tFROM\tTO\tARCHIVED")
	for _, x := range parts {
		from := "-"
		if !x.From.IsZero() {
			from = x.From.Format(time.DateOnly)
		}
		archived := ""
		for _, a := range archives {
			if a.To.Equal(x.To) {
				archived = fmt.Sprintf("%d rows to %s by %s", a.Rows, a.File, a.ArchivedBy)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Name, from, x.To.Format(time.DateOnly), archived)
	}
	return tw.Flush()
}
