package stockcsv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/text/unicode/norm"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// ChunkRows is how many rows one transaction of an import applies.
const ChunkRows = stock.MaxBulkLines

// MaxIDLength bounds an import's id.
const MaxIDLength = 200

// Importer applies import files.
type Importer struct {
	Pool *pgxpool.Pool
	// ID names the import (the command line's --id): running an import of
	// that id again resumes it where it stopped, or, once it finished,
	// applies nothing. Empty means the file's name (DefaultID).
	ID string
	// Again imports a finished import's file once more, as a new run of
	// the same id.
	Again bool
	// Actor and Reason go into every ledger row; each row's ref names the
	// file and line (`stock.csv:17`).
	Actor  string
	Reason string
	// Progress, when set, is told about every chunk as it commits (and
	// about the rows applied before, when it resumes).
	Progress func(Progress)
	// Wait, when set, is called once if another import holds the lock and
	// this one has to wait for it.
	Wait func()
}

// DefaultID is the id of an import of the file at path when none is given:
// its name (without the directory), as a ledger ref can hold it.
func DefaultID(path string) string {
	return refName(filepath.Base(path))
}

// Progress is how far an import has got.
type Progress struct {
	// Done rows of Rows are behind us: applied by an earlier attempt, or
	// committed now.
	Done, Rows int
	// Chunk of Chunks just committed (0 for the report of rows applied
	// before).
	Chunk, Chunks int
	// FirstLine and LastLine are the chunk's lines in the file.
	FirstLine, LastLine int
	// Changed is how many of the chunk's rows changed a pool.
	Changed int
}

// Summary is what an import did.
type Summary struct {
	// Import is the run as recorded after this attempt.
	Import db.StockImport
	Rows   int
	// Finished is the run when it had finished before, with these very
	// rows: nothing was applied (Importer.Again imports it again).
	Finished *db.StockImport
	// Skipped rows were applied by an earlier attempt of this run (the
	// file's first Skipped rows): it resumed after them.
	Skipped int
	// Earlier are other imports (other ids) that read the same rows: a
	// weekly file can be the same as last week's, or the same file saved
	// under another name.
	Earlier []db.StockImport
	// Applied rows, in Chunks transactions; Changed of them changed a pool.
	// Applied counts the rows of pools of units the import passed over
	// too: they are behind it.
	Applied, Chunks, Changed int
	// Units are the rows the file marks as pools of units with an identity
	// (Row.Serialized), which this attempt passed over, changing nothing:
	// such a pool's total changes only through its units.
	Units []Row
	// UnitsIn and UnitsOut total the deltas applied (a set_total's too).
	UnitsIn, UnitsOut int64
	Took              time.Duration
}

// Refusal is an import that was refused before any row was applied: the
// rows an unfinished run applied are not the file's, or a finished run of
// the id read other rows. Its message says what to do.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// ChunkError is a chunk that failed and was rolled back; the chunks before
// it are committed, and a rerun resumes with this one.
type ChunkError struct {
	Chunk               int
	FirstLine, LastLine int
	// Line is the file line at fault, when one is (0 otherwise).
	Line int
	Err  error
}

func (e *ChunkError) Error() string {
	where := fmt.Sprintf("chunk %d (lines %d-%d) was rolled back", e.Chunk, e.FirstLine, e.LastLine)
	var de *domain.Error
	if e.Line > 0 && errors.As(e.Err, &de) {
		// The detail names the line of the chunk's bulk adjustment; the
		// file's line is what a person can find.
		return fmt.Sprintf("line %d: %s; %s", e.Line, strings.TrimPrefix(de.Detail, fmt.Sprintf("lines[%d]: ", *de.Line)), where)
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

func (e *ChunkError) Unwrap() error { return e.Err }

// Import applies f as import im.ID, in chunks of ChunkRows rows, each one
// transaction that also records how far the run got, so a failure leaves
// whole chunks applied and a rerun goes on from there:
//
//   - an id never seen is a new import (run 1) from the first row; other
//     imports that read the same rows are in Summary.Earlier;
//   - an unfinished run resumes after the rows it applied, provided this
//     file has those rows (the content through them hashes the same), else
//     it is refused with a *Refusal and nothing is applied; rows after
//     them may differ from the last attempt's (fixed, appended);
//   - a finished run with the same rows applies nothing (Summary.Finished),
//     and given its rows with more after them applies those; with other
//     rows it is refused; with Again, any of these starts a new run.
//
// Each row is applied once per run. Import holds a session lock for its
// whole run, so imports do not overlap. On a failure it returns the
// summary so far and a *ChunkError.
func (im *Importer) Import(ctx context.Context, f *File) (Summary, error) {
	if im.ID == "" {
		named := *im
		named.ID = DefaultID(f.Name)
		im = &named
	}
	began := time.Now()
	sum := Summary{Rows: len(f.Rows)}
	if len(im.ID) > MaxIDLength {
		return sum, domain.Invalid("the import's id must be 1 to %d bytes", MaxIDLength)
	}
	if err := domain.ValidRef("id", im.ID, MaxIDLength); err != nil {
		return sum, err
	}
	conn, err := im.Pool.Acquire(ctx)
	if err != nil {
		return sum, err
	}
	defer conn.Release()
	q := db.New(conn)
	unlock, err := im.lock(ctx, conn, q)
	if err != nil {
		return sum, err
	}
	defer unlock()

	if err := refuseUnmarkedUnits(ctx, q, f); err != nil {
		sum.Took = time.Since(began)
		return sum, err
	}
	run, start, err := im.begin(ctx, q, f, &sum)
	sum.Import, sum.Skipped = run, start
	if err != nil || sum.Finished != nil {
		sum.Took = time.Since(began)
		return sum, err
	}
	chunks := (len(f.Rows) - start + ChunkRows - 1) / ChunkRows
	if im.Progress != nil && start > 0 {
		im.Progress(Progress{Done: start, Rows: len(f.Rows), Chunks: chunks})
	}
	for c := range chunks {
		lo := start + c*ChunkRows
		hi := min(lo+ChunkRows, len(f.Rows))
		changed, in, out, err := im.chunk(ctx, conn, f, run, lo, hi)
		if err != nil {
			ce := &ChunkError{Chunk: c + 1, FirstLine: f.Rows[lo].Line, LastLine: f.Rows[hi-1].Line, Err: err}
			var de *domain.Error
			if errors.As(err, &de) && de.Line != nil {
				ce.Line = f.Rows[applied(f.Rows[lo:hi])[*de.Line]+lo].Line
			}
			sum.Took = time.Since(began)
			return sum, ce
		}
		sum.Applied += hi - lo
		for _, r := range f.Rows[lo:hi] {
			if r.Serialized {
				sum.Units = append(sum.Units, r)
			}
		}
		sum.Chunks++
		sum.Changed += changed
		sum.UnitsIn += in
		sum.UnitsOut += out
		if im.Progress != nil {
			im.Progress(Progress{Done: hi, Rows: len(f.Rows), Chunk: c + 1, Chunks: chunks,
				FirstLine: f.Rows[lo].Line, LastLine: f.Rows[hi-1].Line, Changed: changed})
		}
	}
	if sum.Import, err = q.StockImportLatest(ctx, im.ID); err != nil {
		return sum, fmt.Errorf("read import %s back: %w", im.ID, err)
	}
	sum.Took = time.Since(began)
	return sum, nil
}

// lock takes the import lock on conn, waiting for another import to end
// (calling Wait first, when set); unlock gives it back, closing conn when
// it cannot, since the lock would outlive this import on a pooled
// connection.
func (im *Importer) lock(ctx context.Context, conn *pgxpool.Conn, q *db.Queries) (unlock func(), err error) {
	got, err := q.StockImportLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("take the import lock: %w", err)
	}
	if !got {
		if im.Wait != nil {
			im.Wait()
		}
		if err := q.StockImportWait(ctx); err != nil {
			return nil, fmt.Errorf("wait for the import lock: %w", err)
		}
	}
	return func() {
		if err := q.StockImportUnlock(context.WithoutCancel(ctx)); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}, nil
}

// begin finds or records the run of im.ID that applies f, under the
// import lock, and returns it with the number of f's rows it has applied
// already. A finished run with f's rows is left in sum.Finished.
func (im *Importer) begin(ctx context.Context, q *db.Queries, f *File, sum *Summary) (db.StockImport, int, error) {
	content := f.Content()
	latest, err := q.StockImportLatest(ctx, im.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		earlier, err := q.StockImportsByContent(ctx, content[:], im.ID)
		if err != nil {
			return db.StockImport{}, 0, fmt.Errorf("look for imports of the same rows: %w", err)
		}
		slices.SortFunc(earlier, func(a, b db.StockImport) int { return b.StartedAt.Compare(a.StartedAt) })
		sum.Earlier = earlier
		return im.start(ctx, q, f, 1)
	case err != nil:
		return db.StockImport{}, 0, fmt.Errorf("look up import %s: %w", im.ID, err)
	}
	when := func(t *time.Time) string { return t.UTC().Format(time.RFC3339) }
	n := int(latest.AppliedRows)
	applied := n == 0 || n <= len(f.Rows) && bytes.Equal(f.Prefixes[n-1][:], latest.AppliedSha256)
	if latest.FinishedAt != nil {
		switch {
		case im.Again:
			return im.start(ctx, q, f, latest.Run+1)
		case bytes.Equal(latest.ContentSha256, content[:]):
			sum.Finished = &latest
			return latest, 0, nil
		case !applied || n == len(f.Rows):
			return db.StockImport{}, 0, &Refusal{fmt.Sprintf(
				"import %q finished on %s with other rows (%s, %d rows): to import this file as a new import give it another --id; "+
					"to import it again as %q, add --again", im.ID, when(latest.FinishedAt), latest.FileName, latest.TotalRows, im.ID)}
		}
		// The rows it applied, and more after them: it goes on with those.
	} else if im.Again {
		return db.StockImport{}, 0, &Refusal{fmt.Sprintf(
			"import %q has not finished (%d of %d rows applied): run it again without --again to resume it",
			im.ID, latest.AppliedRows, latest.TotalRows)}
	}
	if !applied {
		return db.StockImport{}, 0, &Refusal{fmt.Sprintf(
			"import %q applied rows 1-%d of %s before it stopped on %s, and this file's first %d rows are not those: "+
				"resume it with the rows it applied unchanged (fix only the rows after them), or give this file another --id",
			im.ID, n, latest.FileName, when(&latest.UpdatedAt), n)}
	}
	run, err := q.StockImportResume(ctx, db.StockImportResumeParams{
		FileName: f.Name, Format: f.Format, TotalRows: int32(len(f.Rows)), ContentSha256: content[:],
		Actor: im.Actor, ActorKey: domain.KeyName(ctx), ID: im.ID, Run: latest.Run,
	})
	if err != nil {
		return db.StockImport{}, 0, fmt.Errorf("resume import %s: %w", im.ID, err)
	}
	return run, n, nil
}

func (im *Importer) start(ctx context.Context, q *db.Queries, f *File, run int32) (db.StockImport, int, error) {
	content := f.Content()
	row, err := q.StockImportStart(ctx, db.StockImportStartParams{
		ID: im.ID, Run: run, FileName: f.Name, Format: f.Format, TotalRows: int32(len(f.Rows)), ContentSha256: content[:],
		Actor: im.Actor, ActorKey: domain.KeyName(ctx),
	})
	if err != nil {
		return db.StockImport{}, 0, fmt.Errorf("record import %s: %w", im.ID, err)
	}
	return row, 0, nil
}

// chunk applies rows lo..hi-1 of f and records them as applied by run, in
// one transaction; the record is conditional on the rows before lo, and no
// other, being applied, so a row is applied once per run.
func (im *Importer) chunk(ctx context.Context, conn *pgxpool.Conn, f *File, run db.StockImport, lo, hi int) (changed int, in, out int64, err error) {
	base := refName(filepath.Base(f.Name))
	b := stock.BulkAdjustment{Reason: im.Reason, Actor: im.Actor}
	for _, i := range applied(f.Rows[lo:hi]) {
		r := f.Rows[lo+i]
		l := stock.BulkLine{SKU: r.SKU, Location: r.Location, Pool: r.Pool, Ref: fmt.Sprintf("%s:%d", base, r.Line)}
		if f.Format == FormatSetTotal {
			v := r.Value
			l.SetTotal = &v
		} else {
			l.Delta = r.Value
		}
		b.Lines = append(b.Lines, l)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if len(b.Lines) > 0 { // a chunk of pools of units alone applies nothing
			res, err := stock.AdjustManyTx(ctx, tx, b)
			if err != nil {
				return err
			}
			changed, in, out = res.Changed, res.UnitsIn, res.UnitsOut
		}
		n, err := db.New(tx).StockImportAdvance(ctx, db.StockImportAdvanceParams{
			ID: run.ID, Run: run.Run, FromRow: int32(lo), ToRow: int32(hi), AppliedSha256: f.Prefixes[hi-1][:],
		})
		if err == nil && n != 1 {
			err = fmt.Errorf("import %s run %d no longer has rows 1-%d applied and no more: another import moved it", run.ID, run.Run, lo)
		}
		return err
	})
	return changed, in, out, err
}

// refName is a file's name as the ledger's ref can hold it (see
// domain.ValidRef): composed (NFC, as macOS file names are not), with
// control and format characters shown as '?', and at most 200 bytes.
func refName(name string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, norm.NFC.String(name))
	for len(name) > 200 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// applied returns the indexes, in rows, of the rows an import applies:
// all but those the file marks as pools of units (Row.Serialized).
func applied(rows []Row) []int {
	out := make([]int, 0, len(rows))
	for i, r := range rows {
		if !r.Serialized {
			out = append(out, i)
		}
	}
	return out
}

// refuseUnmarkedUnits refuses, before anything is applied, a file with
// rows of pools of units with an identity that it does not mark as such
// (a file written by hand, or an export from before the serialized column):
// their total changes only through their units, so the chunk of such a row
// would be rolled back whole. It names them, up to maxProblems.
func refuseUnmarkedUnits(ctx context.Context, q *db.Queries, f *File) error {
	var skus []string
	seen := map[string]bool{}
	for _, r := range f.Rows {
		if !r.Serialized && !seen[r.SKU] {
			seen[r.SKU] = true
			skus = append(skus, r.SKU)
		}
	}
	if len(skus) == 0 {
		return nil
	}
	pools, err := q.StockSerializedOf(ctx, skus)
	if err != nil {
		return fmt.Errorf("look for pools of units: %w", err)
	}
	if len(pools) == 0 {
		return nil
	}
	units := map[[3]string]bool{}
	for _, p := range pools {
		units[[3]string{p.Sku, p.Location, p.Pool}] = true
	}
	p := &Problems{}
	for _, r := range f.Rows {
		if !r.Serialized && units[[3]string{r.SKU, r.Location, r.Pool}] {
			p.add("line %d: SKU %q (pool %s%s) is units with an identity, which change only through their units "+
				"(POST /v1/skus/{sku}/units, .../units/retire): leave the row out, or mark it %s true as an export does",
				r.Line, r.SKU, r.Pool, stock.At(r.Location), SerializedColumn)
		}
	}
	if len(p.List) == 0 {
		return nil
	}
	return &Refusal{Reason: p.Error()}
}
