package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestABundleHasNoStock: every write that would give a bundle SKU stock of
// its own (an adjustment, one line of a bulk adjustment, an inbound
// notice, units, a count, a transfer) is a clear 4xx that changes
// nothing; defining a bundle over a SKU with stock is refused too.
func TestABundleHasNoStock(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("MUG", 10)
	def := e.do("PUT", "/v1/bundles/BOX", e.ops, map[string]any{"components": []any{line("MUG", 1)}, "reason": "gift box"})
	require.Equal(t, 200, def.status, "%s", def.body)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	before := e.counts()
	for name, r := range map[string]resp{
		"adjustment": e.do("POST", "/v1/skus/BOX/adjustments", e.ops, map[string]any{"delta": 5, "reason": "found some"}, key("adj")...),
		"bulk": e.do("POST", "/v1/stock/adjustments", e.ops, map[string]any{"reason": "import",
			"lines": []any{map[string]any{"sku": "MUG", "delta": 1}, map[string]any{"sku": "BOX", "delta": 1}}}, key("bulk")...),
		"set total": e.do("POST", "/v1/stock/adjustments", e.ops, map[string]any{"reason": "import",
			"lines": []any{map[string]any{"sku": "BOX", "set_total": 4}}}, key("set")...),
		"inbound": e.do("POST", "/v1/inbound", e.ops, map[string]any{"supplier_ref": "PO-1", "location": "default", "expected_on": tomorrow,
			"lines": []any{line("BOX", 3)}}, key("in")...),
		"units": e.do("POST", "/v1/skus/BOX/units", e.ops, map[string]any{"reason": "plan", "units": []any{map[string]any{"id": "B-1"}}}, key("units")...),
		"count": e.do("POST", "/v1/skus/BOX/counts", e.ops, map[string]any{"location": "default", "counted": 3, "reason": "monthly"}, key("count")...),
		"transfer": e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "BOX", "from": "default", "to": "default", "quantity": 1, "reason": "x"},
			key("tr")...),
	} {
		require.GreaterOrEqual(t, r.status, 400, "%s: %s", name, r.body)
		require.Less(t, r.status, 500, "%s: %s", name, r.body)
		if name != "count" && name != "transfer" { // no stock to count or send: unknown_sku
			p := requireProblem(t, r, 422, "invalid_request")
			require.Contains(t, p["detail"], `"BOX" is a bundle`, name)
		}
	}
	require.Equal(t, before, e.counts(), "nothing changed")
	var rows int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM stock WHERE sku = 'BOX'`).Scan(&rows))
	require.Zero(t, rows, "the bundle has no stock row")

	// The other way round: a SKU with stock is no bundle.
	requireProblem(t, e.do("PUT", "/v1/bundles/MUG", e.ops, map[string]any{"components": []any{line("BOX", 1)}, "reason": "x"}), 422, "invalid_request")
	e.stockIn("TEA", 1)
	r := e.do("PUT", "/v1/bundles/TEA", e.ops, map[string]any{"components": []any{line("MUG", 1)}, "reason": "x"})
	requireProblem(t, r, 422, "invalid_request")
	require.Contains(t, r.json(t)["detail"], "has stock of its own", fmt.Sprint(r.status))
}
