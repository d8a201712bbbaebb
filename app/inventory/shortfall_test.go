package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// alertsOf is a setup whose service records the alerts it raises.
func alertsOf(t *testing.T) (*inventory.Service, *bundle, func() []stock.Alert) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []stock.Alert
	)
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Alert: func(_ context.Context, a stock.Alert) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, a)
	}}})
	return svc, b, func() []stock.Alert {
		mu.Lock()
		defer mu.Unlock()
		return append([]stock.Alert(nil), got...)
	}
}

// row reads a stock row's counters, short included.
func row(t *testing.T, svc *inventory.Service, sku, location string) stock.Counters {
	t.Helper()
	return at(t, svc, sku, location).Counters
}

// TestForcedCountShortfallLeavesWithTheHolds replays the reviewer's
// sequence: 5 in stock, 4 held, a forced count of 2. The count answered
// difference -3 while the ledger moved -1, and once the operator released
// the hold (as the alert says) available was 4 and resume passed: two
// units the count said were not on the shelf were on sale again. Now the
// two held units the shelf lacks are the row's short: whichever way the
// hold ends (released, released in parts, expired, swept, rolled back,
// released by reconciliation's repair of a stuck hold) they leave the
// books with it, in a ledger row of kind shortfall naming the count, and
// never come back as available; a confirm sells them and says so (sold_short,
// and an alert). The books balance at every step.
func TestForcedCountShortfallLeavesWithTheHolds(t *testing.T) {
	t.Parallel()
	ends := map[string]func(t *testing.T, svc *inventory.Service, b *bundle, id uuid.UUID){
		"release": func(t *testing.T, svc *inventory.Service, _ *bundle, id uuid.UUID) {
			_, err := svc.Release(context.Background(), id, shop, "customer left")
			require.NoError(t, err)
		},
		"partial release": func(t *testing.T, svc *inventory.Service, _ *bundle, id uuid.UUID) {
			ctx := context.Background()
			for range 4 {
				_, err := svc.ReleaseItems(ctx, id, shop, "one less", []inventory.Item{item("A1", 1)})
				require.NoError(t, err)
			}
		},
		"expiry": func(t *testing.T, svc *inventory.Service, b *bundle, id uuid.UUID) {
			pastExpiry(t, b.pool, id)
			run, err := svc.ExpireLoop(context.Background(), time.Now().Add(300*time.Millisecond))
			require.NoError(t, err)
			require.Equal(t, 1, run.Released)
		},
		"sweeper": func(t *testing.T, svc *inventory.Service, b *bundle, id uuid.UUID) {
			pastExpiry(t, b.pool, id)
			n, err := svc.SweepExpired(context.Background(), 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		},
		"rollback": func(t *testing.T, svc *inventory.Service, b *bundle, id uuid.UUID) {
			require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
				ended, err := svc.ReleaseTx(context.Background(), tx, []uuid.UUID{id},
					inventory.Outcome{Status: inventory.StatusReleased, Kind: "rollback", Actor: "alice", Reason: "bad batch"})
				require.Equal(t, []uuid.UUID{id}, ended)
				return err
			}))
		},
		"reconciliation": func(t *testing.T, svc *inventory.Service, b *bundle, id uuid.UUID) {
			pastExpiry(t, b.pool, id)
			require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
				ended, err := svc.ReleaseTx(context.Background(), tx, []uuid.UUID{id},
					inventory.Outcome{Status: inventory.StatusExpired, Kind: "expire", Actor: "system:reconcile", DueOnly: true})
				require.Equal(t, []uuid.UUID{id}, ended)
				return err
			}))
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc, b, _ := alertsOf(t)
			dbtest.StockIn(t, b.pool, "A1", 5)
			h, _, err := svc.Hold(ctx, holdReq("h", item("A1", 4)))
			require.NoError(t, err)
			c, _, err := svc.CountOnce(ctx, key("count"), stock.StockCount{SKU: "A1", Counted: 2, Reason: "stocktake", Actor: "alice", Force: true})
			require.NoError(t, err)
			require.EqualValues(t, -3, c.Difference)
			require.Equal(t, stock.Counters{Total: -1, Available: -1, Short: 2}, c.Changes,
				"one came off available (and total), two are owed by the hold")
			require.EqualValues(t, 2, c.ShortOfHeld)
			require.True(t, c.Forced)
			var forced bool
			var short, availableChange int64
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT forced, short_of_held, available_change FROM stock_counts WHERE id = $1`, *c.ID).
				Scan(&forced, &short, &availableChange))
			require.Equal(t, [3]any{true, int64(2), int64(-1)}, [3]any{forced, short, availableChange}, "the record says the same")
			require.Equal(t, stock.Counters{Total: 4, Reserved: 4, Short: 2}, row(t, svc, "A1", stock.DefaultLocation))
			dbtest.RequireInvariants(t, b.pool)

			end(t, svc, b, h.ID)

			require.Equal(t, stock.Counters{Total: 2, Available: 2}, row(t, svc, "A1", stock.DefaultLocation),
				"the two held units the count did not find left with the hold")
			// One shortfall row per change that paid (two of the partial
			// releases), each naming the count and the hold.
			var countRefs, holds []string
			var deltaTotal, deltaShort int64
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(DISTINCT ref), sum(delta_total), sum(delta_short),
				(SELECT array_agg(DISTINCT r) FROM ledger x, unnest(x.refs) r WHERE x.kind = 'shortfall' AND x.sku = 'A1')
				FROM ledger WHERE kind = 'shortfall' AND sku = 'A1'`).Scan(&countRefs, &deltaTotal, &deltaShort, &holds))
			require.Equal(t, []string{fmt.Sprintf("count %d", *c.ID)}, countRefs)
			require.Equal(t, [2]int64{-2, -2}, [2]int64{deltaTotal, deltaShort})
			require.Equal(t, []string{h.ID.String()}, holds)
			dbtest.RequireInvariants(t, b.pool)

			_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "counted again", Actor: "alice"}})
			require.NoError(t, err, "the books balance")
			_, _, err = svc.Hold(ctx, holdReq("too-many", item("A1", 3)))
			require.Equal(t, domain.CodeOutOfStock, code(err), "only the two on the shelf are on sale")
			_, _, err = svc.Hold(ctx, holdReq("fits", item("A1", 2)))
			require.NoError(t, err)
		})
	}

	t.Run("confirm", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc, b, alerts := alertsOf(t)
		dbtest.StockIn(t, b.pool, "A1", 5)
		h, _, err := svc.Hold(ctx, holdReq("h", item("A1", 4)))
		require.NoError(t, err)
		c, _, err := svc.CountOnce(ctx, key("count"), stock.StockCount{SKU: "A1", Counted: 2, Reason: "stocktake", Actor: "alice", Force: true})
		require.NoError(t, err)
		_, err = svc.Confirm(ctx, h.ID, shop)
		require.NoError(t, err, "a paid order is sold")
		require.Equal(t, stock.Counters{Total: 4, Sold: 4}, row(t, svc, "A1", stock.DefaultLocation))
		var ref string
		var deltaShort int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT ref, delta_short FROM ledger WHERE kind = 'sold_short' AND sku = 'A1'`).Scan(&ref, &deltaShort))
		require.Equal(t, fmt.Sprintf("count %d", *c.ID), ref)
		require.EqualValues(t, -2, deltaShort)
		var sold *stock.Alert
		for _, a := range alerts() {
			if a.Kind == "sold_short" {
				sold = &a
			}
		}
		require.NotNil(t, sold, "the shop is told: %+v", alerts())
		require.Equal(t, int64(2), sold.Details["units"])
		require.Equal(t, []string{h.ID.String()}, sold.Details["holds"])
		dbtest.RequireInvariants(t, b.pool)
	})
}

// TestCountShortfallAcrossHolds: two holds on a row short by 3 (held 5:
// 2 and 3), the short paid by the first to end and the rest by the second;
// a count that finds the missing units again takes them back (short goes
// down, nothing is added to total twice); a count not below held is
// answered and recorded forced: false even when force was asked.
func TestCountShortfallAcrossHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b, _ := alertsOf(t)
	dbtest.StockIn(t, b.pool, "A1", 6)
	h1, _, err := svc.Hold(ctx, holdReq("h1", item("A1", 2)))
	require.NoError(t, err)
	h2, _, err := svc.Hold(ctx, holdReq("h2", item("A1", 3)))
	require.NoError(t, err)

	// Not below held, force asked: the answer says forced: false, as the
	// record does.
	c, _, err := svc.CountOnce(ctx, key("c0"), stock.StockCount{SKU: "A1", Counted: 6, Reason: "check", Actor: "alice", Force: true})
	require.NoError(t, err)
	require.False(t, c.Forced)
	var forced bool
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT forced FROM stock_counts WHERE id = $1`, *c.ID).Scan(&forced))
	require.False(t, forced)

	// 2 on the shelf: 1 available gone, 3 of the 5 held are missing.
	c, _, err = svc.CountOnce(ctx, key("c1"), stock.StockCount{SKU: "A1", Counted: 2, Reason: "stocktake", Actor: "alice", Force: true})
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: -1, Available: -1, Short: 3}, c.Changes)
	// Found one again: short 2, total unchanged.
	c, _, err = svc.CountOnce(ctx, key("c2"), stock.StockCount{SKU: "A1", Counted: 3, Reason: "found one", Actor: "alice"})
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Difference)
	require.Equal(t, stock.Counters{Short: -1}, c.Changes)
	require.False(t, c.Forced)
	require.Equal(t, stock.Counters{Total: 5, Reserved: 5, Short: 2}, row(t, svc, "A1", stock.DefaultLocation))
	// A count of what is there changes nothing.
	c, _, err = svc.CountOnce(ctx, key("c3"), stock.StockCount{SKU: "A1", Counted: 3, Reason: "again", Actor: "alice"})
	require.NoError(t, err)
	require.Zero(t, c.Difference)
	require.True(t, c.Changes.Zero())

	_, err = svc.Release(ctx, h1.ID, shop, "")
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: 3, Reserved: 3}, row(t, svc, "A1", stock.DefaultLocation), "h1's 2 paid the short")
	_, err = svc.Release(ctx, h2.ID, shop, "")
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: 3, Available: 3}, row(t, svc, "A1", stock.DefaultLocation), "3 on the shelf, 3 on sale")
	dbtest.RequireInvariants(t, b.pool)
}

// TestShortfallRefusedByTheDatabase: the row's CHECK keeps short between 0
// and reserved whoever writes it.
func TestShortfallRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 5)
	for _, sql := range []string{
		`UPDATE stock SET short = 1 WHERE sku = 'A1'`,
		`UPDATE stock SET short = -1 WHERE sku = 'A1'`,
	} {
		_, err := b.pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "stock_short", sql)
	}
}

// TestShortfallRaces races releases of holds on a row a forced count found
// short against more counts, holds and confirms of it, on the batched
// paths (group commit, joined changes): whatever the order, the units a
// count found missing never come back as available, short stays within
// reserved (the database's CHECK), and the books balance.
func TestShortfallRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b, _ := alertsOf(t)
	const holds = 40
	dbtest.StockIn(t, b.pool, "R1", holds*2)
	var ids []uuid.UUID
	for i := range holds {
		h, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("h", i), item("R1", 1)))
		require.NoError(t, err)
		ids = append(ids, h.ID)
	}
	// 40 held and 40 available: a count of 30 finds every available unit
	// and 10 held units missing.
	c, _, err := svc.CountOnce(ctx, key("count"), stock.StockCount{SKU: "R1", Counted: 30, Reason: "stocktake", Actor: "alice", Force: true})
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: -40, Available: -40, Short: 10}, c.Changes)
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "R1", Reason: "go on", Actor: "alice"}})
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 4*holds)
	for i, id := range ids {
		wg.Add(2)
		go func() {
			defer wg.Done()
			var err error
			if i%4 == 0 {
				_, err = svc.Confirm(ctx, id, shop)
			} else {
				_, err = svc.Release(ctx, id, shop, "")
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			// New holds on the same row race the releases (a release that
			// joins their batch pays short first there too).
			_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("new", i), item("R1", 1)))
			if code(err) == domain.CodeOutOfStock {
				err = nil
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	dbtest.RequireInvariants(t, b.pool)
	var shortfall, soldShort int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(-sum(delta_total) FILTER (WHERE kind = 'shortfall'), 0),
		coalesce(-sum(delta_short) FILTER (WHERE kind = 'sold_short'), 0) FROM ledger WHERE sku = 'R1'`).Scan(&shortfall, &soldShort))
	now := row(t, svc, "R1", stock.DefaultLocation)
	require.Equal(t, int64(10), shortfall+soldShort+now.Short, "every unit found missing left, was sold, or is still owed: %+v", now)
	// What is on the shelf and not sold is what the count found, less what
	// left since (sold short units were never there, and are not counted).
	var sold, granted int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(l.quantity), 0) FROM reservation_lines l JOIN reservations r ON r.id = l.reservation_id
		 WHERE r.status = 'confirmed' AND l.sku = 'R1' AND r.idempotency_key LIKE 'h%'),
		(SELECT count(*) FROM reservations WHERE idempotency_key LIKE 'new%' AND status = 'held')`).Scan(&sold, &granted))
	onShelf := now.Available + now.Reserved - now.Short + now.QualityControl + now.Damaged + now.SafetyStock
	require.Equal(t, 30-(sold-soldShort), onShelf, "the shelf: 30 counted, less what was sold from it")
	require.LessOrEqual(t, granted, 30-(sold-soldShort), "no hold took a unit the count did not find")
}

// TestShortfallInTheBooks: reconciliation sums short from the ledger like
// every state; a short changed by hand is counters_vs_ledger and a repair
// to the ledger puts it back.
func TestShortfallInTheBooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b, _ := alertsOf(t)
	dbtest.StockIn(t, b.pool, "A1", 5)
	_, _, err := svc.Hold(ctx, holdReq("h", item("A1", 4)))
	require.NoError(t, err)
	_, _, err = svc.CountOnce(ctx, key("count"), stock.StockCount{SKU: "A1", Counted: 2, Reason: "stocktake", Actor: "alice", Force: true})
	require.NoError(t, err)
	rows, err := db.New(b.pool).StockLedgerMismatchDeep(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, rows, "short is in the ledger")

	_, err = b.pool.Exec(ctx, `UPDATE stock SET short = 0 WHERE sku = 'A1'`)
	require.NoError(t, err)
	rows, err = db.New(b.pool).StockLedgerMismatchDeep(ctx, nil)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, [2]int64{0, 2}, [2]int64{rows[0].Short, rows[0].LedgerShort})
	fixed, err := svc.Repair(ctx, stock.RepairRequest{SKU: "A1", To: stock.RepairToLedger, Reason: "short edited", Actor: "alice"})
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Short: 2}, fixed.Difference)
	require.EqualValues(t, 2, row(t, svc, "A1", stock.DefaultLocation).Short)
	dbtest.RequireInvariants(t, b.pool)
}

// TestJoinedReleasePaysShortfall: a release that joins the hold batch busy
// with its row (batch_joined.go) pays the row's short there too, and that
// batch's grants see only what is left: 2 held, 1 of them counted missing,
// released while two holds of 1 wait in the same batch: one is granted
// in the release's transaction, the other refused, and the database never
// has to refuse what the batch decided (no change_refused).
func TestJoinedReleasePaysShortfall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b, alerts := alertsOf(t)
	dbtest.StockIn(t, b.pool, "J1", 5)
	h, _, err := svc.Hold(ctx, holdReq("h", item("J1", 2)))
	require.NoError(t, err)
	_, _, err = svc.CountOnce(ctx, key("count"), stock.StockCount{SKU: "J1", Counted: 1, Reason: "stocktake", Actor: "alice", Force: true})
	require.NoError(t, err)
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "J1", Reason: "go on", Actor: "alice"}})
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: 2, Reserved: 2, Short: 1}, row(t, svc, "J1", stock.DefaultLocation))

	started, release := blockBatch(svc)
	defer release()
	blocker := holdReq("blocker", item("J1", 1))
	blocker.OrderRef = "blocker"
	blocked := make(chan error, 1)
	go func() {
		_, _, err := svc.Hold(ctx, blocker)
		blocked <- err
	}()
	<-started
	cancelled := make(chan error, 1)
	go func() {
		_, err := svc.Release(ctx, h.ID, shop, "")
		cancelled <- err
	}()
	require.Eventually(t, func() bool { return inventory.PendingHolds(svc) == 1 }, 10*time.Second, time.Millisecond,
		"the release waits for the hold batch busy with its row")
	type answer struct {
		r   inventory.Reservation
		err error
	}
	asked := make(chan answer, 2)
	for i := range 2 {
		go func() {
			r, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("ask", i), item("J1", 1)))
			asked <- answer{r, err}
		}()
	}
	require.Eventually(t, func() bool { return inventory.PendingHolds(svc) == 3 }, 10*time.Second, time.Millisecond)
	inventory.SetBeforeGrant(svc, nil)
	release()
	require.Equal(t, domain.CodeOutOfStock, code(<-blocked), "nothing was available for the blocker")
	require.NoError(t, <-cancelled)
	var granted []inventory.Reservation
	var refused []error
	for range 2 {
		a := <-asked
		if a.err == nil {
			granted = append(granted, a.r)
		} else {
			refused = append(refused, a.err)
		}
	}
	require.Len(t, granted, 1, "one unit of the two released was on the shelf: %v", refused)
	require.Len(t, refused, 1)
	require.Equal(t, domain.CodeOutOfStock, code(refused[0]))
	require.True(t, sameTransaction(t, b, h.ID, "release", granted[0].ID, "reserve"), "the release joined the batch")
	for _, a := range alerts() {
		require.NotEqual(t, "change_refused", a.Kind, "%+v", a)
	}
	require.Equal(t, stock.Counters{Total: 1, Reserved: 1}, row(t, svc, "J1", stock.DefaultLocation))
	dbtest.RequireInvariants(t, b.pool)
}
