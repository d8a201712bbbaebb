package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// promiseOnShelf leaves sku's main row at default with 1 unit held, 5
// units promised to that hold, and 5 available the promise rests on:
// nothing is on its way and the policy allows nothing below zero. (A
// receipt leaves a row so when it skips a hold being changed; here units
// stocked after the promise, and then the notice cancelled, do it.)
func (e *env) promiseOnShelf(sku string) (hold string) {
	t := e.t
	key := func(k string) []string { return []string{"Idempotency-Key", sku + "-" + k} }
	e.stockIn(sku, 1)
	r := e.do("POST", "/v1/inbound", e.ops, map[string]any{"supplier_ref": "PO-" + sku,
		"expected_on": time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly),
		"lines":       []any{map[string]any{"sku": sku, "quantity": 5}}}, key("po")...)
	require.Equal(t, 201, r.status, "%s", r.body)
	po := r.json(t)["id"].(string)
	r = e.do("PUT", "/v1/skus/"+sku+"/backorders", e.ops, map[string]any{"horizon_days": 7})
	require.Equal(t, 200, r.status, "%s", r.body)
	h := e.hold(sku+"-pre", line(sku, 6))
	require.Equal(t, 201, h.status, "%s", h.body)
	require.EqualValues(t, 5, h.json(t)["items"].([]any)[0].(map[string]any)["backordered"], "%s", h.body)
	e.stockIn(sku, 5)
	r = e.do("POST", "/v1/inbound/"+po+"/cancel", e.ops, map[string]any{"reason": "withdrawn"}, key("cancel")...)
	require.Equal(t, 200, r.status, "%s", r.body)
	row := e.row(sku, "default", "main")
	require.EqualValues(t, 5, row["available"], "%v", row)
	require.EqualValues(t, 5, row["backordered"], "%v", row)
	require.EqualValues(t, 0, row["incoming"], "%v", row)
	return h.json(t)["id"].(string)
}

// TestUnitsAPromiseRestsOn: every write that would take away the units a
// promise rests on (its stock row's available, with nothing on its way
// and no room below zero) is refused 409 incoming_promised, problem+json,
// and changes nothing: an adjustment and its preview, a bulk adjustment
// (delta and set_total), a move, a count, a transfer out, a campaign's
// pool filled from main. A hold for those units is refused out_of_stock.
// Once the promised hold is released, the same adjustment goes through.
func TestUnitsAPromiseRestsOn(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	require.Equal(t, 201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "north", "name": "North", "priority": 2},
		"Idempotency-Key", "loc-north").status)
	hold := e.promiseOnShelf("WAIT")
	before := e.counts()
	n := 0
	refused := func(what string, r resp) {
		t.Helper()
		p := requireProblem(t, r, 409, "incoming_promised")
		require.Contains(t, p["detail"], "WAIT", what)
		require.Equal(t, before, e.counts(), "%s changed something", what)
	}
	send := func(method, path string, body any) resp {
		n++
		return e.do(method, path, e.ops, body, "Idempotency-Key", fmt.Sprintf("w-%d", n))
	}
	refused("adjustment", send("POST", "/v1/skus/WAIT/adjustments", map[string]any{"delta": -1, "reason": "write-off"}))
	refused("preview", send("POST", "/v1/skus/WAIT/adjustments", map[string]any{"delta": -5, "reason": "write-off", "dry_run": true}))
	refused("bulk delta", send("POST", "/v1/stock/adjustments", map[string]any{"reason": "write-off",
		"lines": []any{map[string]any{"sku": "WAIT", "delta": -2}}}))
	refused("bulk set_total", send("POST", "/v1/stock/adjustments", map[string]any{"reason": "count",
		"lines": []any{map[string]any{"sku": "WAIT", "set_total": 1}}}))
	refused("move", send("POST", "/v1/skus/WAIT/moves", map[string]any{"from": "available", "to": "damaged", "quantity": 1, "reason": "scratched"}))
	refused("count", send("POST", "/v1/skus/WAIT/counts", map[string]any{"counted": 3, "reason": "monthly count"}))
	refused("transfer", send("POST", "/v1/transfers", map[string]any{"sku": "WAIT", "from": "default", "to": "north", "quantity": 1, "reason": "restock north"}))
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	err = stock.PoolTransferTx(ctx, tx, stock.PoolTransfer{SKU: "WAIT", From: stock.MainPool, To: "bf", Quantity: 1, Actor: "ops", Ref: "bf"})
	require.NoError(t, tx.Rollback(ctx))
	var de *domain.Error
	require.ErrorAs(t, err, &de, "a campaign's pool filled from main")
	require.Equal(t, domain.CodeIncomingPromised, de.Code, "a campaign's pool filled from main: %v", err)

	requireProblem(t, e.hold("WAIT-other", line("WAIT", 1)), 409, "out_of_stock")
	require.Equal(t, before, e.counts(), "a hold refused changed something")

	r := e.do("POST", "/v1/reservations/"+hold+"/release", e.shop, map[string]any{"reason": "cancelled"})
	require.Equal(t, 200, r.status, "%s", r.body)
	r = send("POST", "/v1/skus/WAIT/adjustments", map[string]any{"delta": -1, "reason": "write-off"})
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestCampaignEndLeavesUnitsAPromiseRestsOn: a campaign's pool with a
// backorder policy, a confirmed hold promised 3 units there that rest on
// its available (the notice they were due on cancelled after the pool
// was stocked by hand). The end's rollback finishes: main gets back what
// is free, and the 3 units the confirmed promise waits on stay in the
// pool with it.
func TestCampaignEndLeavesUnitsAPromiseRestsOn(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	e.stockIn("CAMP", 10)
	r := e.do("POST", "/v1/campaigns", e.ops, campaignBody("bf", "", map[string]any{"sku": "CAMP", "quantity": 2}), key("c")...)
	require.Equal(t, 201, r.status, "%s", r.body)
	require.NoError(t, e.camps.Start(ctx, "bf"))
	r = e.do("POST", "/v1/inbound", e.ops, map[string]any{"supplier_ref": "PO-bf",
		"expected_on": time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly),
		"lines":       []any{map[string]any{"sku": "CAMP", "pool": "bf", "quantity": 3}}}, key("po")...)
	require.Equal(t, 201, r.status, "%s", r.body)
	po := r.json(t)["id"].(string)
	r = e.do("PUT", "/v1/skus/CAMP/backorders", e.ops, map[string]any{"pool": "bf", "horizon_days": 7})
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": []any{line("CAMP", 5)}}, key("h")...)
	require.Equal(t, 201, r.status, "%s", r.body)
	hold := r.json(t)["id"].(string)
	r = e.do("POST", "/v1/reservations/"+hold+"/confirm", e.shop, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.do("POST", "/v1/skus/CAMP/adjustments", e.ops, map[string]any{"pool": "bf", "delta": 4, "reason": "made by hand"}, key("in-bf")...)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.do("POST", "/v1/inbound/"+po+"/cancel", e.ops, map[string]any{"reason": "withdrawn"}, key("cancel")...)
	require.Equal(t, 200, r.status, "%s", r.body)

	e.endCampaign("bf")
	require.Equal(t, "rolled_back", e.do("GET", "/v1/campaigns/bf", e.ops, nil).json(t)["status"])
	pool := e.row("CAMP", "default", "bf")
	require.EqualValues(t, 3, pool["available"], "%v", pool)
	require.EqualValues(t, 3, pool["backordered"], "%v", pool)
	require.EqualValues(t, 2, pool["sold"], "%v", pool)
	main := e.row("CAMP", "default", "main")
	require.EqualValues(t, 9, main["available"], "8 left in main, 1 given back: %v", main)
}
