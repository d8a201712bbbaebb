package torture_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/partitions"
)

// The ledger archived in the middle of the run. Once a third of the run
// has passed, the archivist ends the ledger's current month now, as the
// turn of a month would (the rows so far in a partition whose range has
// ended, a new partition for the rest), and archives it with every actor
// still running, asking again while the archive refuses (a transaction
// or a transfer from before the cut still open). It loads each archive
// back and checks it (every stock row's archived rows sum to what the
// ledger carries for the range). From then on the test's own checks read
// the whole history through torture_history.ledger: the archived range's
// rows from the archives, the rest from the ledger. Reconciliation, the
// servers' periodic runs and the final one, reads the ledger itself,
// carried balances and all: the books must still close.

// archive is what the archivist did.
type archive struct {
	// mu is held by the archivist while the ledger and the history view
	// change, and by a checkpoint while it reads them.
	mu       sync.RWMutex
	dir      string
	cut      time.Time
	tries    int
	refused  string // why the last refusal refused
	archived []partitions.Archived
	restored []partitions.Restored
}

// setupHistory makes torture_history.ledger, which the test's own pool
// (tr.pool) reads in place of the ledger: the ledger itself until the
// archive is made.
func (tr *torture) setupHistory(t *testing.T) {
	t.Helper()
	tr.archive.dir = t.TempDir()
	_, err := tr.plain.Exec(context.Background(), `CREATE SCHEMA torture_history;
		CREATE VIEW torture_history.ledger AS SELECT * FROM public.ledger`)
	require.NoError(t, err)
}

// archivist cuts the month and archives it, once.
func (tr *torture) archivist(ctx context.Context, r *rand.Rand) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(tr.duration / 3):
	}
	for !tr.cutMonth(ctx) {
		if !pace(ctx, r, 200*time.Millisecond) {
			return
		}
	}
	parts := partitions.New(tr.plain, nil)
	for {
		done, err := tr.archiveOnce(ctx, parts)
		switch {
		case done:
			tr.done("ledger archived")
			return
		case errors.Is(err, partitions.ErrRefused):
			tr.tally("ledger archive", 409)
			tr.archive.mu.Lock()
			tr.archive.refused = err.Error()
			tr.archive.mu.Unlock()
		case ctx.Err() != nil:
			return
		default:
			tr.t.Errorf("archivist: %v", err)
			return
		}
		if !pace(ctx, r, 300*time.Millisecond) {
			return
		}
	}
}

// cutMonth ends the ledger's current month now: its partition is split at
// this instant into one that has ended and one for the rest of the month.
// It reports whether it did (a lock not had in time: try again).
func (tr *torture) cutMonth(ctx context.Context) bool {
	tx, err := tr.plain.Begin(ctx)
	if err != nil {
		return false
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var name string
	var from, end time.Time
	if err := tx.QueryRow(ctx, `
		SELECT c.relname, (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz, clock_timestamp()
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger'::regclass
		  AND pg_get_expr(c.relpartbound, c.oid) LIKE '%' || to_char(date_trunc('month', now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD') || '%) TO%'`).
		Scan(&name, &from, &end); err != nil {
		tr.t.Errorf("archivist: find this month's partition: %v", err)
		return false
	}
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	closed, open := pgx.Identifier{name + "_a"}.Sanitize(), pgx.Identifier{name + "_b"}.Sanitize()
	_, err = tx.Exec(ctx, fmt.Sprintf(`
		SET LOCAL lock_timeout = '1s';
		ALTER TABLE ledger DETACH PARTITION %[1]s;
		ALTER TABLE %[1]s RENAME TO %[2]s;
		ALTER TABLE ledger ATTACH PARTITION %[2]s FOR VALUES FROM ('%[4]s') TO ('%[5]s');
		CREATE TABLE %[3]s (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
		ALTER TABLE ledger ATTACH PARTITION %[3]s FOR VALUES FROM ('%[5]s') TO ('%[6]s');`,
		pgx.Identifier{name}.Sanitize(), closed, open, ts(from), ts(end), ts(from.AddDate(0, 1, 0))))
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		tr.tally("ledger cut", 503)
		return false
	}
	tr.tally("ledger cut", 200)
	tr.archive.cut = end
	return true
}

// archiveOnce tries the archive; once made, it loads every archive back,
// checks it, and points torture_history.ledger at the archives for the
// range they hold.
func (tr *torture) archiveOnce(ctx context.Context, parts *partitions.Service) (bool, error) {
	a := &tr.archive
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tries++
	got, err := parts.Archive(ctx, a.cut, a.dir, "torture-archivist")
	a.archived = append(a.archived, got...)
	if err != nil {
		return false, err
	}
	if len(a.archived) == 0 {
		return false, fmt.Errorf("the archive before %s archived nothing", a.cut.Format(time.RFC3339Nano))
	}
	union := []string{fmt.Sprintf(`SELECT * FROM public.ledger WHERE at >= '%s'`, a.cut.Format(time.RFC3339Nano))}
	for _, p := range a.archived {
		r, err := parts.Restore(ctx, filepath.Join(a.dir, p.File))
		if err != nil {
			return false, fmt.Errorf("restore %s: %w", p.File, err)
		}
		if r.Differ != 0 {
			return false, fmt.Errorf("restore %s: %d stock rows' archived rows do not sum to what the ledger carries", p.File, r.Differ)
		}
		a.restored = append(a.restored, r)
		union = append(union, "SELECT * FROM public."+pgx.Identifier{r.Table}.Sanitize())
	}
	if _, err := tr.plain.Exec(ctx, `CREATE OR REPLACE VIEW torture_history.ledger AS `+strings.Join(union, " UNION ALL ")); err != nil {
		return false, fmt.Errorf("point the history at the archives: %w", err)
	}
	return true, nil
}

// tally adds an answer to the outcomes, for a step that is not a request.
func (tr *torture) tally(op string, status int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.outcomes[fmt.Sprintf("%s %d", op, status)]++
}

// reportArchive logs the archive. An archive refused all run long (a
// transfer from before the cut still in transit, a transaction open
// across it: refusals the archive must make) is logged, not failed: the
// books were checked all the same, without the history cut.
func (tr *torture) reportArchive(t *testing.T) {
	t.Helper()
	a := &tr.archive
	var rows, kept, carried int64
	for _, p := range a.archived {
		rows, kept, carried = rows+p.Rows, kept+p.Kept, carried+p.Carried
	}
	if tr.owed("ledger archived") {
		t.Logf("torture: the ledger was not archived: %d tries refused, the last: %s", a.tries, a.refused)
		return
	}
	t.Logf("torture: ledger archived at %s after %d tries: %d partitions, %d rows, %d kept, %d carried balances; %d restored",
		a.cut.Format(time.RFC3339Nano), a.tries, len(a.archived), rows, kept, carried, len(a.restored))
	require.Positive(t, rows, "the archive held the first part of the run")
}
