package reconcile_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

func (b *bundle) holdBundle(t *testing.T, key, sku string, q int64) uuid.UUID {
	t.Helper()
	r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{Client: "shop-a", IdempotencyKey: key, OrderRef: "o-" + key,
		Items: []inventory.Item{{SKU: sku, Quantity: q}}})
	require.NoError(t, err)
	return r.ID
}

func (b *bundle) defineBox(t *testing.T, coasters int64) {
	t.Helper()
	_, err := b.inv.SetBundle(context.Background(), stock.Bundle{SKU: "BOX", Reason: "test", Components: []stock.Component{
		{SKU: "MUG", Quantity: 1}, {SKU: "COASTER", Quantity: coasters}}}, "ops")
	require.NoError(t, err)
}

// bundleFindings are a run's bundle_vs_components findings by hold.
func bundleFindings(t *testing.T, r reconcile.Run) map[uuid.UUID]map[string]any {
	t.Helper()
	out := map[uuid.UUID]map[string]any{}
	for _, f := range r.Findings.HighRisk {
		if f.Kind != reconcile.KindBundleVsComponents {
			continue
		}
		require.NotNil(t, f.ReservationID, "a bundle finding names its hold")
		require.Equal(t, "BOX", *f.SKU, "and its bundle")
		out[*f.ReservationID] = details(t, f)
	}
	return out
}

// TestBundleLinesAgainstTheirDefinition: held and confirmed holds of a
// bundle, some made by a definition since replaced, balance; a component
// line whose bundle quantity was changed by hand, and a hold whose lines
// were pointed at another version of the definition, are high-risk
// findings naming the hold and, per component, what the definition wants
// and what the lines hold, in a full run and in a run over a component's
// SKU. No pool is paused for them: the pools' counters still agree with
// the lines.
func TestBundleLinesAgainstTheirDefinition(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 20)
	b.defineBox(t, 2)
	held := b.holdBundle(t, "held", "BOX", 2)
	bought := b.holdBundle(t, "bought", "BOX", 1)
	_, err := b.inv.Confirm(ctx, bought, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err)
	b.defineBox(t, 3)
	later := b.holdBundle(t, "later", "BOX", 1)
	require.Empty(t, run(t, svc).Findings.All(), "each hold holds what the definition it used says, old or new")

	b.behindTriggers(t, `UPDATE reservation_lines SET bundle_quantity = 5 WHERE reservation_id = $1 AND sku = 'COASTER'`, held)
	b.behindTriggers(t, `UPDATE reservation_lines SET bundle_version = 2 WHERE reservation_id = $1`, bought)

	for _, skus := range [][]string{nil, {"MUG"}} {
		r := run(t, svc, skus...)
		require.EqualValues(t, 2, r.HighRisk, "skus %v", skus)
		found := bundleFindings(t, r)
		require.Len(t, found, 2, "skus %v: the hold made by the new definition is not found", skus)

		h := found[held]
		require.Equal(t, false, h["lines_agree"], "its lines say 2 and 5 boxes")
		require.EqualValues(t, 2, h["bundle_quantity"])

		d := found[bought]
		require.Equal(t, true, d["lines_agree"])
		require.EqualValues(t, 2, d["bundle_version"])
		require.Equal(t, []any{
			map[string]any{"sku": "COASTER", "definition": float64(3), "held": float64(2), "difference": float64(-1)},
			map[string]any{"sku": "MUG", "definition": float64(1), "held": float64(1), "difference": float64(0)},
		}, d["components"], "version 2 wants 3 coasters a box; the hold has the 2 of version 1")
	}
	for _, sku := range []string{"MUG", "COASTER"} {
		require.Equal(t, stock.StockOnSale, b.stock(t, sku, "main").Status, "%s: no pool paused", sku)
	}
	_, err = b.inv.Release(ctx, held, inventory.Caller{Name: "shop-a"}, "changed mind")
	require.NoError(t, err)
	found := bundleFindings(t, run(t, svc))
	require.Len(t, found, 1, "a released hold is not checked")
	require.Contains(t, found, bought)
	require.NotContains(t, found, later)
}
