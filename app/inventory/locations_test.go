package inventory_test

import (
	"context"

	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// warehouses adds paris (priority 1), lyon and berlin (both 2: berlin
// before lyon by id).
func warehouses(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	dbtest.Location(t, pool, "paris", 1)
	dbtest.Location(t, pool, "lyon", 2)
	dbtest.Location(t, pool, "berlin", 2)
}

// at returns sku's main pool at location.
func at(t *testing.T, svc *inventory.Service, sku, location string) stock.Pool {
	t.Helper()
	st, err := svc.GetStock(context.Background(), sku)
	require.NoError(t, err)
	for _, p := range st.Pools {
		if p.Location == location && p.Pool == stock.MainPool {
			return p
		}
	}
	t.Fatalf("no main pool of %s at %s", sku, location)
	return stock.Pool{}
}

func key(name string) idempotency.Key { return idempotency.NewKey("ops", name) }

// TestHoldsAllocateAcrossLocations: a line is taken from the location it
// names, else from the first location by priority that has it all, split
// only when asked; the answer says where; confirm sells there and a
// release gives each part back where it came from.
func TestHoldsAllocateAcrossLocations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 2)
	dbtest.StockInAt(t, b.pool, "A1", "lyon", 5)
	dbtest.StockInAt(t, b.pool, "A1", "berlin", 3)

	// Paris comes first but has 2: the first that fills 3 is berlin
	// (priority 2, before lyon by id).
	r, _, err := svc.Hold(ctx, holdReq("h1", item("A1", 3)))
	require.NoError(t, err)
	require.Equal(t, []inventory.HeldItem{{SKU: "A1", Pool: "main", Quantity: 3, Location: "berlin"}}, r.Items)
	require.EqualValues(t, 3, at(t, svc, "A1", "berlin").Reserved)

	// No one location has 6 left (2, 5, 0): refused, unless split.
	_, _, err = svc.Hold(ctx, holdReq("h2", item("A1", 6)))
	require.Equal(t, domain.CodeOutOfStock, code(err))
	split, _, err := svc.Hold(ctx, holdReq("h3", inventory.Item{SKU: "A1", Quantity: 6, Split: true}))
	require.NoError(t, err)
	require.Equal(t, []inventory.HeldItem{{SKU: "A1", Pool: "main", Quantity: 6, Allocations: []inventory.Allocation{
		{Location: "lyon", Quantity: 4}, {Location: "paris", Quantity: 2}}}}, split.Items,
		"paris first (2), then lyon (4): listed by location id")
	again, err := svc.Get(ctx, split.ID, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err)
	require.Equal(t, split.Items, again.Items, "read back as answered")

	// A named location is used whoever comes first.
	named, _, err := svc.Hold(ctx, holdReq("h4", inventory.Item{SKU: "A1", Quantity: 1, Location: "lyon"}))
	require.NoError(t, err)
	require.Equal(t, "lyon", named.Items[0].Location)

	// Confirm sells where the lines were held; a release gives each part
	// back where it came from.
	_, err = svc.Confirm(ctx, r.ID, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err)
	require.EqualValues(t, 3, at(t, svc, "A1", "berlin").Sold)
	_, err = svc.Release(ctx, split.ID, inventory.Caller{Name: "shop-a"}, "")
	require.NoError(t, err)
	require.EqualValues(t, 2, at(t, svc, "A1", "paris").Available)
	require.EqualValues(t, 4, at(t, svc, "A1", "lyon").Available)

	// A partial release of a SKU held at several locations names the
	// location.
	split2, _, err := svc.Hold(ctx, holdReq("h5", inventory.Item{SKU: "A1", Quantity: 6, Split: true}))
	require.NoError(t, err)
	_, err = svc.ReleaseItems(ctx, split2.ID, inventory.Caller{Name: "shop-a"}, "", []inventory.Item{item("A1", 1)})
	require.Equal(t, domain.CodeInvalid, code(err), "held at two locations: which one?")
	part, err := svc.ReleaseItems(ctx, split2.ID, inventory.Caller{Name: "shop-a"}, "",
		[]inventory.Item{{SKU: "A1", Quantity: 1, Location: "paris"}})
	require.NoError(t, err)
	require.Equal(t, []inventory.Allocation{{Location: "lyon", Quantity: 4}, {Location: "paris", Quantity: 1}}, part.Items[0].Allocations)
	require.EqualValues(t, 1, at(t, svc, "A1", "paris").Available)
}

// TestLocationSwitches: an inactive location takes no new hold (named:
// location_inactive; allocated: skipped) while its holds finish normally;
// a key bound to locations allocates only there and may not name another;
// a location's own stop-sale is skipped, or 503 when named.
func TestLocationSwitches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 5)
	dbtest.StockInAt(t, b.pool, "A1", "lyon", 5)

	before, _, err := svc.Hold(ctx, holdReq("before", item("A1", 1)))
	require.NoError(t, err)
	require.Equal(t, "paris", before.Items[0].Location)
	off := false
	_, err = svc.UpdateLocation(ctx, stock.LocationChange{ID: "paris", Active: &off, Actor: "alice"})
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("named", inventory.Item{SKU: "A1", Quantity: 1, Location: "paris"}))
	require.Equal(t, domain.CodeLocationInactive, code(err))
	r, _, err := svc.Hold(ctx, holdReq("allocated", item("A1", 1)))
	require.NoError(t, err)
	require.Equal(t, "lyon", r.Items[0].Location, "an inactive location is skipped")
	_, err = svc.Confirm(ctx, before.ID, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err, "a hold at an inactive location finishes normally")
	require.EqualValues(t, 1, at(t, svc, "A1", "paris").Sold)

	// A key bound to berlin alone: nothing there.
	bound := holdReq("bound", item("A1", 1))
	bound.Locations = []string{"berlin"}
	_, _, err = svc.Hold(ctx, bound)
	require.Equal(t, domain.CodeOutOfStock, code(err))
	bound = holdReq("bound-2", inventory.Item{SKU: "A1", Quantity: 1, Location: "lyon"})
	bound.Locations = []string{"berlin"}
	_, _, err = svc.Hold(ctx, bound)
	require.Equal(t, domain.CodeLocationNotAllowed, code(err))

	// Sales stopped at lyon alone.
	_, err = svc.SetStopSale(ctx, stock.StopSaleChange{Active: true, Reason: "flood", Actor: "alice", Location: "lyon"})
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("stopped", inventory.Item{SKU: "A1", Quantity: 1, Location: "lyon"}))
	require.Equal(t, domain.CodeStopSale, code(err))
	_, _, err = svc.Hold(ctx, holdReq("stopped-2", item("A1", 1)))
	require.Equal(t, domain.CodeStopSale, code(err), "paris inactive, lyon stopped: its stock is there, out of sale")
	st, err := svc.StopSales(ctx)
	require.NoError(t, err)
	require.False(t, st.Active)
	require.Len(t, st.Locations, 1)
	require.Equal(t, "lyon", st.Locations[0].Location)
	require.True(t, st.Locations[0].Active)
	flipped, err := svc.SetStopSale(ctx, stock.StopSaleChange{Active: false, Reason: "dry again", Actor: "alice", Location: "lyon"})
	require.NoError(t, err)
	require.False(t, flipped.Active)
	require.NotNil(t, flipped.Lifted, "turning it off answers what it lifted")
	require.Equal(t, "flood", *flipped.Lifted.Reason)
	_, _, err = svc.Hold(ctx, holdReq("stopped-3", item("A1", 1)))
	require.NoError(t, err)

	// Unknown locations.
	_, _, err = svc.Hold(ctx, holdReq("nowhere", inventory.Item{SKU: "A1", Quantity: 1, Location: "madrid"}))
	require.Equal(t, domain.CodeUnknownLocation, code(err))
	_, err = svc.Adjust(ctx, stock.Adjustment{SKU: "A1", Location: "madrid", Delta: 1, Reason: "x", Actor: "alice"})
	require.Equal(t, domain.CodeUnknownLocation, code(err))
}

// TestMovesBetweenStates: units move among available, quality control,
// damaged and safety stock, never below zero (409 naming the state), to
// lost as a write-off out of total, each with its ledger row; a dry run
// changes nothing.
func TestMovesBetweenStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "berlin", 1)
	dbtest.StockInAt(t, b.pool, "A1", "berlin", 10)
	move := func(name, from, to string, q int64) error {
		_, _, err := svc.MoveOnce(ctx, key(name), stock.Move{SKU: "A1", Location: "berlin", From: from, To: to,
			Quantity: q, Reason: "check", Actor: "alice"})
		return err
	}
	require.NoError(t, move("m1", stock.StateAvailable, stock.StateQualityControl, 4))
	require.NoError(t, move("m2", stock.StateQualityControl, stock.StateDamaged, 3))
	require.NoError(t, move("m3", stock.StateAvailable, stock.StateSafetyStock, 2))
	p := at(t, svc, "A1", "berlin")
	require.Equal(t, [6]int64{10, 4, 1, 3, 2, 0}, [6]int64{p.Total, p.Available, p.QualityControl, p.Damaged, p.SafetyStock, p.Incoming})

	err := move("m4", stock.StateDamaged, stock.StateAvailable, 4)
	require.Equal(t, domain.InsufficientCode(stock.StateDamaged), code(err), "never below zero, and the code names the state")
	require.NoError(t, move("m5", stock.StateDamaged, stock.StateLost, 3))
	p = at(t, svc, "A1", "berlin")
	require.EqualValues(t, 7, p.Total, "a write-off leaves total")
	require.Zero(t, p.Damaged)

	// The Idempotency-Key replays; a dry run changes nothing.
	require.NoError(t, move("m5", stock.StateDamaged, stock.StateLost, 3))
	preview, err := svc.MovePreview(ctx, stock.Move{SKU: "A1", Location: "berlin", From: "available", To: "damaged", Quantity: 4, Reason: "x", Actor: "alice"})
	require.NoError(t, err)
	require.Zero(t, preview.Pools[0].Available)
	require.EqualValues(t, 4, at(t, svc, "A1", "berlin").Available)
	var kinds []string
	rows, err := b.pool.Query(ctx, `SELECT kind FROM ledger WHERE sku = 'A1' AND location = 'berlin' ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kinds = append(kinds, k)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"stock_in", "move", "move", "move", "loss"}, kinds)

	// A held unit is not available to move.
	_, _, err = svc.Hold(ctx, holdReq("h", item("A1", 4)))
	require.NoError(t, err)
	require.Equal(t, domain.CodeInsufficientAvailable, code(move("m6", stock.StateAvailable, stock.StateDamaged, 1)))
}

// TestTransfers: a transfer takes units out of available at from and shows
// them incoming at to; partial receipts move them into available there; a
// close writes off what never arrived (ledger kind loss); a cancel before
// any receipt gives them back; every wrong step is refused and changes
// nothing; incoming is always what is in transit.
func TestTransfers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	send := func(name string, q int64) (stock.Transfer, error) {
		tr, _, err := svc.CreateTransferOnce(ctx, key(name), stock.NewTransfer{SKU: "A1", From: "paris", To: "berlin",
			Quantity: q, Reason: "rebalance", Actor: "alice"})
		return tr, err
	}
	_, err := send("too-many", 11)
	require.Equal(t, domain.CodeInsufficientAvailable, code(err))
	t1, err := send("t1", 6)
	require.NoError(t, err)
	require.Equal(t, stock.TransferInTransit, t1.Status)
	require.EqualValues(t, 4, at(t, svc, "A1", "paris").Total, "the units left from")
	berlin := at(t, svc, "A1", "berlin")
	require.EqualValues(t, 6, berlin.Incoming)
	require.Zero(t, berlin.Total, "incoming is not on hand")

	got, err := svc.ReceiveTransfer(ctx, stock.TransferStep{ID: t1.ID, Quantity: 4, Actor: "bob"})
	require.NoError(t, err)
	require.EqualValues(t, 2, got.InTransit)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: t1.ID, Quantity: 3, Actor: "bob"})
	require.Equal(t, domain.CodeInsufficientIncoming, code(err), "more than is in transit")
	_, err = svc.CancelTransfer(ctx, stock.TransferStep{ID: t1.ID, Reason: "oops", Actor: "bob"})
	require.Equal(t, domain.CodeTransferPartlyReceived, code(err))
	closed, err := svc.CloseTransfer(ctx, stock.TransferStep{ID: t1.ID, Reason: "pallet 2 never came", Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.TransferClosed, closed.Status)
	require.EqualValues(t, 2, closed.Lost)
	berlin = at(t, svc, "A1", "berlin")
	require.Equal(t, [3]int64{4, 4, 0}, [3]int64{berlin.Total, berlin.Available, berlin.Incoming})
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: t1.ID, Quantity: 1, Actor: "bob"})
	require.Equal(t, domain.CodeTransferNotInTransit, code(err))
	var lossIncoming int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT delta_incoming FROM ledger WHERE kind = 'loss' AND ref = $1`, t1.ID.String()).Scan(&lossIncoming))
	require.EqualValues(t, -2, lossIncoming, "lost in transit, never silently")

	t2, err := send("t2", 3)
	require.NoError(t, err)
	cancelled, err := svc.CancelTransfer(ctx, stock.TransferStep{ID: t2.ID, Reason: "wrong SKU", Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.TransferCancelled, cancelled.Status)
	require.EqualValues(t, 4, at(t, svc, "A1", "paris").Available, "given back to from")
	require.Zero(t, at(t, svc, "A1", "berlin").Incoming)

	t3, err := send("t3", 2)
	require.NoError(t, err)
	page, err := svc.Transfers(ctx, stock.TransferFilter{Status: stock.TransferInTransit, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Transfers, 1)
	require.Equal(t, t3.ID, page.Transfers[0].ID)
	all, err := svc.Transfers(ctx, stock.TransferFilter{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{t1.ID, t2.ID}, []uuid.UUID{all.Transfers[0].ID, all.Transfers[1].ID}, "oldest first")
	require.NotNil(t, all.NextCursor)
	full, err := svc.ReceiveTransfer(ctx, stock.TransferStep{ID: t3.ID, Quantity: 2, Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.TransferReceived, full.Status)
}

// TestCounts: a count's difference goes to available, what available
// cannot give taken from the states not for sale; a count below what holds
// hold is refused, or, forced, recorded with the pool paused and an alert
// naming the holds at risk.
func TestCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu     sync.Mutex
		alerts []stock.Alert
	)
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Alert: func(_ context.Context, a stock.Alert) {
		mu.Lock()
		defer mu.Unlock()
		alerts = append(alerts, a)
	}}})
	dbtest.StockIn(t, b.pool, "A1", 10)
	_, _, err := svc.MoveOnce(ctx, key("m"), stock.Move{SKU: "A1", From: "available", To: "damaged", Quantity: 2, Reason: "x", Actor: "alice"})
	require.NoError(t, err)
	h, _, err := svc.Hold(ctx, holdReq("h", item("A1", 3)))
	require.NoError(t, err)
	// On the shelf: 5 available, 3 reserved, 2 damaged.
	count := func(name string, counted int64, force bool) (stock.Counted, error) {
		out, _, err := svc.CountOnce(ctx, key(name), stock.StockCount{SKU: "A1", Counted: counted, Reason: "monthly count", Actor: "alice", Force: force})
		return out, err
	}
	c, err := count("c1", 12, false)
	require.NoError(t, err)
	require.Equal(t, [3]int64{12, 10, 2}, [3]int64{c.Counted, c.OnShelf, c.Difference})
	p := at(t, svc, "A1", stock.DefaultLocation)
	require.EqualValues(t, 7, p.Available)
	c, err = count("c2", 4, false)
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: -8, Available: -7, Damaged: -1}, c.Changes, "available gives 7, damaged the last one")
	preview, err := svc.CountPreview(ctx, stock.StockCount{SKU: "A1", Counted: 2, Reason: "x", Actor: "alice"})
	require.Equal(t, domain.CodeCountBelowHeld, code(err), "a dry run meets the same refusal: %+v", preview)
	_, err = count("c3", 2, false)
	require.Equal(t, domain.CodeCountBelowHeld, code(err))
	c, err = count("c4", 2, true)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.ShortOfHeld)
	require.Len(t, c.HoldsAtRisk, 1)
	require.Equal(t, h.ID.String(), c.HoldsAtRisk[0].ID)
	p = at(t, svc, "A1", stock.DefaultLocation)
	require.Equal(t, stock.StockPaused, p.Status)
	require.Equal(t, [3]int64{3, 0, 0}, [3]int64{p.Total, p.Available, p.Damaged}, "the held units stay held")
	mu.Lock()
	require.Len(t, alerts, 1)
	require.Equal(t, "count_below_held", alerts[0].Kind)
	mu.Unlock()
	var recorded int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM stock_counts WHERE sku = 'A1'`).Scan(&recorded))
	require.Equal(t, 3, recorded, "each count applied is recorded, the refused ones are not")
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "counted again", Actor: "alice"}})
	require.NoError(t, err)
}

// TestLocationsList: locations list with their totals, in pages.
func TestLocationsList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	l, _, err := svc.CreateLocationOnce(ctx, key("berlin"), stock.NewLocation{ID: "berlin", Name: "Berlin", Priority: 1, Actor: "alice"})
	require.NoError(t, err)
	require.True(t, l.Active)
	_, _, err = svc.CreateLocationOnce(ctx, key("berlin-2"), stock.NewLocation{ID: "berlin", Name: "Berlin", Actor: "alice"})
	require.Equal(t, domain.CodeConflict, code(err))
	dbtest.StockInAt(t, b.pool, "A1", "berlin", 4)
	dbtest.StockInAt(t, b.pool, "B2", "berlin", 6)
	dbtest.StockIn(t, b.pool, "A1", 1)
	page, err := svc.Locations(ctx, "", 1)
	require.NoError(t, err)
	require.Len(t, page.Locations, 1)
	require.Equal(t, "berlin", page.Locations[0].ID)
	require.Equal(t, stock.LocationTotals{Rows: 2, Counters: stock.Counters{Total: 10, Available: 10}}, *page.Locations[0].Totals)
	require.NotNil(t, page.NextCursor)
	page, err = svc.Locations(ctx, *page.NextCursor, 10)
	require.NoError(t, err)
	require.Equal(t, "default", page.Locations[0].ID)
	require.EqualValues(t, 1, page.Locations[0].Totals.Total)
	require.Nil(t, page.NextCursor)
	_, err = svc.UpdateLocation(ctx, stock.LocationChange{ID: "nowhere", Name: ptr("x"), Actor: "alice"})
	require.Equal(t, domain.CodeUnknownLocation, code(err))
}

func ptr[T any](v T) *T { return &v }
