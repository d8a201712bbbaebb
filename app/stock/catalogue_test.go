package stock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// walk reads every page of cq and returns the SKUs in the order served,
// with how many pages it took.
func walk(t *testing.T, svc *stock.Service, cq stock.CatalogueQuery) ([]stock.Stock, int) {
	t.Helper()
	var all []stock.Stock
	for pages := 1; ; pages++ {
		require.Less(t, pages, 200, "the pages never end")
		page, err := svc.Catalogue(context.Background(), cq)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.SKUs), cq.Limit)
		all = append(all, page.SKUs...)
		if page.Next == nil {
			return all, pages
		}
		cq.After = *page.Next
	}
}

func names(sts []stock.Stock) []string {
	out := make([]string, len(sts))
	for i, st := range sts {
		out[i] = st.SKU
	}
	return out
}

// TestCatalogue walks the catalogue in pages, plain and filtered (with a
// filtered page's stretch cut down to a few rows, so SKUs of two pools
// straddle its ends), and reads batches: every SKU once, in the database's
// order, each with the pools GET /v1/skus/{sku} shows.
func TestCatalogue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{icu: true})
	stock.SetCatalogueScan(svc, 5)
	var skus []string
	for i := range 23 {
		// Mixed case: the database's collation, not byte order, is SKU
		// order.
		sku := fmt.Sprintf("s%02d", i)
		if i%3 == 0 {
			sku = fmt.Sprintf("S%02d", i)
		}
		skus = append(skus, sku)
		dbtest.StockIn(t, b.pool, sku, int64(10+i))
	}
	// Every fourth SKU has a second pool, and s05 five more.
	for i := 0; i < len(skus); i += 4 {
		_, err := b.pool.Exec(ctx, `INSERT INTO stock (sku, pool) VALUES ($1, 'c1')`, skus[i])
		require.NoError(t, err)
	}
	_, err := b.pool.Exec(ctx, `INSERT INTO stock (sku, pool) SELECT 's05', 'c' || i FROM generate_series(1, 5) i`)
	require.NoError(t, err)
	var order []string
	rows, err := b.pool.Query(ctx, `SELECT DISTINCT sku FROM stock ORDER BY sku`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		order = append(order, s)
	}
	require.NoError(t, rows.Err())
	require.NotEqual(t, slices.Sorted(slices.Values(order)), order, "the ICU order is not byte order (else the test proves less)")

	requireWhole := func(sts []stock.Stock) {
		t.Helper()
		for _, st := range sts {
			want, err := svc.GetStock(ctx, st.SKU)
			require.NoError(t, err)
			require.Equal(t, want, st, "a SKU's pools as GET /v1/skus/{sku} shows them")
		}
	}

	all, pages := walk(t, svc, stock.CatalogueQuery{Limit: 7})
	require.Equal(t, order, names(all))
	require.Equal(t, 4, pages, "7 + 7 + 7 + 2, the last page knowing it is the last")
	requireWhole(all)
	// Pages of one and two: a page's stretches are short, and s05's six
	// pools fill one whole.
	for _, limit := range []int{1, 2} {
		all, pages := walk(t, svc, stock.CatalogueQuery{Limit: limit})
		require.Equal(t, order, names(all), "pages of %d", limit)
		require.Equal(t, (len(order)+limit-1)/limit, pages, "pages of %d, none of them empty", limit)
		requireWhole(all)
	}

	// Low stock: thresholds on some pools, one of them a campaign's.
	for sku, threshold := range map[string]int{"S03": 100, "s07": 5, "s10": 20, "S12": 0} {
		_, err := b.pool.Exec(ctx, `UPDATE stock SET low_threshold = $2 WHERE sku = $1 AND pool = 'main'`, sku, threshold)
		require.NoError(t, err)
	}
	_, err = b.pool.Exec(ctx, `UPDATE stock SET low_threshold = 0 WHERE sku = 's04' AND pool = 'c1'`)
	require.NoError(t, err)
	// Every stretch length from 2 to 6 rows, so that s04's two pools
	// fall on both sides of a stretch's end in one of them.
	for scan := 2; scan <= 6; scan++ {
		stock.SetCatalogueScan(svc, scan)
		low, pages := walk(t, svc, stock.CatalogueQuery{Limit: 2, LowStock: true})
		// S03 (13 <= 100), s04's empty c1 pool, s10 (20 <= 20); s07 (17 > 5)
		// and S12 (22 > 0) are above theirs.
		require.Equal(t, []string{"S03", "s04", "s10"}, names(low), "stretches of %d rows", scan)
		require.Greater(t, pages, 2, "short stretches: the walk goes on past pages that are not full")
		requireWhole(low)
	}

	// Updated since: three SKUs changed after the others.
	_, err = b.pool.Exec(ctx, `UPDATE stock SET updated_at = now() - interval '1 day'`)
	require.NoError(t, err)
	since := time.Now().Add(-time.Hour)
	for _, sku := range []string{"s22", "S09", "s01", "S12"} {
		dbtest.StockIn(t, b.pool, sku, 1)
	}
	changed, _ := walk(t, svc, stock.CatalogueQuery{Limit: 1, UpdatedSince: &since})
	require.Equal(t, []string{"s01", "S09", "S12", "s22"}, names(changed))
	requireWhole(changed)
	both, _ := walk(t, svc, stock.CatalogueQuery{Limit: 10, UpdatedSince: &since, LowStock: true})
	require.Empty(t, both)

	// A batch: the SKUs named, in SKU order, once each; the unknown listed.
	page, err := svc.Catalogue(ctx, stock.CatalogueQuery{SKUs: []string{"s10", "NOPE", "S03", "s10", "s99"}})
	require.NoError(t, err)
	require.Equal(t, []string{"S03", "s10"}, names(page.SKUs))
	require.Equal(t, []string{"NOPE", "s99"}, page.Missing)
	require.Nil(t, page.Next)
	page, err = svc.Catalogue(ctx, stock.CatalogueQuery{SKUs: []string{"s10", "s07"}, LowStock: true})
	require.NoError(t, err)
	require.Equal(t, []string{"s10"}, names(page.SKUs), "the filters apply to a batch")
	require.Empty(t, page.Missing, "s07 has stock: filtered out, not missing")

	for _, bad := range []stock.CatalogueQuery{
		{Limit: 0}, {Limit: stock.MaxCataloguePage + 1},
		{SKUs: make([]string, stock.MaxCatalogueBatch+1)}, {SKUs: []string{"ok", ""}},
	} {
		_, err := svc.Catalogue(ctx, bad)
		require.ErrorIs(t, err, &domain.Error{Code: domain.CodeInvalid}, "%+v", bad)
	}
}
