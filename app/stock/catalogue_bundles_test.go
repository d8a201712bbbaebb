package stock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/stock"
)

// TestCatalogueBundles walks a catalogue of SKUs and bundles (mixed case,
// so the database's collation orders them, and a run of bundles between
// two SKUs longer than any page's stretch): every SKU and bundle once, in
// the database's order, each bundle with the availability GET
// /v1/skus/{sku} computes; a location keeps a bundle's availability there;
// low stock passes bundles over; updated since keeps a bundle whose
// component changed; a batch answers a bundle rather than calling it
// missing.
func TestCatalogueBundles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{icu: true})
	dbtest.Location(t, b.pool, "east", 2)
	for i, sku := range []string{"a1", "C3", "e5", "G7", "i9"} {
		dbtest.StockIn(t, b.pool, sku, int64(10+i))
	}
	dbtest.StockInAt(t, b.pool, "a1", "east", 4)
	bundles := []string{"A0", "b2", "D4", "f6", "zz"}
	for i := range 12 {
		bundles = append(bundles, fmt.Sprintf("g%02d", i)) // between G7 and i9... and after e5
	}
	for i, sku := range bundles {
		_, err := svc.SetBundle(ctx, stock.Bundle{SKU: sku, Reason: "test", Components: []stock.Component{
			{SKU: "a1", Quantity: int64(1 + i%3)}, {SKU: "C3", Quantity: 2}}}, "ops")
		require.NoError(t, err)
	}
	var order []string
	rows, err := b.pool.Query(ctx, `SELECT sku FROM (SELECT sku FROM stock UNION SELECT sku FROM bundles) s ORDER BY sku`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		order = append(order, s)
	}
	require.NoError(t, rows.Err())
	require.Len(t, order, 22)
	require.NotEqual(t, slices.Sorted(slices.Values(order)), order, "the ICU order is not byte order (else the test proves less)")

	requireWhole := func(sts []stock.Stock) {
		t.Helper()
		for _, st := range sts {
			want, err := svc.GetStock(ctx, st.SKU)
			require.NoError(t, err)
			require.Equal(t, want, st, "%s as GET /v1/skus/{sku} shows it", st.SKU)
		}
	}
	for _, limit := range []int{1, 3, 7, 50} {
		all, _ := walk(t, svc, stock.CatalogueQuery{Limit: limit})
		require.Equal(t, order, names(all), "pages of %d", limit)
		requireWhole(all)
	}
	box, err := svc.GetStock(ctx, "A0")
	require.NoError(t, err)
	require.Empty(t, box.Pools)
	// a1: 10 at default, 4 at east; C3: 11 at default. One a1 and two C3 a box.
	require.Equal(t, &stock.BundleStock{Version: 1, Components: []stock.Component{{SKU: "a1", Quantity: 1}, {SKU: "C3", Quantity: 2}},
		Available: 5, Locations: []stock.BundleAt{{Location: "default", Available: 5}, {Location: "east", Available: 0}}}, box.Bundle)

	atEast := func(scan int) map[string]int64 {
		t.Helper()
		stock.SetCatalogueScan(svc, scan)
		east, _ := walk(t, svc, stock.CatalogueQuery{Limit: 2, Location: "east"})
		out := map[string]int64{}
		for _, st := range east {
			if st.Bundle == nil {
				out[st.SKU] = -1
				continue
			}
			require.Len(t, st.Bundle.Locations, 1, st.SKU)
			require.Equal(t, "east", st.Bundle.Locations[0].Location, st.SKU)
			out[st.SKU] = st.Bundle.Locations[0].Available
		}
		return out
	}
	for scan := 2; scan <= 5; scan++ {
		east := atEast(scan)
		require.Len(t, east, 1+len(bundles), "stretches of %d: a1 and every bundle, which has a1 at east", scan)
		require.EqualValues(t, 0, east["A0"], "C3 is not at east")
		low, _ := walk(t, svc, stock.CatalogueQuery{Limit: 2, LowStock: true})
		require.Empty(t, low)
	}
	dbtest.StockInAt(t, b.pool, "C3", "east", 6)
	east := atEast(3)
	require.Len(t, east, 2+len(bundles))
	require.EqualValues(t, 3, east["A0"], "4 a1 and 6 C3 at east: 3 boxes of one a1 and two C3")
	require.EqualValues(t, 2, east["b2"], "and 2 of two a1 and two C3")

	_, err = b.pool.Exec(ctx, `UPDATE stock SET updated_at = now() - interval '1 day'`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE bundles SET set_at = now() - interval '1 day'`)
	require.NoError(t, err)
	since := time.Now().Add(-time.Hour)
	none, _ := walk(t, svc, stock.CatalogueQuery{Limit: 5, UpdatedSince: &since})
	require.Empty(t, none)
	dbtest.StockIn(t, b.pool, "C3", 1)
	changed, _ := walk(t, svc, stock.CatalogueQuery{Limit: 5, UpdatedSince: &since})
	require.Len(t, changed, 1+len(bundles), "C3 and every bundle of it")

	page, err := svc.Catalogue(ctx, stock.CatalogueQuery{SKUs: []string{"zz", "NOPE", "e5", "A0"}})
	require.NoError(t, err)
	require.Equal(t, []string{"A0", "e5", "zz"}, names(page.SKUs))
	require.Equal(t, []string{"NOPE"}, page.Missing)
}
