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

// TestLedgerShowsThePromise: GET /v1/skus/{sku}/ledger says how each
// movement moved the units promised past what is on hand. With 2 on hand,
// 10 due in five days and a 14-day horizon: a hold of 5 is a reserve of 2
// promising 3, expected the day the notice is due; a confirm sells
// promised units still promised (no delta_backordered); a release and an
// expiry give their promises back; a receipt of 6 fills the confirmed
// hold first, then the oldest held one, a backorder_fill each. Summed,
// the movements are the row's backordered.
func TestLedgerShowsThePromise(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	due := time.Now().UTC().AddDate(0, 0, 5).Format(time.DateOnly)
	e.stockIn("LAMP", 2)
	r := e.do("POST", "/v1/inbound", e.ops, map[string]any{"supplier_ref": "PO-7", "expected_on": due,
		"lines": []any{map[string]any{"sku": "LAMP", "quantity": 10}}}, "Idempotency-Key", "po-7")
	require.Equal(t, 201, r.status, "%s", r.body)
	po := r.json(t)["id"].(string)
	r = e.do("PUT", "/v1/skus/LAMP/backorders", e.ops, map[string]any{"horizon_days": 14})
	require.Equal(t, 200, r.status, "%s", r.body)
	holdOf := func(key string, n int) string {
		t.Helper()
		h := e.hold(key, line("LAMP", n))
		require.Equal(t, 201, h.status, "%s", h.body)
		return h.json(t)["id"].(string)
	}
	first := holdOf("first", 5) // 2 on hand, 3 promised
	sold := holdOf("sold", 4)
	r = e.do("POST", "/v1/reservations/"+sold+"/confirm", e.shop, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	gone := holdOf("gone", 2)
	r = e.do("POST", "/v1/reservations/"+gone+"/release", e.shop, map[string]any{"reason": "changed my mind"})
	require.Equal(t, 200, r.status, "%s", r.body)
	late := holdOf("late", 1)
	_, err := e.pool.Exec(context.Background(), `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, late)
	require.NoError(t, err)
	requireProblem(t, e.do("POST", "/v1/reservations/"+late+"/confirm", e.shop, nil), 409, "reservation_not_held") // expires it
	r = e.do("POST", "/v1/inbound/"+po+"/receive", e.ops, map[string]any{"sku": "LAMP", "quantity": 6}, "Idempotency-Key", "po-7-1")
	require.Equal(t, 200, r.status, "%s", r.body)

	moves := e.do("GET", "/v1/skus/LAMP/ledger?limit=100", e.ops, nil).json(t)["movements"].([]any)
	type move struct {
		kind, hold     string
		backordered    float64
		expected       any
		avail, reserve float64
	}
	var got []move
	var sum int64
	names := map[string]string{first: "first", sold: "sold", gone: "gone", late: "late"}
	for i := len(moves) - 1; i >= 0; i-- { // oldest first
		m := moves[i].(map[string]any)
		b, _ := m["delta_backordered"].(float64)
		sum += int64(b)
		if m["reservation_id"] == nil {
			continue
		}
		got = append(got, move{kind: m["kind"].(string), hold: names[m["reservation_id"].(string)], backordered: b, expected: m["expected_on"],
			avail: m["delta_available"].(float64), reserve: m["delta_reserved"].(float64)})
		if b == 0 {
			require.NotContains(t, m, "delta_backordered", "absent when zero")
		}
	}
	require.Equal(t, []move{
		{kind: "reserve", hold: "first", backordered: 3, expected: due, avail: -2, reserve: 2},
		{kind: "reserve", hold: "sold", backordered: 4, expected: due},
		{kind: "confirm", hold: "sold"},
		{kind: "reserve", hold: "gone", backordered: 2, expected: due},
		{kind: "release", hold: "gone", backordered: -2},
		{kind: "reserve", hold: "late", backordered: 1, expected: due},
		{kind: "expire", hold: "late", backordered: -1},
		{kind: "backorder_fill", hold: "sold", backordered: -4, avail: -4},
		{kind: "backorder_fill", hold: "first", backordered: -2, avail: -2, reserve: 2},
	}, got)
	require.EqualValues(t, 1, e.row("LAMP", "default", "main")["backordered"])
	require.EqualValues(t, 1, sum, "the movements sum to the row's backordered")
}
