package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// inDays is the day n days from today, as an inbound notice's expected_on.
func inDays(n int) string { return time.Now().UTC().AddDate(0, 0, n).Format(time.DateOnly) }

// expect records a supplier's notice of q units of sku due in days.
func expect(t *testing.T, svc *inventory.Service, name, sku string, q int64, days int) stock.Inbound {
	t.Helper()
	i, _, err := svc.CreateInboundOnce(context.Background(), idempotency.NewKey("ops", name), stock.NewInbound{SupplierRef: name,
		ExpectedOn: inDays(days), Lines: []stock.NewInboundLine{{SKU: sku, Quantity: q}}, Actor: "ops"})
	require.NoError(t, err)
	return i
}

// TestBackordersRace races 1,000 holds of one unit on a SKU with 50 on
// hand, 100 expected from a supplier within the policy's horizon and 20
// allowed below zero, over two instances: exactly 170 are granted (50
// from the shelf, 120 promised), every other is refused out_of_stock, and
// the database's CHECK refuses a promise past the policy written by hand.
func TestBackordersRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "PRE", 50)
	expect(t, svc, "PO-PRE", "PRE", 100, 3)
	expect(t, svc, "PO-LATE", "PRE", 500, 30) // beyond the horizon: never promised
	_, err := svc.SetBackorders(ctx, stock.Backorders{SKU: "PRE", BelowZero: 20, HorizonDays: ptr[int32](7)}, "ops")
	require.NoError(t, err)

	var (
		work              sync.WaitGroup
		granted, promised atomic.Int64
		refused           atomic.Int64
		errs              = make(chan error, 1000)
	)
	for w := range 20 {
		s := svc
		if w%2 == 1 {
			s = other
		}
		work.Go(func() {
			for i := range 50 {
				r, err := untilHeld(ctx, s, holdReq(fmt.Sprintf("w%d-%d", w, i), item("PRE", 1)))
				switch {
				case code(err) == domain.CodeOutOfStock:
					refused.Add(1)
				case err != nil:
					errs <- err
				default:
					granted.Add(1)
					promised.Add(r.Items[0].Backordered)
				}
			}
		})
	}
	work.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 170, granted.Load(), "50 on hand + 100 incoming within the horizon + 20 below zero")
	require.EqualValues(t, 830, refused.Load())
	require.EqualValues(t, 120, promised.Load())
	p := pool(t, svc, "PRE", stock.MainPool)
	require.EqualValues(t, 0, p.Available)
	require.EqualValues(t, 50, p.Reserved)
	require.EqualValues(t, 120, p.Backordered)
	require.EqualValues(t, 600, p.Incoming)

	// The database refuses a promise past below_zero plus everything
	// incoming (the horizon is the hold batch's), whatever the code does:
	// 120 + 500 is 620, one more than 20 + 600.
	_, err = b.pool.Exec(ctx, "UPDATE stock SET backordered = backordered + 500 WHERE sku = 'PRE'")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE stock SET backordered = backordered - 500 WHERE sku = 'PRE'")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE stock SET backordered = backordered + 501 WHERE sku = 'PRE'")
	require.ErrorContains(t, err, "stock_backordered")
	// A policy below what is promised is refused and changes nothing.
	_, err = svc.SetBackorders(ctx, stock.Backorders{SKU: "PRE", BelowZero: 19, HorizonDays: ptr[int32](7)}, "ops")
	require.Equal(t, domain.CodeBackordersPromised, code(err))
	require.Equal(t, domain.CodeBackordersPromised, code(svc.DeleteBackorders(ctx, "PRE", "")))
	got, err := svc.GetBackorders(ctx, "PRE", "")
	require.NoError(t, err)
	require.EqualValues(t, 20, got.BelowZero)
	require.Equal(t, []stock.BackorderRow{{Location: "default", Backordered: 120, Allowed: 120}}, got.Rows)
}

// untilHeld holds r, again while the answer is busy.
func untilHeld(ctx context.Context, svc *inventory.Service, r inventory.HoldRequest) (inventory.Reservation, error) {
	var out inventory.Reservation
	_, err := untilAnswered(func() error {
		var err error
		out, _, err = svc.Hold(ctx, r)
		return err
	})
	return out, err
}

// TestBackorderLifecycle follows promised units: a hold takes what is on
// hand and promises the rest (its answer says how many and when they are
// expected), a confirm sells them still promised, a release gives a
// promise back, and a receipt fills confirmed holds first, oldest first,
// then held ones, with a ledger row (and event) per hold filled.
func TestBackorderLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "LAUNCH", 2)
	po := expect(t, svc, "PO-L", "LAUNCH", 10, 5)
	_, err := svc.SetBackorders(ctx, stock.Backorders{SKU: "LAUNCH", HorizonDays: ptr[int32](14)}, "ops")
	require.NoError(t, err)

	first, _, err := svc.Hold(ctx, holdReq("first", item("LAUNCH", 3)))
	require.NoError(t, err)
	require.EqualValues(t, 1, first.Items[0].Backordered)
	require.Equal(t, inDays(5), first.Items[0].ExpectedOn)
	again, replayed, err := svc.Hold(ctx, holdReq("first", item("LAUNCH", 3)))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Items, again.Items, "a replay answers the promise as first made")

	second, _, err := svc.Hold(ctx, holdReq("second", item("LAUNCH", 4)))
	require.NoError(t, err)
	require.EqualValues(t, 4, second.Items[0].Backordered)
	third, _, err := svc.Hold(ctx, holdReq("third", item("LAUNCH", 2)))
	require.NoError(t, err)
	gone, _, err := svc.Hold(ctx, holdReq("gone", item("LAUNCH", 2)))
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("over", item("LAUNCH", 2)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "10 incoming: 1 + 4 + 2 + 2 promised, 1 left")

	_, err = svc.Confirm(ctx, second.ID, shop)
	require.NoError(t, err)
	_, err = svc.Confirm(ctx, first.ID, shop)
	require.NoError(t, err)
	_, err = svc.Release(ctx, gone.ID, shop, "cart abandoned")
	require.NoError(t, err)
	p := pool(t, svc, "LAUNCH", stock.MainPool)
	require.EqualValues(t, 2, p.Sold)
	require.EqualValues(t, 7, p.Backordered)

	// 5 arrive: second (confirmed first) takes 4, first 1; third waits.
	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: po.ID, SKU: "LAUNCH", Quantity: 5, Actor: "dock"})
	require.NoError(t, err)
	p = pool(t, svc, "LAUNCH", stock.MainPool)
	require.EqualValues(t, 7, p.Sold)
	require.EqualValues(t, 2, p.Backordered)
	require.EqualValues(t, 0, p.Available)
	var fills []string
	rows, err := b.pool.Query(ctx, `SELECT reservation_id::text || ':' || (-delta_backordered)::text FROM ledger
		WHERE kind = 'backorder_fill' AND sku = 'LAUNCH' ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		fills = append(fills, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{second.ID.String() + ":4", first.ID.String() + ":1"}, fills)

	// 3 more: third's 2 (held) are filled, 1 stays available.
	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: po.ID, SKU: "LAUNCH", Quantity: 3, Actor: "dock"})
	require.NoError(t, err)
	p = pool(t, svc, "LAUNCH", stock.MainPool)
	require.EqualValues(t, 0, p.Backordered)
	require.EqualValues(t, 2, p.Reserved)
	require.EqualValues(t, 1, p.Available)
	got, err := svc.Get(ctx, third.ID, shop)
	require.NoError(t, err)
	require.Zero(t, got.Items[0].Backordered)
	require.NoError(t, svc.DeleteBackorders(ctx, "LAUNCH", ""))
}

// TestBackorderReceiptsRace races a supplier's receipts (60 units, 3 at a
// time) against new holds (confirmed, released or left held) and the
// release of holds promised before: the ten holds confirmed before the
// race are filled first, in the order they were confirmed, each whole;
// no hold is ever filled past what it was promised; and once everything
// arrived, whatever is still promised waits on units available (a hold a
// receipt skipped while it was being changed), never on nothing.
func TestBackorderReceiptsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	po := expect(t, svc, "PO-R", "RACE", 60, 2)
	_, err := svc.SetBackorders(ctx, stock.Backorders{SKU: "RACE", HorizonDays: ptr[int32](7)}, "ops")
	require.NoError(t, err)
	var confirmed, held []inventory.Reservation
	for i := range 20 {
		r, _, err := svc.Hold(ctx, holdReq(fmt.Sprintf("pre-%d", i), item("RACE", 1)))
		require.NoError(t, err)
		require.EqualValues(t, 1, r.Items[0].Backordered)
		held = append(held, r)
	}
	for _, i := range []int{7, 2, 9, 0, 4, 1, 8, 3, 6, 5} { // confirmed in this order: the oldest first
		_, err := svc.Confirm(ctx, held[i].ID, shop)
		require.NoError(t, err)
		confirmed = append(confirmed, held[i])
	}
	held = held[10:]

	var (
		work sync.WaitGroup
		errs = make(chan error, 200)
	)
	work.Go(func() {
		for range 20 {
			if _, err := svc.ReceiveInbound(ctx, stock.InboundStep{ID: po.ID, SKU: "RACE", Quantity: 3, Actor: "dock"}); err != nil {
				errs <- err
			}
		}
	})
	work.Go(func() {
		for _, r := range held[:5] {
			if _, err := svc.Release(ctx, r.ID, shop, "changed my mind"); err != nil {
				errs <- err
			}
		}
	})
	for w := range 4 {
		work.Go(func() {
			for i := range 15 {
				r, err := untilHeld(ctx, svc, holdReq(fmt.Sprintf("w%d-%d", w, i), item("RACE", 1)))
				if code(err) == domain.CodeOutOfStock {
					continue
				}
				if err != nil {
					errs <- err
					continue
				}
				switch i % 3 {
				case 0:
					_, err = svc.Confirm(ctx, r.ID, shop)
				case 1:
					_, err = svc.Release(ctx, r.ID, shop, "")
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	work.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	rows, err := b.pool.Query(ctx, `SELECT f.reservation_id::text, -f.delta_backordered,
		       (SELECT g.delta_backordered FROM ledger g WHERE g.reservation_id = f.reservation_id AND g.kind = 'reserve')
		FROM ledger f WHERE f.kind = 'backorder_fill' AND f.sku = 'RACE' ORDER BY f.id`)
	require.NoError(t, err)
	var order []string
	filled := map[string]int64{}
	for rows.Next() {
		var (
			id             string
			n, promisedNow int64
		)
		require.NoError(t, rows.Scan(&id, &n, &promisedNow))
		order = append(order, id)
		filled[id] += n
		require.LessOrEqual(t, filled[id], promisedNow, "hold %s filled past its promise", id)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(order), 10)
	for i, r := range confirmed {
		require.Equal(t, r.ID.String(), order[i], "fill %d: the confirmed holds first, the oldest first", i)
	}
	p := pool(t, svc, "RACE", stock.MainPool)
	require.Zero(t, p.Incoming)
	require.LessOrEqual(t, p.Backordered, p.Available, "what is still promised waits on units available")
	t.Logf("%d fills; %d promised, %d available, %d reserved, %d sold at the end", len(order), p.Backordered, p.Available, p.Reserved, p.Sold)
}

// TestBackorderIncomingPromised closes and cancels what holds were
// promised: refused 409 incoming_promised, nothing changed, until the
// holds are released.
func TestBackorderIncomingPromised(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _ := setup(t, nil)
	po := expect(t, svc, "PO-S", "SOON", 5, 1)
	_, err := svc.SetBackorders(ctx, stock.Backorders{SKU: "SOON", HorizonDays: ptr[int32](3)}, "ops")
	require.NoError(t, err)
	r, _, err := svc.Hold(ctx, holdReq("soon", item("SOON", 4)))
	require.NoError(t, err)
	require.EqualValues(t, 4, r.Items[0].Backordered)
	_, err = svc.CloseInbound(ctx, stock.InboundStep{ID: po.ID, Reason: "supplier short", Actor: "dock"})
	require.Equal(t, domain.CodeIncomingPromised, code(err))
	_, err = svc.CancelInbound(ctx, stock.InboundStep{ID: po.ID, Reason: "withdrawn", Actor: "dock"})
	require.Equal(t, domain.CodeIncomingPromised, code(err))
	require.EqualValues(t, 5, pool(t, svc, "SOON", stock.MainPool).Incoming)
	_, err = svc.Release(ctx, r.ID, shop, "order cancelled")
	require.NoError(t, err)
	_, err = svc.CancelInbound(ctx, stock.InboundStep{ID: po.ID, Reason: "withdrawn", Actor: "dock"})
	require.NoError(t, err)
	p := pool(t, svc, "SOON", stock.MainPool)
	require.Zero(t, p.Backordered)
	require.Zero(t, p.Incoming)
}
