package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/partitions"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/reports"
)

func requireArchived(t *testing.T, err error) {
	t.Helper()
	var e *domain.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.CodeArchived, e.Code, e.Detail)
}

// TestArchiveCarriesBalancesAndTheBooksClose archives a month of real
// traffic (stock in, holds confirmed and released in it, a hold still
// held across its end, seats held and sold, a checkpoint older than the
// month's last rows): the file and its manifest check out, the partition
// is gone, replaced by one carried balance per stock row and the rows
// still read (the open hold's, the last naming each seat); every
// reconciliation (incremental, full, deep) finds nothing, before and after
// the open hold is confirmed and more holds are made; and so does the
// invariants query.
func TestArchiveCarriesBalancesAndTheBooksClose(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	shop := inventory.Caller{Name: "shop"}
	dbtest.StockIn(t, b.pool, "A1", 100)
	dbtest.StockIn(t, b.pool, "B1", 50)
	b.seats(t, "S1", 6)
	// A checkpoint of A1 older than the month's last rows of A1.
	runScope(t, svc, reconcile.ScopeFull)

	confirmed := b.hold(t, "c", "A1", 3)
	_, err := b.inv.Confirm(ctx, confirmed, shop)
	require.NoError(t, err)
	released := b.hold(t, "r", "A1", 2)
	_, err = b.inv.Release(ctx, released, shop, "")
	require.NoError(t, err)
	open := b.hold(t, "o", "B1", 4)
	seat, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "seat",
		Items: []inventory.Item{{SKU: "S1", Units: []string{"A-1", "A-2"}}}})
	require.NoError(t, err)
	_, err = b.inv.Confirm(ctx, seat.ID, shop)
	require.NoError(t, err)
	seat2, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "seat2",
		Items: []inventory.Item{{SKU: "S1", Units: []string{"A-3"}}}})
	require.NoError(t, err)
	_, err = b.inv.Release(ctx, seat2.ID, shop, "")
	require.NoError(t, err)
	var rowsBefore int
	var sums string
	sumsOf := `SELECT string_agg(x, '; ' ORDER BY x) FROM (SELECT format('%s/%s/%s %s %s %s %s', sku, location, pool, sum(delta_total),
		sum(delta_available), sum(delta_reserved), sum(delta_sold)) AS x FROM ledger GROUP BY sku, location, pool) s`
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&rowsBefore))
	require.NoError(t, b.pool.QueryRow(ctx, sumsOf).Scan(&sums))

	end := dbtest.CloseMonthNow(t, b.pool)
	dir := t.TempDir()
	parts := partitions.New(b.pool, nil)
	got, err := parts.Archive(ctx, end, dir, "alice")
	require.NoError(t, err)
	require.Len(t, got, 2, "the first partition (empty) and the month")
	a := got[1]
	require.EqualValues(t, rowsBefore, a.Rows)
	require.NoError(t, partitions.VerifyFile(filepath.Join(dir, a.File), a.Manifest))
	m, err := partitions.ReadManifest(filepath.Join(dir, a.File))
	require.NoError(t, err)
	require.Equal(t, a.DataSHA256, m.DataSHA256)
	_, err = os.Stat(filepath.Join(dir, a.File))
	require.NoError(t, err)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM pg_class WHERE relname = $1`, a.Partition), "the partition is dropped")
	require.EqualValues(t, 2, a.Carried, "A1 and B1 carried; every row of S1 kept (each names a seat or is a seat hold's)")
	require.EqualValues(t, a.Carried+a.Kept, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE at < $1`, end))
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE reservation_id = $1`, open), "the open hold's row is kept")
	require.Equal(t, 6, dbtest.Count(t, b.pool, `SELECT count(DISTINCT u) FROM ledger, unnest(units) u WHERE sku = 'S1' AND at < $1`, end),
		"the last row naming each seat is kept")
	var after string
	require.NoError(t, b.pool.QueryRow(ctx, sumsOf).Scan(&after))
	require.Equal(t, sums, after, "every stock row's ledger sums to what it did")

	dbtest.RequireInvariants(t, b.pool)
	for _, scope := range []string{reconcile.ScopeIncremental, reconcile.ScopeFull, reconcile.ScopeDeep} {
		settle(t, b)
		r := runScope(t, svc, scope)
		require.Empty(t, r.Findings.All(), scope)
	}

	// The service goes on: the open hold is confirmed, more are made.
	_, err = b.inv.Confirm(ctx, open, shop)
	require.NoError(t, err)
	b.hold(t, "n", "A1", 1)
	_, err = b.inv.Release(ctx, seat.ID, shop, "")
	require.Error(t, err, "a confirmed hold is not released")
	dbtest.RequireInvariants(t, b.pool)
	for _, scope := range []string{reconcile.ScopeIncremental, reconcile.ScopeFull, reconcile.ScopeDeep} {
		settle(t, b)
		r := runScope(t, svc, scope)
		require.Empty(t, r.Findings.All(), scope)
	}
	cp, err := db.New(b.pool).LedgerCheckpointGet(ctx, "A1", "default", "main")
	require.NoError(t, err)
	require.EqualValues(t, 100, cp.Total)
	require.EqualValues(t, 3, cp.Sold)
	require.EqualValues(t, 1, cp.Reserved)

	// What was archived is 410 (archived), not an empty page: the feed
	// from a cursor before the archive (without one, it starts after it),
	// the ledger's page before the archived ids, the report of a day
	// before the archive's end.
	q := db.New(b.pool)
	settle(t, b)
	_, err = events.Read(ctx, q, events.Position{Xid: 1, ID: 1}, 10)
	requireArchived(t, err)
	page, err := events.Read(ctx, q, events.Start, events.MaxPage)
	require.NoError(t, err)
	for _, e := range page.Events {
		require.False(t, e.At.Before(end), "only events after the archive: %+v", e)
	}
	require.NotEmpty(t, page.Events, "the events after the archive")
	led, err := b.inv.Ledger(ctx, "A1", 100, 0)
	require.NoError(t, err)
	require.Equal(t, "carried", led.Movements[len(led.Movements)-1].Kind, "the oldest movement left is A1's balance carried forward")
	_, err = b.inv.Ledger(ctx, "A1", 100, led.Movements[len(led.Movements)-1].ID)
	requireArchived(t, err)
	_, err = reports.New(b.pool).Daily(ctx, reports.DailyQuery{Date: end.UTC().Format(time.DateOnly), TimeZone: "UTC"})
	requireArchived(t, err)

	// An audit loads the archive back: it sums to what the ledger
	// carries. A file changed since is refused.
	restored, err := parts.Restore(ctx, filepath.Join(dir, a.File))
	require.NoError(t, err)
	require.EqualValues(t, rowsBefore, restored.Rows)
	require.Zero(t, restored.Differ)
	require.Equal(t, rowsBefore, dbtest.Count(t, b.pool, `SELECT count(*) FROM `+restored.Table))
	require.NoError(t, os.WriteFile(filepath.Join(dir, a.File), []byte("not the archive"), 0o644))
	_, err = parts.Restore(ctx, filepath.Join(dir, a.File))
	require.ErrorContains(t, err, "SHA-256")

	// Archiving again does nothing: it is done.
	again, err := parts.Archive(ctx, end, dir, "alice")
	require.NoError(t, err)
	require.Empty(t, again)
}

// TestArchiveWhileHoldsRun archives a closed month while four clients keep
// holding, confirming and releasing the same SKUs and a reconciliation
// runs beside: no request fails, the swap waits for what reads the ledger
// and holds wait for it no more than a moment at a time, and afterwards
// the books close (the invariants, an incremental, a full and a deep
// reconciliation find nothing).
func TestArchiveWhileHoldsRun(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	shop := inventory.Caller{Name: "shop"}
	skus := []string{"R1", "R2", "R3"}
	for _, sku := range skus {
		dbtest.StockIn(t, b.pool, sku, 100000)
	}
	traffic := func(ctx context.Context, c int, n *atomic.Int64, failed chan<- error) {
		for i := 0; ctx.Err() == nil; i++ {
			h, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("t-%d-%d-%d", c, i, time.Now().UnixNano()),
				Items: []inventory.Item{{SKU: skus[(c+i)%len(skus)], Quantity: 1}}})
			if err == nil {
				if i%2 == 0 {
					_, err = b.inv.Confirm(ctx, h.ID, shop)
				} else {
					_, err = b.inv.Release(ctx, h.ID, shop, "")
				}
			}
			var e *domain.Error
			switch {
			case err == nil:
				n.Add(1)
			case ctx.Err() != nil:
			case errors.As(err, &e) && e.Code == domain.CodeBusy:
			default:
				failed <- err
				return
			}
		}
	}
	run := func(stop context.Context) (*atomic.Int64, func() []error) {
		var n atomic.Int64
		failed := make(chan error, 8)
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				traffic(stop, c, &n, failed)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stop.Err() == nil {
				if _, err := svc.Run(stop, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, Scope: reconcile.ScopeIncremental}); err != nil && stop.Err() == nil {
					failed <- err
					return
				}
			}
		}()
		return &n, func() []error {
			wg.Wait()
			close(failed)
			var errs []error
			for err := range failed {
				errs = append(errs, err)
			}
			return errs
		}
	}

	// A month of traffic, closed while it goes on.
	before, stopBefore := context.WithCancel(ctx)
	n, wait := run(before)
	require.Eventually(t, func() bool { return n.Load() >= 200 }, time.Minute, 5*time.Millisecond)
	stopBefore()
	require.Empty(t, wait())
	end := dbtest.CloseMonthNow(t, b.pool)

	during, stopDuring := context.WithCancel(ctx)
	n, wait = run(during)
	require.Eventually(t, func() bool { return n.Load() >= 20 }, time.Minute, 5*time.Millisecond)
	got, err := partitions.New(b.pool, nil).Archive(ctx, end, t.TempDir(), "alice")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Positive(t, got[1].Rows)
	after := n.Load()
	require.Eventually(t, func() bool { return n.Load() >= after+20 }, time.Minute, 5*time.Millisecond, "holds after the archive")
	stopDuring()
	require.Empty(t, wait(), "no request failed")

	dbtest.RequireInvariants(t, b.pool)
	for _, scope := range []string{reconcile.ScopeIncremental, reconcile.ScopeFull, reconcile.ScopeDeep} {
		settle(t, b)
		r := runScope(t, svc, scope)
		require.Empty(t, r.Findings.All(), scope)
	}
}
