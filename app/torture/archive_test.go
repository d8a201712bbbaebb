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

	"github.com/google/uuid"
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
//
// The archive refuses while a transfer made before the cut is in transit
// (a repair reads its ledger rows), and the actors leave some in transit
// for the run's end to finish, or fail to finish one (busy, refused). An
// actor claims a transfer while it acts on it, so one actor alone sees a
// step through and the answers noted for it are its own, in order. While
// refused, the archivist claims each transfer made before the cut that no
// one is acting on and receives or cancels it, as an operator clearing the
// way would, and keeps the claim once it has; the ones claimed end their
// step within a moment, and the next try takes what they left.

// archive is what the archivist did.
type archive struct {
	// mu is held by the archivist while the ledger and the history view
	// change, and by a checkpoint while it reads them.
	mu       sync.RWMutex
	dir      string
	cut      time.Time
	tries    int
	refused  string // why the last refusal refused
	cuts     int    // tries to cut the month
	afterEnd bool   // archived once the other actors had stopped
	cutErr   string // why the last try to cut it failed
	landed   int    // transfers the archivist finished
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

// archivist cuts the month and archives it, once. On a machine so loaded
// that it has not archived by the run's end (the cut and the swap wait
// for moments when nothing reads the ledger), it goes on once the other
// actors stopped, for at most archiveGrace: the books are then checked
// with the history cut all the same.
func (tr *torture) archivist(ctx context.Context, r *rand.Rand) {
	select {
	case <-ctx.Done():
	case <-time.After(tr.duration / 3):
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tr.duration+archiveGrace)
	defer cancel()
	for !tr.cutMonth(actx) {
		if !pace(actx, r, 200*time.Millisecond) {
			return
		}
	}
	parts := partitions.New(tr.plain, nil)
	for {
		done, err := tr.archiveOnce(actx, parts)
		switch {
		case done:
			tr.done("ledger archived")
			tr.archive.afterEnd = ctx.Err() != nil
			return
		case errors.Is(err, partitions.ErrRefused):
			tr.tally("ledger archive", 409)
			tr.archive.mu.Lock()
			tr.archive.refused = err.Error()
			tr.archive.mu.Unlock()
			tr.landTransfers(actx, r)
		case actx.Err() != nil:
			return
		default:
			tr.t.Errorf("archivist: %v", err)
			return
		}
		if !pace(actx, r, 300*time.Millisecond) {
			return
		}
	}
}

// archiveGrace is how long past the run's end the archivist may go on: as
// long as an archive asks for its swap's lock (the servers' periodic
// reconciliations still read the ledger).
const archiveGrace = partitions.SwapPatience

// cutMonth ends the ledger's current month now: its partition is split at
// this instant into one that has ended and one for the rest of the month.
// It reports whether it did: the split waits for the ledger's lock (which
// a deep reconciliation reading the ledger holds for as long as it runs)
// 200 ms at a time, as every writer of the ledger queues behind it.
func (tr *torture) cutMonth(ctx context.Context) bool {
	a := &tr.archive
	a.cuts++
	end, err := partitions.New(tr.plain, nil).CutNow(ctx, 200*time.Millisecond)
	if err != nil {
		tr.tally("ledger cut", 503)
		a.mu.Lock()
		a.cutErr = err.Error()
		a.mu.Unlock()
		return false
	}
	tr.tally("ledger cut", 200)
	a.cut = end
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

// reportArchive logs the archive, and fails a run in which it was never
// made.
func (tr *torture) reportArchive(t *testing.T) {
	t.Helper()
	a := &tr.archive
	var rows, kept, carried int64
	for _, p := range a.archived {
		rows, kept, carried = rows+p.Rows, kept+p.Kept, carried+p.Carried
	}
	if a.cut.IsZero() {
		t.Errorf("torture: the ledger's month was never cut to archive: %d tries, the last: %s", a.cuts, a.cutErr)
		return
	}
	if tr.owed("ledger archived") {
		t.Errorf("torture: the ledger was not archived: %d tries refused, the last: %s; %d transfers landed or cancelled by the archivist",
			a.tries, a.refused, a.landed)
		return
	}
	when := "while every actor ran"
	if a.afterEnd {
		when = "after the run's end (the machine too loaded for it before)"
	}
	t.Logf("torture: ledger archived %s: cut at %s after %d tries, archived after %d tries (%d transfers landed or cancelled by the archivist first): "+
		"%d partitions, %d rows, %d kept, %d carried balances; %d restored",
		when, a.cut.Format(time.RFC3339Nano), a.cuts, a.tries, a.landed, len(a.archived), rows, kept, carried, len(a.restored))
	require.Positive(t, rows, "the archive held the first part of the run")
}

// claim claims transfer id for the caller to act on: false when someone
// else is acting on it or the archivist finished it.
func (tr *torture) claim(id uuid.UUID) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.claimed[id] {
		return false
	}
	tr.claimed[id] = true
	return true
}

// unclaim lets transfer id go: whoever claims it next may act on it.
func (tr *torture) unclaim(id uuid.UUID) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	delete(tr.claimed, id)
}

// landTransfers claims every transfer made before the cut, still in
// transit and not claimed, and receives what is left of it or cancels it
// (closes it, once part was received), keeping the claim. One it cannot
// finish now (an instance busy, its destination inactive) is let go for
// the next try.
func (tr *torture) landTransfers(ctx context.Context, r *rand.Rand) {
	rows, err := tr.plain.Query(ctx, `SELECT id, quantity - received - lost, received FROM transfers
		WHERE status = 'in_transit' AND created_at < $1 ORDER BY created_at`, tr.archive.cut)
	if err != nil {
		if ctx.Err() == nil {
			tr.t.Errorf("archivist: transfers in transit: %v", err)
		}
		return
	}
	type open struct {
		id             uuid.UUID
		left, received int64
	}
	transit, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (open, error) {
		var o open
		return o, row.Scan(&o.id, &o.left, &o.received)
	})
	if err != nil {
		if ctx.Err() == nil {
			tr.t.Errorf("archivist: transfers in transit: %v", err)
		}
		return
	}
	for _, o := range transit {
		if ctx.Err() != nil || !tr.claim(o.id) {
			continue // its actor is acting on it
		}
		path := "/v1/transfers/" + o.id.String()
		steps := []string{"/receive", "/cancel"}
		if o.received > 0 {
			steps[1] = "/close"
		}
		if r.IntN(2) == 0 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		finished := false
		for _, step := range steps {
			var body any = map[string]any{"reason": "landed before the archive"}
			if step == "/receive" {
				body = map[string]any{"quantity": o.left, "reason": "landed before the archive"}
			}
			st, b := tr.do("archivist transfer"+step, "POST", path+step, tr.ops, body, "Idempotency-Key", tr.name("archivist"))
			if st == 200 {
				tr.noteTransfer(o.id, b)
				finished = true
				break
			}
		}
		if !finished {
			tr.unclaim(o.id)
			continue
		}
		tr.archive.mu.Lock()
		tr.archive.landed++
		tr.archive.mu.Unlock()
	}
}
