package reconcile_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

// TestPromiseCounterCheckedAgainstLinesAndLedger: a SKU with 1 on hand and
// 3 allowed below zero, a hold of 3 (1 held, 2 promised). Clean books
// find nothing. A promise written into the counter by hand, with no line
// and no ledger row (the CHECK still holds: 3 of 3 allowed), is found
// both ways: the counter against the lines' backordered, and against
// the ledger's delta_backordered.
func TestPromiseCounterCheckedAgainstLinesAndLedger(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "PRE", 1)
	_, err := b.inv.SetBackorders(ctx, stock.Backorders{SKU: "PRE", BelowZero: 3}, "ops")
	require.NoError(t, err)
	h, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "pre", Items: []inventory.Item{{SKU: "PRE", Quantity: 3}}})
	require.NoError(t, err)
	require.EqualValues(t, 2, h.Items[0].Backordered)
	settle(t, b)
	require.Empty(t, run(t, svc, "PRE").Findings.All(), "clean books")

	_, err = b.pool.Exec(ctx, `UPDATE stock SET backordered = backordered + 1 WHERE sku = 'PRE' AND pool = 'main'`)
	require.NoError(t, err)
	r := run(t, svc, "PRE")
	kinds := map[string]bool{}
	for _, f := range r.Findings.HighRisk {
		require.Equal(t, "PRE", *f.SKU)
		kinds[f.Kind] = true
	}
	require.Equal(t, map[string]bool{reconcile.KindCountersVsLines: true, reconcile.KindCountersVsLedger: true}, kinds)
}
