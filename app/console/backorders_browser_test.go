package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestBrowserBackorders, in Chromium at phone size: a SKU with 2 on
// hand, 10 due from a supplier in five days and a policy of 3 below zero
// and a 14-day horizon; a hold of 5 takes the 2 and promises 3. The
// SKU's page shows the policy, what is promised of what it allows, and
// the backordered counter; the hold's page shows the line's backordered
// units and the day they are expected; the holds list marks the line; the
// locations page lists the notice as due and a notice past its day as
// late, first, and a pickup location with where it is. The SKU's ledger
// and the hold's history say how each movement moved the promise: the
// reserve promised 3, expected the day the notice is due, and a receipt
// of 3 filled them (backorder_fill). Each page fits the phone.
func TestBrowserBackorders(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	inv := e.app.Inventory
	_, _, err := inv.CreateLocationOnce(bg, idempotency.NewKey("alice", "depot"), stock.NewLocation{ID: "depot", Name: "Depot", Priority: 5,
		Coordinates: &stock.Coordinates{Latitude: 48.5, Longitude: 2.25}, Pickup: true, Actor: "alice"})
	require.NoError(t, err)
	dbtest.StockIn(t, e.pool, "LAMP", 2)
	due := time.Now().UTC().AddDate(0, 0, 5).Format(time.DateOnly)
	po, _, err := inv.CreateInboundOnce(bg, idempotency.NewKey("alice", "po-7"), stock.NewInbound{SupplierRef: "PO-7", ExpectedOn: due,
		Lines: []stock.NewInboundLine{{SKU: "LAMP", Quantity: 10}}, Actor: "alice"})
	require.NoError(t, err)
	late, _, err := inv.CreateInboundOnce(bg, idempotency.NewKey("alice", "po-3"), stock.NewInbound{SupplierRef: "PO-3",
		ExpectedOn: time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly), Lines: []stock.NewInboundLine{{SKU: "CUP", Quantity: 4}}, Actor: "alice"})
	require.NoError(t, err)
	_, err = e.pool.Exec(bg, `UPDATE inbound SET expected_on = current_date - 2 WHERE id = $1`, late.ID)
	require.NoError(t, err)
	horizon := int32(14)
	_, err = inv.SetBackorders(bg, stock.Backorders{SKU: "LAMP", BelowZero: 3, HorizonDays: &horizon}, "carol")
	require.NoError(t, err)
	h, _, err := inv.Hold(bg, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: "pre-1", OrderRef: "pre-1",
		Items: []inventory.Item{{SKU: "LAMP", Quantity: 5}}})
	require.NoError(t, err)
	require.EqualValues(t, 3, h.Items[0].Backordered)

	text := textOf(t, ctx)
	fits := func(page string) {
		t.Helper()
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		require.NoError(t, err)
		require.False(t, wide, "%s is wider than the phone", page)
	}
	require.NoError(t, chromedp.Do(ctx,
		e.signIn("/ops/skus/LAMP"),
		chromedp.WaitVisible(`p.backorders`),
	))
	require.Regexp(t, `^Backorders: up to 3 below zero, and what is on its way within 14 days\. Promised 3 of 13 allowed now; set by carol \S`,
		text(`p.backorders`))
	require.Regexp(t, `available\s+0\s+reserved\s+2\s+sold\s+0`, text(`section.pool dl.counters`))
	require.Regexp(t, `incoming\s+10\s+backordered\s+3`, text(`section.pool dl.counters`))
	require.Regexp(t, `reserve\s+-2\s+\+2\s+0\s+0\s+backordered \+3, expected `+due, text(`table.ledger`))
	fits("the SKU's page")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/holds/"+h.ID.String()),
		chromedp.WaitVisible(`table.lines`),
	))
	require.Regexp(t, `LAMP\s+default\s+main\s+5\s+3\s+`+due, text(`table.lines`))
	require.Regexp(t, `reserve\s+LAMP\s+main\s+-2\s+\+2\s+0\s+\+3 expected `+due, text(`table.history`))
	fits("the hold's page")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/holds?order_ref=pre-1"),
		chromedp.WaitVisible(`main table`),
	))
	require.Contains(t, text(`main table`), "LAMP ×5 (3 backordered)")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/locations"),
		chromedp.WaitVisible(`table.inbound`),
	))
	inbound := text(`table.inbound`)
	require.Regexp(t, `(?s)PO-3.*late.*PO-7\s+default\s+`+due, inbound, "the late notice first, marked late")
	require.Regexp(t, `LAMP\s+10 of 10`, inbound)
	require.Regexp(t, `CUP\s+4 of 4`, inbound)
	require.Regexp(t, `depot\s+Depot\s+pickup\s+48\.5, 2\.25\s+5\s+taken`, text(`table.locations`), "a pickup location, with where it is")
	fits("the locations page")

	_, err = inv.ReceiveInbound(bg, stock.InboundStep{ID: po.ID, SKU: "LAMP", Quantity: 3, Actor: "dock"})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/skus/LAMP"),
		chromedp.WaitVisible(`table.ledger`),
	))
	require.Regexp(t, `(?s)backorder_fill\s+-3\s+\+3\s+0\s+0\s+backordered -3\s.*inbound_receive\s+\+3\s+0\s+0\s+\+3\s+incoming -3\s`,
		text(`table.ledger`), "newest first: the fill, after the receipt")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/holds/"+h.ID.String()),
		chromedp.WaitVisible(`table.history`),
	))
	require.Regexp(t, `backorder_fill\s+LAMP\s+main\s+-3\s+\+3\s+0\s+-3\s`, text(`table.history`))
	fits("the hold's page")
}
