package inventory_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// Changes to a bundle's components in flight (their transaction open)
// while the bundle's threshold or definition is written: whatever order
// they commit in, the bundle is low exactly where what it makes is at or
// below its threshold, and every component row the threshold needs is
// watched, so the next change to it decides again.

// openChange begins a change of delta to sku's main pool at location, as
// an adjustment does (a negative delta takes from available, a positive
// one creates the row when there is none), with its ledger row, and
// leaves its transaction open: the caller commits it.
func openChange(t *testing.T, pool *pgxpool.Pool, sku, location string, delta int64) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	q := db.New(tx)
	if delta < 0 {
		_, err = q.StockTake(ctx, db.StockTakeParams{Sku: sku, Location: location, Pool: stock.MainPool, Quantity: -delta})
	} else {
		_, err = q.StockAdjust(ctx, db.StockAdjustParams{Sku: sku, Location: location, Pool: stock.MainPool, Delta: delta})
	}
	require.NoError(t, err)
	reason := "change in flight"
	_, err = q.LedgerAppend(ctx, db.LedgerAppendParams{Sku: sku, Location: location, Pool: stock.MainPool, Kind: "adjust",
		DeltaTotal: delta, DeltaAvailable: delta, Actor: "test", Reason: &reason})
	require.NoError(t, err)
	return tx
}

// waitAnsweredOrWaiting waits until answered has an answer or a backend of
// the test's database waits for a lock (a row lock of the change in
// flight, or the bundles' lock).
func waitAnsweredOrWaiting[T any](t *testing.T, pool *pgxpool.Pool, answered chan T) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if len(answered) > 0 {
			return
		}
		var n int
		assert.NoError(c, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		assert.Positive(c, n, "waiting for the change in flight")
	}, 10*time.Second, 5*time.Millisecond)
}

// requireBundleLowInStep requires that every bundle threshold's low is
// whether the bundle makes at most the threshold there, and that every
// main pool that a bundle's threshold needs watched is.
func requireBundleLowInStep(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT format('bundle %s at %s makes %s, threshold %s, low %s', sku, location, bundle_available(sku, location), threshold, low)
		FROM bundle_thresholds WHERE low <> (bundle_available(sku, location) <= threshold) ORDER BY sku, location`)
	require.NoError(t, err)
	off, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, off, "bundles out of step with their thresholds")
	rows, err = pool.Query(ctx, `SELECT sku || '@' || location FROM stock
		WHERE pool = 'main' AND NOT bundle_watch AND bundle_watch_want(sku, location) ORDER BY sku, location`)
	require.NoError(t, err)
	unwatched, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, unwatched, "component rows a threshold needs, not watched")
}

type answer struct {
	st  stock.Stock
	err error
}

func setThresholdAsync(svc *inventory.Service, sku, location string, threshold *int64) chan answer {
	out := make(chan answer, 1)
	go func() {
		st, err := svc.SetThreshold(context.Background(), stock.Threshold{SKU: sku, Location: location, Threshold: threshold, Actor: "ops"})
		out <- answer{st, err}
	}()
	return out
}

// TestBundleThresholdSetMeetsChangeInFlight: a bundle's first threshold
// at a location is set while a change to a component there, not watched
// yet, is in flight. The change commits first: the threshold decides by
// what the bundle makes after it (9 boxes at a threshold of 9: low), not
// by what it made before (10).
func TestBundleThresholdSetMeetsChangeInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 20)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})

	take := openChange(t, b.pool, "MUG", stock.DefaultLocation, -1)
	set := setThresholdAsync(svc, "BOX", "", ptr(int64(9)))
	waitAnsweredOrWaiting(t, b.pool, set)
	require.NoError(t, take.Commit(ctx))
	a := <-set
	require.NoError(t, a.err)
	requireBundleLowInStep(t, b.pool)
	require.Equal(t, []stock.BundleAt{{Location: "default", Available: 9, LowThreshold: ptr(int64(9))}}, a.st.Bundle.Locations)
}

// TestBundleThresholdRemovedMeetsWatchedChange: a bundle's threshold is
// removed while a change to a watched component is in flight; the change
// decides the bundle's crossing at its commit. Both commit (neither waits
// for the other while holding what the other waits for).
func TestBundleThresholdRemovedMeetsWatchedChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 20)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})
	setBundleThreshold(t, svc, "BOX", 3)

	take := openChange(t, b.pool, "MUG", stock.DefaultLocation, -1)
	removed := setThresholdAsync(svc, "BOX", "", nil)
	waitAnsweredOrWaiting(t, b.pool, removed)
	require.NoError(t, take.Commit(ctx), "the change in flight commits")
	a := <-removed
	require.NoError(t, a.err, "the threshold is removed")
	require.Len(t, a.st.Bundle.Locations, 1)
	require.Nil(t, a.st.Bundle.Locations[0].LowThreshold)
	requireBundleLowInStep(t, b.pool)
}

// TestBundleComponentRowCreatedWhileThresholdSet: the first stock of a
// component at a location (its main pool created) is in flight while the
// bundle's threshold there is set: once both commit, the new row is
// watched and the bundle is low exactly when it makes at most the
// threshold, before and after the next change to that row.
func TestBundleComponentRowCreatedWhileThresholdSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockInAt(t, b.pool, "MUG", "east", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 20)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})

	in := openChange(t, b.pool, "COASTER", "east", 20) // 10 boxes at east once committed
	set := setThresholdAsync(svc, "BOX", "east", ptr(int64(5)))
	waitAnsweredOrWaiting(t, b.pool, set)
	require.NoError(t, in.Commit(ctx))
	a := <-set
	require.NoError(t, a.err)
	requireBundleLowInStep(t, b.pool)

	_, _, err := svc.Hold(ctx, holdReq("coasters-east", inventory.Item{SKU: "COASTER", Quantity: 12, Location: "east"})) // 4 boxes
	require.NoError(t, err)
	requireBundleLowInStep(t, b.pool)
	require.Len(t, lowsOf(t, b.pool, "BOX"), 1, "the coaster hold took the box to its threshold")
}

// TestBundleComponentRowCreatedWhileDefined: the same with the
// definition: a component is added to a bundle with a threshold at a
// location while its first stock there is in flight.
func TestBundleComponentRowCreatedWhileDefined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockInAt(t, b.pool, "MUG", "east", 10)
	dbtest.StockIn(t, b.pool, "TRAY", 10)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1})
	_, err := svc.SetThreshold(ctx, stock.Threshold{SKU: "BOX", Location: "east", Threshold: ptr(int64(5)), Actor: "ops"})
	require.NoError(t, err)

	in := openChange(t, b.pool, "TRAY", "east", 10) // 10 boxes at east once committed
	defined := make(chan error, 1)
	go func() {
		_, err := svc.SetBundle(ctx, stock.Bundle{SKU: "BOX", Reason: "with a tray",
			Components: []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "TRAY", Quantity: 1}}}, "ops")
		defined <- err
	}()
	waitAnsweredOrWaiting(t, b.pool, defined)
	require.NoError(t, in.Commit(ctx))
	require.NoError(t, <-defined)
	requireBundleLowInStep(t, b.pool)

	_, _, err = svc.Hold(ctx, holdReq("trays-east", inventory.Item{SKU: "TRAY", Quantity: 6, Location: "east"})) // 4 boxes
	require.NoError(t, err)
	requireBundleLowInStep(t, b.pool)
	require.Len(t, lowsOf(t, b.pool, "BOX"), 1, "the tray hold took the box to its threshold")
}

// TestBundleLowRaceEveryPath races, over two instances, everything that
// moves a bundle's availability or its thresholds: holds and releases of
// its components at two locations, adjustments, a component's first
// stock at a third location, the definition set again (a component split
// or not), and the bundle's thresholds set and removed at all three. No
// write fails but as refused (out of stock, no component at a location
// yet), and once they are done the bundle is low exactly where it makes
// at most its threshold, and every row a threshold needs is watched.
func TestBundleLowRaceEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	locations := []string{stock.DefaultLocation, "east", "west"}
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.Location(t, b.pool, "west", 3)
	for _, loc := range locations[:2] {
		dbtest.StockInAt(t, b.pool, "MUG", loc, 40)
		dbtest.StockInAt(t, b.pool, "COASTER", loc, 80)
	}
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})

	const rounds = 40
	errs := make(chan error, 8*rounds)
	var wg sync.WaitGroup
	run := func(f func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	refused := func(err error, codes ...domain.Code) error {
		if err == nil || slices.Contains(codes, code(err)) {
			return nil
		}
		return err
	}
	run(func(i int) error { // the definition
		_, err := svc.SetBundle(ctx, stock.Bundle{SKU: "BOX", Reason: "again",
			Components: []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "COASTER", Quantity: 2, Split: i%2 == 0}}}, "ops")
		return err
	})
	run(func(i int) error { // the thresholds
		var threshold *int64
		if i%5 != 4 {
			threshold = ptr(int64(5 + i%15))
		}
		_, err := other.SetThreshold(ctx, stock.Threshold{SKU: "BOX", Location: locations[i%3], Threshold: threshold, Actor: "ops"})
		return refused(err, domain.CodeUnknownPool)
	})
	run(func(i int) error { // the first stock at west, then more
		_, err := svc.Adjust(ctx, stock.Adjustment{SKU: []string{"MUG", "COASTER"}[i%2], Location: "west", Pool: stock.MainPool,
			Delta: int64(1 + i%4), Reason: "in", Actor: "ops"})
		return err
	})
	for n, s := range []*inventory.Service{svc, other} {
		run(func(i int) error { // holds, half released
			sku := []string{"MUG", "COASTER"}[(i+n)%2]
			var h inventory.Reservation
			_, err := untilAnswered(func() (err error) {
				h, _, err = s.Hold(ctx, holdReq(fmt.Sprint("h", n, "-", i), inventory.Item{SKU: sku, Quantity: int64(1 + i%3), Location: locations[i%2]}))
				return err
			})
			if err != nil || i%2 == 1 {
				return refused(err, domain.CodeOutOfStock)
			}
			_, err = untilAnswered(func() error { _, err := s.Release(ctx, h.ID, shop, "back"); return err })
			return err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireBundleLowInStep(t, b.pool)
}
