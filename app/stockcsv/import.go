package stockcsv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/text/unicode/norm"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// ChunkRows is how many rows one transaction of an import applies.
const ChunkRows = inventory.MaxBulkLines

// findBatch bounds the prefixes looked up in one query when looking for
// where an earlier import stopped.
const findBatch = 10_000

// Importer applies import files.
type Importer struct {
	Pool *pgxpool.Pool
	// Actor and Reason go into every ledger row; each row's ref names the
	// file and line (`stock.csv:17`).
	Actor  string
	Reason string
	// Progress, when set, is told about every chunk as it commits (and
	// about the rows skipped before the first).
	Progress func(Progress)
	// Wait, when set, is called once if another import holds the lock and
	// this one has to wait for it.
	Wait func()
}

// Progress is how far an import has got.
type Progress struct {
	// Done rows of Rows are behind us: skipped or committed.
	Done, Rows int
	// Chunk of Chunks just committed (0 for the report of skipped rows).
	Chunk, Chunks int
	// FirstLine and LastLine are the chunk's lines in the file.
	FirstLine, LastLine int
	// Changed is how many of the chunk's rows changed a pool.
	Changed int
}

// Summary is what an import did.
type Summary struct {
	Rows int
	// Skipped rows were applied by an earlier import (the file's first
	// Skipped rows); Previous says when and by whom.
	Skipped  int
	Previous *db.StockImportChunk
	// Applied rows, in Chunks transactions; Changed of them changed a pool.
	Applied, Chunks, Changed int
	// UnitsIn and UnitsOut total the deltas applied (a set_total's too).
	UnitsIn, UnitsOut int64
	Took              time.Duration
}

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

// Import applies f after the longest prefix of it that an earlier import
// recorded (see Parse), in chunks of ChunkRows rows, each one transaction
// that also records the chunk, so a failure leaves whole chunks applied and
// a rerun goes on from there. It holds a session lock for its whole run,
// so imports do not overlap. On a failure it returns the summary so far
// and a *ChunkError.
func (im *Importer) Import(ctx context.Context, f *File) (Summary, error) {
	began := time.Now()
	sum := Summary{Rows: len(f.Rows)}
	conn, err := im.Pool.Acquire(ctx)
	if err != nil {
		return sum, err
	}
	defer conn.Release()
	q := db.New(conn)
	got, err := q.StockImportLock(ctx)
	if err != nil {
		return sum, fmt.Errorf("take the import lock: %w", err)
	}
	if !got {
		if im.Wait != nil {
			im.Wait()
		}
		if err := q.StockImportWait(ctx); err != nil {
			return sum, fmt.Errorf("wait for the import lock: %w", err)
		}
	}
	defer func() {
		if err := q.StockImportUnlock(context.WithoutCancel(ctx)); err != nil {
			// The lock would outlive this import on a pooled connection.
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	start, prev, err := resumePoint(ctx, q, f)
	if err != nil {
		return sum, err
	}
	sum.Skipped, sum.Previous = start, prev
	chunks := (len(f.Rows) - start + ChunkRows - 1) / ChunkRows
	if im.Progress != nil && start > 0 {
		im.Progress(Progress{Done: start, Rows: len(f.Rows), Chunks: chunks})
	}
	for c := range chunks {
		lo := start + c*ChunkRows
		hi := min(lo+ChunkRows, len(f.Rows))
		changed, in, out, err := im.chunk(ctx, conn, f, lo, hi)
		if err != nil {
			ce := &ChunkError{Chunk: c + 1, FirstLine: f.Rows[lo].Line, LastLine: f.Rows[hi-1].Line, Err: err}
			var de *domain.Error
			if errors.As(err, &de) && de.Line != nil {
				ce.Line = f.Rows[lo+*de.Line].Line
			}
			sum.Took = time.Since(began)
			return sum, ce
		}
		sum.Applied += hi - lo
		sum.Chunks++
		sum.Changed += changed
		sum.UnitsIn += in
		sum.UnitsOut += out
		if im.Progress != nil {
			im.Progress(Progress{Done: hi, Rows: len(f.Rows), Chunk: c + 1, Chunks: chunks,
				FirstLine: f.Rows[lo].Line, LastLine: f.Rows[hi-1].Line, Changed: changed})
		}
	}
	sum.Took = time.Since(began)
	return sum, nil
}

// resumePoint returns how many of f's first rows an earlier import
// applied: the longest of its prefixes on record, and that record.
func resumePoint(ctx context.Context, q *db.Queries, f *File) (int, *db.StockImportChunk, error) {
	n := len(f.Prefixes)
	// The whole file first: a second run of a finished import is the
	// usual case, and costs one lookup. Then batches from the end back:
	// the first batch with a record holds the longest prefix.
	if i, rec, err := longest(ctx, q, f, n-1, n); err != nil || i >= 0 {
		return i + 1, rec, err
	}
	for hi := n - 1; hi > 0; hi -= findBatch {
		if i, rec, err := longest(ctx, q, f, max(hi-findBatch, 0), hi); err != nil || i >= 0 {
			return i + 1, rec, err
		}
	}
	return 0, nil, nil
}

// longest returns the greatest i in [lo, hi) whose prefix is on record, or
// -1.
func longest(ctx context.Context, q *db.Queries, f *File, lo, hi int) (int, *db.StockImportChunk, error) {
	keys := make([][]byte, 0, hi-lo)
	at := make(map[[32]byte]int, hi-lo)
	for i := lo; i < hi; i++ {
		keys = append(keys, f.Prefixes[i][:])
		at[f.Prefixes[i]] = i
	}
	found, err := q.StockImportChunksFind(ctx, keys)
	if err != nil {
		return -1, nil, fmt.Errorf("look for an earlier import: %w", err)
	}
	best, rec := -1, (*db.StockImportChunk)(nil)
	for i := range found {
		if n, ok := at[[32]byte(found[i].PrefixSha256)]; ok && n > best {
			best, rec = n, &found[i]
		}
	}
	return best, rec, nil
}

// chunk applies rows lo..hi-1 of f and records them, in one transaction.
func (im *Importer) chunk(ctx context.Context, conn *pgxpool.Conn, f *File, lo, hi int) (changed int, in, out int64, err error) {
	base := refName(filepath.Base(f.Name))
	b := inventory.BulkAdjustment{Reason: im.Reason, Actor: im.Actor, Lines: make([]inventory.BulkLine, hi-lo)}
	for i, r := range f.Rows[lo:hi] {
		l := inventory.BulkLine{SKU: r.SKU, Pool: r.Pool, Ref: fmt.Sprintf("%s:%d", base, r.Line)}
		if f.Format == FormatSetTotal {
			v := r.Value
			l.SetTotal = &v
		} else {
			l.Delta = r.Value
		}
		b.Lines[i] = l
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		res, err := inventory.AdjustManyTx(ctx, tx, b)
		if err != nil {
			return err
		}
		changed, in, out = res.Changed, res.UnitsIn, res.UnitsOut
		return db.New(tx).StockImportChunkAdd(ctx, db.StockImportChunkAddParams{
			PrefixSha256: f.Prefixes[hi-1][:], FileSha256: f.SHA256[:], FileName: f.Name,
			FirstRow: int32(lo + 1), LastRow: int32(hi), Changed: int32(res.Changed), Actor: im.Actor,
		})
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
