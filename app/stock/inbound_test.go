package stock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// day is today plus n days, as an expected day is written.
func day(n int) string { return time.Now().UTC().AddDate(0, 0, n).Format(time.DateOnly) }

// notice expects lines (sku → quantity, pool main) at location tomorrow.
func notice(t *testing.T, svc *stock.Service, name, location string, lines ...stock.NewInboundLine) stock.Inbound {
	t.Helper()
	i, _, err := svc.CreateInboundOnce(context.Background(), key(name),
		stock.NewInbound{SupplierRef: "PO-" + name, Location: location, ExpectedOn: day(1), Lines: lines, Actor: "alice"})
	require.NoError(t, err)
	return i
}

// ledgerRows counts the ledger rows of a notice, by kind.
func ledgerRows(t *testing.T, b *bundle, id uuid.UUID, kind stock.LedgerKind) int {
	t.Helper()
	return dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE ref = $1 AND kind = $2`, id.String(), string(kind))
}

// TestInboundReceivedInPartsThenClosedShort: a notice of two lines is
// incoming at its location; a line is received in parts (each receipt on
// hand, with its ledger row); a receipt of more than the line still
// expects, or of a line it does not have, changes nothing; a close writes
// off what never came and records it per line; the closed notice takes no
// further step.
func TestInboundReceivedInPartsThenClosedShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 2)
	i := notice(t, svc, "po-1", "paris", stock.NewInboundLine{SKU: "B2", Quantity: 5}, stock.NewInboundLine{SKU: "A1", Quantity: 10})
	require.Equal(t, stock.InboundOpen, i.Status)
	require.Equal(t, day(1), i.ExpectedOn)
	require.False(t, i.Late)
	require.Len(t, i.Lines, 2)
	require.Equal(t, "A1", i.Lines[0].SKU, "lines in lock order")
	require.EqualValues(t, 10, i.Lines[0].Outstanding)
	a1 := at(t, svc, "A1", "paris")
	require.EqualValues(t, 10, a1.Incoming)
	require.EqualValues(t, 2, a1.Available)
	require.EqualValues(t, 5, at(t, svc, "B2", "paris").Incoming, "a line of main makes its row")
	require.Equal(t, 2, ledgerRows(t, b, i.ID, stock.LedgerInbound))

	got, err := svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "A1", Quantity: 4, Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.InboundOpen, got.Status)
	require.EqualValues(t, 4, got.Lines[0].Received)
	require.EqualValues(t, 6, got.Lines[0].Outstanding)
	a1 = at(t, svc, "A1", "paris")
	require.EqualValues(t, 6, a1.Incoming)
	require.EqualValues(t, 6, a1.Available)
	require.EqualValues(t, 6, a1.Total)

	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "A1", Quantity: 7, Actor: "bob"})
	require.Equal(t, domain.CodeInsufficientIncoming, code(err), "more than ordered: %v", err)
	require.Contains(t, detailOf(t, err), "expects 6 more of A1")
	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "C3", Quantity: 1, Actor: "bob"})
	require.Equal(t, domain.CodeInvalid, code(err), "a line it does not have: %v", err)
	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: uuid.Must(uuid.NewV7()), SKU: "A1", Quantity: 1, Actor: "bob"})
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.EqualValues(t, 6, at(t, svc, "A1", "paris").Available, "refused receipts change nothing")
	require.Equal(t, 1, ledgerRows(t, b, i.ID, stock.LedgerInboundReceive))

	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "A1", Quantity: 6, Actor: "bob"})
	require.NoError(t, err)
	_, err = svc.CancelInbound(ctx, stock.InboundStep{ID: i.ID, Reason: "changed our mind", Actor: "bob"})
	require.Equal(t, domain.CodeInboundPartlyReceived, code(err))
	_, err = svc.CloseInbound(ctx, stock.InboundStep{ID: i.ID, Actor: "bob"})
	require.Equal(t, domain.CodeInvalid, code(err), "a close says why")

	closed, err := svc.CloseInbound(ctx, stock.InboundStep{ID: i.ID, Reason: "supplier out of B2", Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.InboundClosed, closed.Status)
	require.Equal(t, stock.InboundLine{SKU: "A1", Pool: "main", Quantity: 10, Received: 10}, closed.Lines[0])
	require.Equal(t, stock.InboundLine{SKU: "B2", Pool: "main", Quantity: 5, Short: 5}, closed.Lines[1])
	require.Zero(t, at(t, svc, "B2", "paris").Incoming)
	require.Zero(t, at(t, svc, "A1", "paris").Incoming)
	require.EqualValues(t, 12, at(t, svc, "A1", "paris").Available)
	require.Equal(t, 1, ledgerRows(t, b, i.ID, stock.LedgerInboundShort), "only the line with a shortfall")

	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "B2", Quantity: 1, Actor: "bob"})
	require.Equal(t, domain.CodeInboundNotOpen, code(err))
	_, err = svc.CloseInbound(ctx, stock.InboundStep{ID: i.ID, Reason: "again", Actor: "bob"})
	require.Equal(t, domain.CodeInboundNotOpen, code(err))
}

// TestInboundReceivedWholeAndCancelled: a notice whose every line arrives
// whole is received; one cancelled before any receipt takes its incoming
// back.
func TestInboundReceivedWholeAndCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	i := notice(t, svc, "whole", "lyon", stock.NewInboundLine{SKU: "W1", Quantity: 3})
	got, err := svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "W1", Quantity: 3, Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.InboundReceived, got.Status)
	require.NotNil(t, got.FinishedAt)

	c := notice(t, svc, "cancel", "lyon", stock.NewInboundLine{SKU: "W1", Quantity: 8})
	require.EqualValues(t, 8, at(t, svc, "W1", "lyon").Incoming)
	cancelled, err := svc.CancelInbound(ctx, stock.InboundStep{ID: c.ID, Reason: "order withdrawn", Actor: "bob"})
	require.NoError(t, err)
	require.Equal(t, stock.InboundCancelled, cancelled.Status)
	require.Zero(t, cancelled.Lines[0].Outstanding)
	w1 := at(t, svc, "W1", "lyon")
	require.Zero(t, w1.Incoming)
	require.EqualValues(t, 3, w1.Available)
	require.Equal(t, 1, ledgerRows(t, b, c.ID, stock.LedgerInboundCancel))
}

// TestInboundRefusesBadInput: each bad notice is refused with its code and
// leaves nothing behind: no notice, no ledger row, no stock row.
func TestInboundRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.Location(t, b.pool, "shut", 3)
	_, err := b.pool.Exec(ctx, `UPDATE locations SET active = false WHERE id = 'shut'`)
	require.NoError(t, err)
	addUnits(t, svc, "SEAT", []stock.UnitSpec{{ID: "s-1"}})
	dbtest.StockIn(t, b.pool, "CAMP", 5)
	dbtest.Campaign(t, b.pool, "sale", &dbtest.CampaignOptions{Active: true, Allotments: map[string]int64{"CAMP": 2}})
	_, err = b.pool.Exec(ctx, `UPDATE campaigns SET status = 'ended' WHERE id = 'sale'`)
	require.NoError(t, err)
	before := dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger`)

	line := []stock.NewInboundLine{{SKU: "N1", Quantity: 1}}
	cases := []struct {
		name string
		n    stock.NewInbound
		want domain.Code
	}{
		{"expected yesterday", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(-1), Lines: line}, domain.CodeInvalid},
		{"not a day", stock.NewInbound{SupplierRef: "PO", ExpectedOn: "next week", Lines: line}, domain.CodeInvalid},
		{"no supplier", stock.NewInbound{ExpectedOn: day(1), Lines: line}, domain.CodeInvalid},
		{"no lines", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(1)}, domain.CodeInvalid},
		{"zero", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(1), Lines: []stock.NewInboundLine{{SKU: "N1"}}}, domain.CodeInvalid},
		{"twice", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(1), Lines: []stock.NewInboundLine{{SKU: "N1", Quantity: 1}, {SKU: "N1", Pool: "main", Quantity: 2}}}, domain.CodeInvalid},
		{"unknown location", stock.NewInbound{SupplierRef: "PO", Location: "oslo", ExpectedOn: day(1), Lines: line}, domain.CodeUnknownLocation},
		{"inactive location", stock.NewInbound{SupplierRef: "PO", Location: "shut", ExpectedOn: day(1), Lines: line}, domain.CodeLocationInactive},
		{"units with an identity", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(1), Lines: []stock.NewInboundLine{{SKU: "N1", Quantity: 1}, {SKU: "SEAT", Quantity: 1}}}, domain.CodeSerializedPool},
		{"no such pool", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(1), Lines: []stock.NewInboundLine{{SKU: "N1", Quantity: 1}, {SKU: "N1", Pool: "vip", Quantity: 1}}}, domain.CodeUnknownPool},
		{"an ended campaign's pool", stock.NewInbound{SupplierRef: "PO", ExpectedOn: day(1), Lines: []stock.NewInboundLine{{SKU: "CAMP", Pool: "sale", Quantity: 1}}}, domain.CodeCampaignEnded},
	}
	for _, c := range cases {
		c.n.Actor = "alice"
		_, _, err := svc.CreateInboundOnce(ctx, key("bad-"+c.name), c.n)
		require.Equal(t, c.want, code(err), "%s: %v", c.name, err)
	}
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM inbound`))
	require.Equal(t, before, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger`))
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM stock WHERE sku = 'N1'`), "a refused notice makes no row")
}

// TestInboundStepsRace races, on one notice per round, receipts of its
// line against a close and a cancel: whatever wins, the line's received
// plus short is its quantity once it ends, a receipt after the end is
// refused, and close and cancel never both win (invariants at the end:
// incoming is what the open notices expect).
func TestInboundStepsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	const rounds = 20
	for r := range rounds {
		i := notice(t, svc, fmt.Sprintf("race-%d", r), "paris", stock.NewInboundLine{SKU: "R1", Quantity: 6})
		var wg sync.WaitGroup
		start := make(chan struct{})
		receipts := make([]error, 4)
		var closeErr, cancelErr error
		for k := range receipts {
			wg.Go(func() {
				<-start
				_, receipts[k] = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "R1", Quantity: 2, Actor: "bob"})
			})
		}
		wg.Go(func() {
			<-start
			_, closeErr = svc.CloseInbound(ctx, stock.InboundStep{ID: i.ID, Reason: "late", Actor: "carol"})
		})
		wg.Go(func() {
			<-start
			_, cancelErr = svc.CancelInbound(ctx, stock.InboundStep{ID: i.ID, Reason: "withdrawn", Actor: "dave"})
		})
		close(start)
		wg.Wait()
		got, err := svc.GetInbound(ctx, i.ID)
		require.NoError(t, err)
		received := int64(0)
		for _, e := range receipts {
			if e == nil {
				received += 2
				continue
			}
			require.Contains(t, []domain.Code{domain.CodeInboundNotOpen, domain.CodeInsufficientIncoming}, code(e), "round %d: %v", r, e)
		}
		require.False(t, closeErr == nil && cancelErr == nil, "round %d: closed and cancelled", r)
		l := got.Lines[0]
		require.Equal(t, received, l.Received, "round %d", r)
		switch got.Status {
		case stock.InboundClosed:
			require.NoError(t, closeErr)
			require.Equal(t, l.Quantity, l.Received+l.Short, "round %d", r)
		case stock.InboundCancelled:
			require.NoError(t, cancelErr)
			require.Zero(t, l.Received, "round %d", r)
		case stock.InboundReceived:
			require.EqualValues(t, 6, l.Received, "round %d", r)
		default:
			t.Fatalf("round %d: still %s", r, got.Status)
		}
	}
	require.Zero(t, at(t, svc, "R1", "paris").Incoming)
}

// TestInboundListedByExpectedDay: open notices come by the day they are
// expected, the late first (marked late), a page at a time with the one
// cursor convention; filters by status, location and SKU.
func TestInboundListedByExpectedDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	var ids []uuid.UUID
	for k, d := range []int{5, 2, 9} {
		i, _, err := svc.CreateInboundOnce(ctx, key(fmt.Sprintf("l-%d", k)), stock.NewInbound{SupplierRef: fmt.Sprintf("PO-%d", k),
			Location: "berlin", ExpectedOn: day(d), Lines: []stock.NewInboundLine{{SKU: fmt.Sprintf("L%d", k), Quantity: 1}}, Actor: "alice"})
		require.NoError(t, err)
		ids = append(ids, i.ID)
	}
	// The third is late: expected three days ago.
	_, err := b.pool.Exec(ctx, `UPDATE inbound SET expected_on = current_date - 3 WHERE id = $1`, ids[2])
	require.NoError(t, err)
	done := notice(t, svc, "done", "paris", stock.NewInboundLine{SKU: "L0", Quantity: 1})
	_, err = svc.CancelInbound(ctx, stock.InboundStep{ID: done.ID, Reason: "no", Actor: "bob"})
	require.NoError(t, err)

	var seen []uuid.UUID
	f := stock.InboundFilter{Status: stock.InboundOpen, Limit: 2}
	for {
		page, err := svc.ListInbound(ctx, f)
		require.NoError(t, err)
		for _, i := range page.Inbound {
			seen = append(seen, i.ID)
			require.Equal(t, i.ID == ids[2], i.Late, "%s expected %s", i.SupplierRef, i.ExpectedOn)
		}
		if page.NextCursor == nil {
			break
		}
		c := uuid.MustParse(*page.NextCursor)
		f.Cursor = &c
	}
	require.Equal(t, []uuid.UUID{ids[2], ids[1], ids[0]}, seen)

	page, err := svc.ListInbound(ctx, stock.InboundFilter{SKU: "L0", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Inbound, 2, "the open one and the cancelled one")
	page, err = svc.ListInbound(ctx, stock.InboundFilter{Location: "paris", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Inbound, 1)
	require.Equal(t, stock.InboundCancelled, page.Inbound[0].Status)
	_, err = svc.ListInbound(ctx, stock.InboundFilter{Status: "late", Limit: 10})
	require.Equal(t, domain.CodeInvalid, code(err))
	missing := uuid.Must(uuid.NewV7())
	_, err = svc.ListInbound(ctx, stock.InboundFilter{Cursor: &missing, Limit: 10})
	require.ErrorIs(t, err, stock.ErrCursor)
}

// TestInboundAndTransfersShareIncoming: a row expecting both a transfer
// and a notice has their sum incoming; each moves only while the row's
// incoming is what both carry (a notice changed by hand stops the
// transfer too, 409 books_unbalanced, and the health check names it).
func TestInboundAndTransfersShareIncoming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	warehouses(t, b.pool)
	dbtest.StockInAt(t, b.pool, "S1", "paris", 4)
	tr, _, err := svc.CreateTransferOnce(ctx, key("t"), stock.NewTransfer{SKU: "S1", From: "paris", To: "berlin", Quantity: 4, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	i := notice(t, svc, "shared", "berlin", stock.NewInboundLine{SKU: "S1", Quantity: 3})
	require.EqualValues(t, 7, at(t, svc, "S1", "berlin").Incoming)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 1, Actor: "bob"})
	require.NoError(t, err, "the transfer moves beside the notice")

	// By hand, behind the service: the notice's line says 5.
	_, err = b.pool.Exec(ctx, `UPDATE inbound_lines SET quantity = 5 WHERE inbound_id = $1`, i.ID)
	require.NoError(t, err)
	_, err = svc.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 1, Actor: "bob"})
	require.Equal(t, domain.CodeBooksUnbalanced, code(err))
	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "S1", Quantity: 1, Actor: "bob"})
	require.Equal(t, domain.CodeBooksUnbalanced, code(err))
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM stock_health WHERE NOT transit_ok`))
	_, err = b.pool.Exec(ctx, `UPDATE inbound_lines SET quantity = 3 WHERE inbound_id = $1`, i.ID)
	require.NoError(t, err)
	_, err = svc.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "S1", Quantity: 3, Actor: "bob"})
	require.NoError(t, err)
	require.EqualValues(t, 3, at(t, svc, "S1", "berlin").Incoming, "the transfer's three")
}
