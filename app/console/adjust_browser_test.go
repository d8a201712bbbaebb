package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/stock"
)

// TestBrowserAdjustWithPreview adjusts a pool from its SKU's page in
// Chromium at 390 px, given a product and a quantity as an operator
// would be: the preview says what the adjustment would leave and changes
// nothing; Apply makes it once (sent twice, it adjusts once), with the
// operator's reason in the ledger and a reconciliation after it; a reason
// is required, and taking more than is available is refused with why.
func TestBrowserAdjustWithPreview(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	dbtest.StockIn(t, e.pool, "MUG", 10)
	four, two := int64(4), int64(2)
	_, err := e.app.Inventory.SetLimits(context.Background(), stock.Limits{SKU: "MUG", MaxPerOrder: &four, MaxPerCustomer: &two}, "carol")
	require.NoError(t, err)
	text := textOf(t, ctx)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844),
		e.signIn("/ops/skus/MUG"),
		chromedp.WaitVisible(`details.adjust`),
		chromedp.Click(`details.adjust summary`),
		chromedp.SendKeys(`details.adjust form.preview input[name=delta]`, "-3"),
		chromedp.SendKeys(`details.adjust form.preview input[name=reason]`, "3 broken in the warehouse"),
		chromedp.SendKeys(`details.adjust form.preview input[name=ref]`, "DMG-7"),
		chromedp.Click(`details.adjust form.preview button`),
		chromedp.WaitVisible(`details.adjust form.apply`), // the preview's page
		chromedp.WaitVisible(`.flash`),
	))
	require.Contains(t, text(`.flash`), "Preview, nothing changed: -3 MUG (pool main) would leave total 7, available 7, reserved 0, sold 0.")
	require.Regexp(t, `^Limits: max_per_order 4, max_per_customer 2 ever; set by carol \S`, text(`p.limits`), "the pool's limits, beside its counters")
	require.Equal(t, "10", e.scalar(`SELECT total::text FROM stock WHERE sku = 'MUG'`), "a preview changes nothing")
	require.Contains(t, text(`details.adjust form.apply button`), "Apply -3 to pool main")
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	require.NoError(t, err)
	require.False(t, wide, "the SKU's page is wider than the phone")

	// Apply, then go back to the preview and apply it again (a double
	// click, a reload): one adjustment.
	preview, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`details.adjust form.apply button`),
		chromedp.WaitNotPresent(`details.adjust form.apply`), // the page after the apply, not the preview's
		chromedp.WaitVisible(`.flash`),
	))
	require.Contains(t, text(`.flash`), "Adjusted MUG (pool main) by -3: now total 7, available 7, reserved 0, sold 0. Reconciliation #")
	require.Contains(t, text(`.flash`), "0 high-risk findings")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(preview),
		chromedp.WaitVisible(`details.adjust form.apply button`),
		chromedp.Click(`details.adjust form.apply button`),
		chromedp.WaitNotPresent(`details.adjust form.apply`),
		chromedp.WaitVisible(`.flash`),
	))
	require.Contains(t, text(`.flash`), "Adjusted MUG (pool main) by -3: now total 7")
	require.Equal(t, "7 1", e.scalar(`SELECT s.total || ' ' || (SELECT count(*) FROM ledger WHERE sku = 'MUG' AND kind = 'adjust') FROM stock s WHERE s.sku = 'MUG'`),
		"the same form sent twice adjusts once")
	require.Equal(t, "alice 3 broken in the warehouse DMG-7", e.scalar(`SELECT actor || ' ' || reason || ' ' || ref FROM ledger WHERE sku = 'MUG' AND kind = 'adjust'`))

	// Taking more than is available is refused, with why; nothing moves.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/skus/MUG"),
		chromedp.WaitVisible(`details.adjust`),
		chromedp.Click(`details.adjust summary`),
		chromedp.SendKeys(`details.adjust form.preview input[name=delta]`, "-50"),
		chromedp.SendKeys(`details.adjust form.preview input[name=reason]`, "write off"),
		chromedp.Click(`details.adjust form.preview button`),
		chromedp.WaitVisible(`.flash.error`),
	))
	require.Contains(t, text(`.flash.error`), "available")
	require.Equal(t, "7", e.scalar(`SELECT total::text FROM stock WHERE sku = 'MUG'`))
}
