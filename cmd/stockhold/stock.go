package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/stockcsv"
)

// stockCommand runs `stock import FILE` and `stock export`.
func stockCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("stock", args, stdout); err != nil {
		return err
	}
	if args[0] == "import" {
		return stockImport(ctx, args[1:], getenv, stdout, stderr)
	}
	return stockExport(ctx, args[1:], getenv, stdout, stderr)
}

// stockImport applies a CSV file as the import --id (default: the file's
// name) in chunks of 1,000 rows, showing progress on stderr (a bar on a
// terminal, a line per chunk otherwise) and a summary on stdout. A file
// with a bad row is refused whole (exit 2), and so is a rerun whose applied
// rows changed or a finished import's id given other rows; a chunk that
// fails is rolled back and the command stops (exit 1), and running it again
// resumes after the chunks that committed. A finished import run again
// applies nothing (--again imports it once more).
func stockImport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stock import", flag.ContinueOnError)
	actor := fs.String("actor", "", "who imports, for the ledger (default $USER)")
	reason := fs.String("reason", "", "why, for the ledger (default: stock import FILE)")
	id := fs.String("id", "", "the import's `name` (default: the file's name): run again, it resumes, or once finished applies nothing")
	again := fs.Bool("again", false, "import a finished import's file once more, as a new run of the same --id")
	// Flags may come before or after the file.
	var file string
	rest := args
	for {
		if err := parseFlags(fs, rest, stdout); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if file != "" {
			return fmt.Errorf("%w: stock import takes one file, not %q and %q", errUsage, file, fs.Arg(0))
		}
		file, rest = fs.Arg(0), fs.Args()[1:]
	}
	if file == "" {
		return fmt.Errorf("%w: stock import FILE.csv (header sku,pool,delta or sku,pool,set_total, or sku,location,pool,...)", errUsage)
	}
	if *actor == "" {
		*actor = orElse(getenv("USER"), "cli")
	}
	if *reason == "" {
		*reason = "stock import " + filepath.Base(file)
	}
	if *id == "" {
		*id = stockcsv.DefaultID(file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	f, err := stockcsv.Parse(file, data)
	var problems *stockcsv.Problems
	if errors.As(err, &problems) {
		fmt.Fprintf(stderr, "stockhold: %s cannot be imported; nothing was changed:\n%v\n", file, problems)
		return exitError(2)
	}
	if err != nil {
		return err
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		bar := newProgress(stderr)
		im := &stockcsv.Importer{Pool: pool, ID: *id, Again: *again, Actor: *actor, Reason: *reason, Progress: bar.show,
			Wait: func() { fmt.Fprintln(stderr, "another import is running; waiting for it to finish") }}
		sum, err := im.Import(ctx, f)
		bar.done()
		var (
			refusal *stockcsv.Refusal
			de      *domain.Error
			ce      *stockcsv.ChunkError
		)
		if !errors.As(err, &ce) && (errors.As(err, &refusal) || errors.As(err, &de)) {
			fmt.Fprintf(stderr, "stockhold: %s cannot be imported; nothing was changed:\n%v\n", file, err)
			return exitError(2)
		}
		for _, e := range sum.Earlier {
			fmt.Fprintf(stderr, "warning: the same rows were imported before as %q (%s, run %d, started %s by %s): "+
				"%q is another import, so they are applied again\n",
				e.ID, e.FileName, e.Run, e.StartedAt.UTC().Format(time.RFC3339), e.Actor, *id)
		}
		printSummary(stdout, f, sum)
		if ce != nil {
			fmt.Fprintf(stderr, "stockhold: %v\nRows before it are applied; fix the cause (or the file from line %d on) "+
				"and run the same command again: it resumes after the rows already applied.\n", ce, ce.FirstLine)
			return exitError(1)
		}
		return err
	})
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func printSummary(w io.Writer, f *stockcsv.File, sum stockcsv.Summary) {
	fmt.Fprintf(w, "%s: %s rows of %s, sha256 %s\n", f.Name, count(sum.Rows), f.Format, hex.EncodeToString(f.SHA256[:]))
	if len(f.Ignored) > 0 {
		fmt.Fprintf(w, "  columns ignored: %s\n", strings.Join(f.Ignored, ", "))
	}
	run := sum.Import
	if done := sum.Finished; done != nil {
		fmt.Fprintf(w, "  import %q (run %d) finished on %s with these rows: nothing applied (--again imports them again)\n",
			done.ID, done.Run, done.FinishedAt.UTC().Format(time.RFC3339))
		return
	}
	fmt.Fprintf(w, "  import %q, run %d\n", run.ID, run.Run)
	if sum.Skipped > 0 {
		fmt.Fprintf(w, "  resumed after the %s rows it applied before (through line %d, last on %s)\n", count(sum.Skipped),
			f.Rows[sum.Skipped-1].Line, run.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if sum.Skipped == sum.Rows {
		fmt.Fprintln(w, "  nothing left to apply: every row was applied")
		return
	}
	fmt.Fprintf(w, "  applied %s rows in %s (%s changed a pool): +%s / -%s units, in %s\n", count(sum.Applied-len(sum.Units)),
		plural(sum.Chunks, "chunk"), count(sum.Changed), count(int(sum.UnitsIn)), count(int(sum.UnitsOut)), sum.Took.Round(time.Millisecond))
	if len(sum.Units) > 0 {
		fmt.Fprintf(w, "  skipped %s of pools of units with an identity, which change only through their units:\n", plural(len(sum.Units), "row"))
		for i, r := range sum.Units {
			if i == 20 {
				fmt.Fprintf(w, "    ... and %s more\n", count(len(sum.Units)-i))
				break
			}
			fmt.Fprintf(w, "    line %d: %s (pool %s%s)\n", r.Line, r.SKU, r.Pool, stock.At(r.Location))
		}
	}
	if left := sum.Rows - sum.Skipped - sum.Applied; left > 0 {
		fmt.Fprintf(w, "  not applied: %s rows\n", count(left))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return count(n) + " " + what + "s"
}

// count writes n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// progress shows an import's progress: a bar redrawn in place on a
// terminal, one line per chunk on anything else (a log, a pipe).
type progress struct {
	w    io.Writer
	tty  bool
	drew bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

const barWidth = 30

func (p *progress) show(pr stockcsv.Progress) {
	if p.tty {
		filled := barWidth * pr.Done / max(pr.Rows, 1)
		fmt.Fprintf(p.w, "\r[%s%s] %3d%%  %s/%s rows  chunk %d/%d ", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled),
			100*pr.Done/max(pr.Rows, 1), count(pr.Done), count(pr.Rows), pr.Chunk, pr.Chunks)
		p.drew = true
		return
	}
	if pr.Chunk == 0 {
		fmt.Fprintf(p.w, "rows 1-%s were applied before: resuming after them\n", count(pr.Done))
		return
	}
	fmt.Fprintf(p.w, "chunk %d/%d committed: lines %d-%d, %s/%s rows done\n", pr.Chunk, pr.Chunks, pr.FirstLine, pr.LastLine,
		count(pr.Done), count(pr.Rows))
}

func (p *progress) done() {
	if p.drew {
		fmt.Fprintln(p.w)
	}
}

// stockExport writes every stock row as CSV (see stockcsv.Export) to
// stdout, or to --out through a temporary file renamed when complete, so a
// failed export never leaves half a file under the name.
func stockExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stock export", flag.ContinueOnError)
	out := fs.String("out", "", "write to this `file` instead of stdout (whole or not at all)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *out != "" {
		if st, err := os.Stat(filepath.Dir(*out)); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: --out %s: no directory %s to write it in", errUsage, *out, filepath.Dir(*out))
		}
	}
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		if *out == "" {
			_, err := stockcsv.Export(ctx, pool, stdout)
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*")
		if err != nil {
			// The error names the temporary file; say what was asked for.
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("--out %s: cannot write a file in %s: %w", *out, filepath.Dir(*out), err)
		}
		defer os.Remove(tmp.Name())
		n, err := stockcsv.Export(ctx, pool, tmp)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), *out); err != nil {
			var le *os.LinkError
			if errors.As(err, &le) {
				err = le.Err
			}
			return fmt.Errorf("--out %s: %w", *out, err)
		}
		fmt.Fprintf(stderr, "exported %s stock rows to %s\n", count(n), *out)
		return nil
	})
}
