package stock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// detailOf is a domain error's detail.
func detailOf(t *testing.T, err error) string {
	t.Helper()
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	return de.Detail
}

// TestUnitsRefusedWhileStockIsPlainOrIncoming replays the reviewer's
// sequence: units with an identity added at a transfer's destination while
// it was in transit left the transfer unmovable (receive, close and cancel
// all 409 serialized_pool, the units incoming for ever). Units are now
// refused while any row of the pool expects stock (incoming) or holds
// stock without an identity, here or at another location, and the
// transfer lands.
func TestUnitsRefusedWhileStockIsPlainOrIncoming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "T1", "paris", 5)
	tr, _, err := svc.CreateTransferOnce(ctx, key("t"), stock.NewTransfer{SKU: "T1", From: "paris", To: "berlin", Quantity: 5, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	units := func(name, location string) error {
		_, _, err := svc.AddUnitsOnce(ctx, key(name), stock.UnitsChange{SKU: "T1", Location: location, Reason: "serials", Actor: "alice",
			Units: []stock.UnitSpec{{ID: name + "-1"}}})
		return err
	}
	err = units("at-berlin", "berlin")
	require.Equal(t, domain.CodeConflict, code(err), "5 incoming at berlin: %v", err)
	require.Contains(t, detailOf(t, err), "5 incoming at berlin")
	err = units("at-paris", "paris")
	require.Equal(t, domain.CodeConflict, code(err), "paris sent everything (total 0), but berlin expects it: %v", err)
	got, err := svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 5, Actor: "bob"})
	require.NoError(t, err, "the transfer lands")
	require.Equal(t, stock.TransferReceived, got.Status)

	// Plain stock at berlin now: units are refused there and elsewhere.
	err = units("at-berlin-2", "berlin")
	require.Equal(t, domain.CodeConflict, code(err))
	require.Contains(t, detailOf(t, err), "has 5 units of stock without an identity at berlin")
	err = units("at-lyon", "lyon")
	require.Equal(t, domain.CodeConflict, code(err), "plain stock of the pool at berlin: %v", err)
	require.Contains(t, detailOf(t, err), "at berlin")
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM units WHERE sku = 'T1'`))

	// A pool with no stock anywhere takes units, and then no stock without
	// an identity elsewhere.
	addUnits(t, svc, "T2", []stock.UnitSpec{{ID: "s-1"}})
	_, err = svc.Adjust(ctx, stock.Adjustment{SKU: "T2", Location: "paris", Delta: 1, Reason: "found", Actor: "alice"})
	require.Equal(t, domain.CodeSerializedPool, code(err))
}

// TestUnitsAndPlainStockRace races, on fresh SKUs, an addition of units at
// berlin against what puts stock without an identity on another location
// of the same pool: a stock-in at paris (a row it creates), a count at
// lyon (a row that exists, empty) and a transfer from berlin's neighbour.
// Whatever the order, never both: the pool's guard makes one of them see
// the other.
func TestUnitsAndPlainStockRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	const rounds = 30
	for i := range rounds {
		sku := fmt.Sprintf("R%d", i)
		// An empty row at lyon for the count to find.
		dbtest.StockInAt(t, b.pool, sku, "lyon", 1)
		_, _, err := svc.MoveOnce(ctx, key(sku+"-empty"), stock.Move{SKU: sku, Location: "lyon", From: "available", To: "lost", Quantity: 1, Reason: "gone", Actor: "alice"})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make([][3]error, rounds)
	for i := range rounds {
		sku := fmt.Sprintf("R%d", i)
		start := make(chan struct{})
		wg.Add(3)
		go func() {
			defer wg.Done()
			<-start
			_, _, errs[i][0] = svc.AddUnitsOnce(ctx, key(sku+"-units"), stock.UnitsChange{SKU: sku, Location: "berlin", Reason: "serials", Actor: "alice",
				Units: []stock.UnitSpec{{ID: sku + "-u1"}, {ID: sku + "-u2"}}})
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errs[i][1] = svc.Adjust(ctx, stock.Adjustment{SKU: sku, Location: "paris", Delta: 2, Reason: "delivery", Actor: "bob"})
		}()
		go func() {
			defer wg.Done()
			<-start
			_, _, errs[i][2] = svc.CountOnce(ctx, key(sku+"-count"), stock.StockCount{SKU: sku, Location: "lyon", Counted: 3, Reason: "found", Actor: "carol"})
		}()
		close(start)
	}
	wg.Wait()
	unitsWon := 0
	for i, e := range errs {
		sku := fmt.Sprintf("R%d", i)
		if e[0] == nil {
			unitsWon++
			require.Equal(t, domain.CodeSerializedPool, code(e[1]), "%s: units at berlin, the stock-in at paris too", sku)
			require.Equal(t, domain.CodeSerializedPool, code(e[2]), "%s: units at berlin, the count at lyon too", sku)
		} else {
			require.Equal(t, domain.CodeConflict, code(e[0]), "%s: %v", sku, e[0])
			require.True(t, e[1] == nil || e[2] == nil, "%s: refused units, but nothing without an identity: %v %v", sku, e[1], e[2])
		}
		plain := dbtest.Count(t, b.pool, `SELECT count(*) FROM stock WHERE sku = $1 AND NOT serialized AND (total > 0 OR incoming > 0)`, sku)
		serialized := dbtest.Count(t, b.pool, `SELECT count(*) FROM stock WHERE sku = $1 AND serialized`, sku)
		require.False(t, plain > 0 && serialized > 0, "%s: units and stock without an identity in one pool", sku)
	}
	t.Logf("units won %d of %d rounds", unitsWon, rounds)
}

// TestTransferReceiveDetail: asking a transfer for more than it carries
// names what it carries and what was asked, each in its place (the detail
// said "5 received" when 5 was asked).
func TestTransferReceiveDetail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	tr, _, err := svc.CreateTransferOnce(ctx, key("t"), stock.NewTransfer{SKU: "A1", From: "paris", To: "berlin", Quantity: 6, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 2, Actor: "bob"})
	require.NoError(t, err)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 5, Actor: "bob"})
	require.Equal(t, domain.CodeInsufficientIncoming, code(err))
	d := detailOf(t, err)
	require.Contains(t, d, "has 4 in transit (6 sent, 2 received, 0 lost), 5 to receive")
	require.NotContains(t, d, "5 received")
}

// TestTransfersUnknownCursor: a cursor that names no transfer is refused,
// as every list refuses a cursor it did not give, not answered with an
// empty last page.
func TestTransfersUnknownCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	_, _, err := svc.CreateTransferOnce(ctx, key("t"), stock.NewTransfer{SKU: "A1", From: "paris", To: "berlin", Quantity: 1, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	nowhere := uuid.Must(uuid.NewV7())
	_, err = svc.Transfers(ctx, stock.TransferFilter{Cursor: &nowhere, Limit: 10})
	require.ErrorIs(t, err, stock.ErrCursor)
}

// TestTransferCloseAndCancelRetried: a close or cancel sent again with its
// key gets its first answer, not transfer_not_in_transit; a transfer from
// or to an inactive location is refused.
func TestTransferCloseAndCancelRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	send := func(name, from, to string) (stock.Transfer, error) {
		tr, _, err := svc.CreateTransferOnce(ctx, key(name), stock.NewTransfer{SKU: "A1", From: from, To: to, Quantity: 2, Reason: "rebalance", Actor: "alice"})
		return tr, err
	}
	t1, err := send("t1", "paris", "berlin")
	require.NoError(t, err)
	step := stock.TransferStep{ID: t1.ID, Reason: "never came", Actor: "bob"}
	first, replayed, err := svc.CloseTransferOnce(ctx, key("close"), step)
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := svc.CloseTransferOnce(ctx, key("close"), step)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Status, again.Status)
	require.Equal(t, first.Lost, again.Lost)
	_, _, err = svc.CloseTransferOnce(ctx, key("close-2"), step)
	require.Equal(t, domain.CodeTransferNotInTransit, code(err), "a new key is a new close")

	t2, err := send("t2", "paris", "berlin")
	require.NoError(t, err)
	step = stock.TransferStep{ID: t2.ID, Reason: "wrong SKU", Actor: "bob"}
	first, _, err = svc.CancelTransferOnce(ctx, key("cancel"), step)
	require.NoError(t, err)
	again, replayed, err = svc.CancelTransferOnce(ctx, key("cancel"), step)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, stock.TransferCancelled, again.Status)
	require.Equal(t, first.ID, again.ID)
	require.EqualValues(t, 8, at(t, svc, "A1", "paris").Available, "given back once: 10 - 2 lost in the closed one")

	off := false
	_, err = svc.UpdateLocation(ctx, stock.LocationChange{ID: "lyon", Active: &off, Actor: "alice"})
	require.NoError(t, err)
	_, err = send("to-lyon", "paris", "lyon")
	require.Equal(t, domain.CodeLocationInactive, code(err))
	dbtest.StockInAt(t, b.pool, "A1", "lyon", 3)
	_, err = send("from-lyon", "lyon", "paris")
	require.Equal(t, domain.CodeLocationInactive, code(err))
	_, err = svc.UpdateLocation(ctx, stock.LocationChange{ID: "default", Active: &off, Actor: "alice"})
	require.NoError(t, err)
	dbtest.StockIn(t, b.pool, "A1", 3)
	_, err = send("from-default", "default", "paris")
	require.Equal(t, domain.CodeLocationInactive, code(err), "default is a location like any other")
}

// TestTransferChangedByHand: a transfer's row, or its destination's
// incoming, changed by hand (what reconciliation reports as
// incoming_vs_transfers) made receive, close and cancel answer 500 (a
// CHECK on incoming) and nothing could repair it. Now each answers 409
// books_unbalanced naming the difference, the resume gate counts it, and a
// repair to the ledger restores the transfer from its ledger rows (or the
// incoming from the ledger), after which the transfer moves again.
func TestTransferChangedByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	tr, _, err := svc.CreateTransferOnce(ctx, key("t"), stock.NewTransfer{SKU: "A1", From: "paris", To: "berlin", Quantity: 5, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE transfers SET quantity = 8 WHERE id = $1`, tr.ID)
	require.NoError(t, err)

	requireUnbalanced := func(err error) {
		t.Helper()
		require.Equal(t, domain.CodeBooksUnbalanced, code(err), "%v", err)
		var de *domain.Error
		require.ErrorAs(t, err, &de)
		require.Equal(t, int64(5), de.Extra["incoming"])
		require.Equal(t, int64(8), de.Extra["in_transit"])
		require.Equal(t, int64(-3), de.Extra["difference"])
	}
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 8, Actor: "bob"})
	requireUnbalanced(err)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 1, Actor: "bob"})
	requireUnbalanced(err)
	_, err = svc.CloseTransfer(ctx, stock.TransferStep{ID: tr.ID, Reason: "x", Actor: "bob"})
	requireUnbalanced(err)
	_, err = svc.CancelTransfer(ctx, stock.TransferStep{ID: tr.ID, Reason: "x", Actor: "bob"})
	requireUnbalanced(err)

	_, err = svc.Pause(ctx, stock.SwitchRequest{SKU: "A1", Location: "berlin", Reason: "incoming_vs_transfers", Actor: "reconcile"})
	require.NoError(t, err)
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Location: "berlin", Reason: "looks fine", Actor: "alice"}})
	require.Equal(t, domain.CodeBooksUnbalanced, code(err), "the resume gate sees the transfers too")
	require.Contains(t, detailOf(t, err), "incoming 5 against 8 in transit")

	repair := stock.RepairRequest{SKU: "A1", Location: "berlin", To: stock.RepairToLedger, Reason: "transfer edited by hand", Actor: "alice", DryRun: true}
	preview, err := svc.Repair(ctx, repair)
	require.NoError(t, err)
	require.False(t, preview.Applied)
	require.Equal(t, []stock.TransferRepair{{ID: tr.ID, Before: stock.TransferCounts{Quantity: 8}, After: stock.TransferCounts{Quantity: 5}}}, preview.Transfers)
	repair.DryRun = false
	done, err := svc.Repair(ctx, repair)
	require.NoError(t, err)
	require.True(t, done.Applied)
	got, err := svc.GetTransfer(ctx, tr.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, got.Quantity, "restored from its ledger rows")
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE kind = 'repair' AND $1 = ANY(refs)`, "transfer "+tr.ID.String()))
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Location: "berlin", Reason: "repaired", Actor: "alice"}})
	require.NoError(t, err)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 2, Actor: "bob"})
	require.NoError(t, err)

	// The destination's incoming changed by hand: the ledger still says 3.
	_, err = b.pool.Exec(ctx, `UPDATE stock SET incoming = 0 WHERE sku = 'A1' AND location = 'berlin'`)
	require.NoError(t, err)
	_, err = svc.CloseTransfer(ctx, stock.TransferStep{ID: tr.ID, Reason: "x", Actor: "bob"})
	require.Equal(t, domain.CodeBooksUnbalanced, code(err), "%v", err)
	_, err = svc.Repair(ctx, stock.RepairRequest{SKU: "A1", Location: "berlin", To: stock.RepairToCounters, Reason: "accept", Actor: "alice"})
	require.Equal(t, domain.CodeBooksUnbalanced, code(err), "accepting incoming 0 would leave 3 in transit: %v", err)
	require.Contains(t, detailOf(t, err), "repair to the ledger instead")
	fixed, err := svc.Repair(ctx, stock.RepairRequest{SKU: "A1", Location: "berlin", To: stock.RepairToLedger, Reason: "incoming edited", Actor: "alice"})
	require.NoError(t, err)
	require.EqualValues(t, 3, fixed.Difference.Incoming)
	require.Empty(t, fixed.Transfers)
	closed, err := svc.CloseTransfer(ctx, stock.TransferStep{ID: tr.ID, Reason: "rest never came", Actor: "bob"})
	require.NoError(t, err)
	require.EqualValues(t, 3, closed.Lost)
	berlin := at(t, svc, "A1", "berlin")
	require.Equal(t, [2]int64{2, 0}, [2]int64{berlin.Total, berlin.Incoming})
}
