package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/stock"
)

// TestBrowserBundles reads bundles in Chromium at phone width: the SKU
// list finds a bundle by the start of its SKU, with its components and
// what they make in all and at each location; the bundle's page shows its
// components (each a link to its page) and its availability per
// location; a component's page says which bundles use it and how many of
// it one takes. Nothing scrolls sideways.
func TestBrowserBundles(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	dbtest.Location(t, e.pool, "east", 2)
	dbtest.StockIn(t, e.pool, "MUG", 10)
	dbtest.StockIn(t, e.pool, "COASTER", 7)
	dbtest.StockInAt(t, e.pool, "MUG", "east", 4)
	dbtest.StockInAt(t, e.pool, "COASTER", "east", 8)
	for _, b := range []stock.Bundle{
		{SKU: "GIFT-BOX", Reason: "gift box", Components: []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "COASTER", Quantity: 2}}},
		{SKU: "GIFT-PAIR", Reason: "two mugs", Components: []stock.Component{{SKU: "MUG", Quantity: 2, Split: true}}},
	} {
		_, err := e.app.Inventory.SetBundle(bg, b, "ops")
		require.NoError(t, err)
	}
	four := int64(4)
	_, err := e.app.Inventory.SetThreshold(bg, stock.Threshold{SKU: "GIFT-BOX", Location: "east", Threshold: &four, Actor: "ops"})
	require.NoError(t, err)
	text := textOf(t, ctx)

	require.NoError(t, chromedp.Do(ctx,
		e.signIn("/ops/"),
		chromedp.WaitVisible(`.tiles`),
		chromedp.Navigate(e.base+"/ops/skus?q=GIFT"),
		chromedp.WaitVisible(`table.bundles`),
	))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('table.bundles tr')].slice(1).map(r => [...r.cells].map(c => c.innerText.trim()).join(' | '))`))
	require.NoError(t, err)
	// default: 10 mugs, 7 coasters: 3 boxes; east: 4 mugs, 8 coasters: 4.
	// Pairs: 14 mugs anywhere, split: 7, wherever they come from.
	require.Equal(t, []string{
		"GIFT-BOX | 1 × MUG, 2 × COASTER | 7 | default 3, east 4 (low at 4) low",
		"GIFT-PAIR | 2 × MUG (split) | 7 | default 7, east 7",
	}, rows)
	fits(t, ctx, "the SKU list with bundles")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`table.bundles a[href="/ops/skus/GIFT-BOX"]`),
		chromedp.WaitVisible(`.card.bundle`),
	))
	require.Equal(t, "Bundle GIFT-BOX", text(`h1`))
	comps, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('table.components tr')].slice(1).map(r => [...r.cells].map(c => c.innerText.trim()).join(' | '))`))
	require.NoError(t, err)
	require.Equal(t, []string{"MUG | 1 | no", "COASTER | 2 | no"}, comps)
	at, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('.card.bundle table.bylocation tr')].slice(1).map(r => [...r.cells].map(c => c.innerText.trim()).join(' | '))`))
	require.NoError(t, err)
	require.Equal(t, []string{"default | 3 | —", "east | 4 | 4"}, at, "east is at its threshold")
	low, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.card.bundle table.bylocation tr.low').length`))
	require.NoError(t, err)
	require.Equal(t, 1, low)
	require.Contains(t, text(`.card.bundle`), "7 in all")
	fits(t, ctx, "a bundle's page")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`table.components a[href="/ops/skus/MUG"]`),
		chromedp.WaitVisible(`p.usedby`),
	))
	require.Equal(t, "SKU MUG", text(`h1`))
	require.Equal(t, "In 2 bundles: GIFT-BOX (1 a bundle), GIFT-PAIR (2 a bundle, split)", text(`p.usedby`))
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('p.usedby a[href^="/ops/skus/GIFT-"]').length`))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	fits(t, ctx, "a component's page")
}
