package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestBundleLedgerLines: a hold's history and a component's ledger name
// the bundle line each movement of a component line came from (how many
// of the bundle, the definition's version, a link to the bundle); a
// movement of anything else names none.
func TestBundleLedgerLines(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dbtest.StockIn(t, e.pool, "MUG", 10)
	dbtest.StockIn(t, e.pool, "COASTER", 10)
	dbtest.StockIn(t, e.pool, "CUP", 10)
	_, err := e.app.Inventory.SetBundle(ctx, stock.Bundle{SKU: "GIFT-BOX", Reason: "gift box",
		Components: []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "COASTER", Quantity: 2}}}, "ops")
	require.NoError(t, err)
	h, _, err := e.app.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: "box", OrderRef: "o-box",
		Items: []inventory.Item{{SKU: "GIFT-BOX", Quantity: 2}, {SKU: "CUP", Quantity: 1}}})
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)

	line := `for 2 × <a href="/ops/skus/GIFT-BOX">GIFT-BOX</a> (version 1)`
	history := b.do("GET", "/ops/holds/"+h.ID.String(), nil, nil)
	require.Equal(t, 200, history.status, history.body)
	require.Equal(t, 2, strings.Count(history.body, line), "the mug and the coaster lines of the box; the cup names none:\n%s", history.body)
	ledger := b.do("GET", "/ops/skus/MUG", nil, nil)
	require.Equal(t, 200, ledger.status, ledger.body)
	require.Equal(t, 1, strings.Count(ledger.body, line), "the reserve of the box's mug; its stock in names none:\n%s", ledger.body)
}
