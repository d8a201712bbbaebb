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

// TestBundleInACampaignEnds: a bundle held in a campaign holds its
// components in the campaign's pools; the campaign's end releases the
// hold, every component line with it (a rollback ledger row each), and
// gives each component's stock back to main.
func TestBundleInACampaignEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	e.stockIn("MUG", 10)
	e.stockIn("COASTER", 10)
	def := e.do("PUT", "/v1/bundles/BOX", e.ops, map[string]any{"components": []any{line("MUG", 1), line("COASTER", 2)}, "reason": "gift box"})
	require.Equal(t, 200, def.status, "%s", def.body)
	r := e.do("POST", "/v1/campaigns", e.ops, campaignBody("xmas", "",
		map[string]any{"sku": "MUG", "quantity": 4}, map[string]any{"sku": "COASTER", "quantity": 8}), key("c")...)
	require.Equal(t, 201, r.status, "%s", r.body)
	require.NoError(t, e.camps.Start(ctx, "xmas"))
	h := e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "xmas", "items": []any{line("BOX", 3)}}, key("h")...)
	require.Equal(t, 201, h.status, "%s", h.body)
	items := h.json(t)["items"].([]any)
	require.Len(t, items, 2)
	for _, it := range items {
		m := it.(map[string]any)
		require.Equal(t, "xmas", m["pool"], "%v", m)
		require.Equal(t, map[string]any{"sku": "BOX", "quantity": 3.0, "version": 1.0}, m["bundle"])
	}
	id := h.json(t)["id"].(string)

	e.endCampaign("xmas")
	got := e.do("GET", "/v1/reservations/"+id, e.shop, nil)
	require.Equal(t, "released", got.json(t)["status"], "%s", got.body)
	var kinds []string
	rows, err := e.pool.Query(ctx, `SELECT kind || ' ' || sku || ' ' || delta_reserved FROM ledger
		WHERE reservation_id = $1 AND kind <> 'reserve' ORDER BY sku`, id)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kinds = append(kinds, k)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"rollback COASTER -6", "rollback MUG -3"}, kinds, "every component line, in one rollback")
	require.EqualValues(t, 10, e.row("MUG", "default", "main")["available"])
	require.EqualValues(t, 10, e.row("COASTER", "default", "main")["available"])
}

// TestOneSKUOnTwoLinesOfAHold: a hold's lines are one per SKU's pool and
// location, each recording one bundle line, so two ticket types of one
// quota, or a bundle and its own component, in one hold are refused 422
// naming the SKU, changing nothing; each holds alone.
func TestOneSKUOnTwoLinesOfAHold(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("QUOTA", 10)
	for _, ticket := range []string{"ADULT", "CHILD"} {
		r := e.do("PUT", "/v1/bundles/"+ticket, e.ops, map[string]any{"components": []any{line("QUOTA", 1)}, "reason": "quota"})
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	before := e.counts()
	p := requireProblem(t, e.hold("family", line("ADULT", 2), line("CHILD", 1)), 422, "invalid_request")
	require.Contains(t, p["detail"], `"QUOTA" is a component of bundles "ADULT" and "CHILD"`)
	p = requireProblem(t, e.hold("box-and-quota", line("ADULT", 1), line("QUOTA", 1)), 422, "invalid_request")
	require.Contains(t, p["detail"], `"QUOTA" is a line of the hold and a component of bundle "ADULT"`)
	require.Equal(t, before, e.counts(), "nothing changed")
	require.Equal(t, 201, e.hold("adults", line("ADULT", 2)).status)
	require.Equal(t, 201, e.hold("child", line("CHILD", 1)).status)
}

// TestBundleLedger: the served ledger says which bundle line each
// movement of a component line came from (the bundle, how many, the
// definition's version the hold used), on the hold's reserve and on its
// release, however the definition changed since; a hold of the component
// itself in the same request, and an adjustment, carry none.
func TestBundleLedger(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("MUG", 10)
	e.stockIn("COASTER", 10)
	def := e.do("PUT", "/v1/bundles/BOX", e.ops, map[string]any{"components": []any{line("MUG", 1), line("COASTER", 2)}, "reason": "gift box"})
	require.Equal(t, 200, def.status, "%s", def.body)
	e.stockIn("CUP", 3)
	h := e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{line("BOX", 2), line("CUP", 1)}}, "Idempotency-Key", "box")
	require.Equal(t, 201, h.status, "%s", h.body)
	id := h.json(t)["id"].(string)
	def = e.do("PUT", "/v1/bundles/BOX", e.ops, map[string]any{"components": []any{line("MUG", 1)}, "reason": "no coasters"})
	require.Equal(t, 200, def.status, "%s", def.body)
	rel := e.do("POST", "/v1/reservations/"+id+"/release", e.shop, map[string]any{"reason": "changed my mind"})
	require.Equal(t, 200, rel.status, "%s", rel.body)

	bundles := func(sku string) []any {
		r := e.do("GET", "/v1/skus/"+sku+"/ledger", e.ops, nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var out []any
		for _, m := range r.json(t)["movements"].([]any) {
			m := m.(map[string]any)
			out = append(out, []any{m["kind"], m["delta_reserved"], m["bundle"]})
		}
		return out
	}
	box := map[string]any{"sku": "BOX", "quantity": float64(2), "version": float64(1)}
	require.Equal(t, []any{
		[]any{"release", float64(-2), box},
		[]any{"reserve", float64(2), box},
		[]any{"stock_in", float64(0), nil},
	}, bundles("MUG"))
	require.Equal(t, []any{
		[]any{"release", float64(-4), box},
		[]any{"reserve", float64(4), box},
		[]any{"stock_in", float64(0), nil},
	}, bundles("COASTER"))
	require.Equal(t, []any{
		[]any{"release", float64(-1), nil},
		[]any{"reserve", float64(1), nil},
		[]any{"stock_in", float64(0), nil},
	}, bundles("CUP"))
}
