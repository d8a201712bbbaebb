package api_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
)

// TestLocationsOverHTTP walks the locations contract over HTTP (every
// exchange checked against openapi.json by the test's transport): two
// warehouses, stock at each, a hold allocated by priority and a split one,
// a key bound to one warehouse, a move, a transfer received short and
// closed, a count, and the refusals of each.
func TestLocationsOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	ok := func(status int, r resp) map[string]any {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.body)
		return r.json(t)
	}
	code := func(status int, want string, r resp) map[string]any {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.body)
		j := r.json(t)
		require.Equal(t, want, j["code"], "%s", r.body)
		return j
	}

	created := ok(201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "berlin", "name": "Berlin", "priority": 1}, key("l1")...))
	require.Equal(t, map[string]any{"id": "berlin", "name": "Berlin", "priority": 1.0, "active": true, "stop_sale": nil,
		"latitude": nil, "longitude": nil, "pickup": false,
		"created_at": created["created_at"], "updated_at": created["updated_at"]}, created)
	replay := e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "berlin", "name": "Berlin", "priority": 1}, key("l1")...)
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	code(409, "conflict", e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "berlin", "name": "B"}, key("l2")...))
	code(403, "forbidden", e.do("POST", "/v1/locations", e.shop, map[string]any{"id": "paris", "name": "Paris"}, key("l3")...))
	ok(201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "paris", "name": "Paris", "priority": 2}, key("l4")...))

	for loc, n := range map[string]int{"berlin": 2, "paris": 5} {
		ok(200, e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": n, "location": loc, "reason": "delivery"}, key("in-"+loc)...))
	}
	code(422, "unknown_location", e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": 1, "location": "madrid", "reason": "x"}, key("in-madrid")...))
	st := ok(200, e.do("GET", "/v1/skus/A1", e.shop, nil))
	pools := st["pools"].([]any)
	require.Len(t, pools, 2)
	require.Equal(t, "berlin", pools[0].(map[string]any)["location"], "by priority")
	// The catalogue: every entry, by priority; with location, that one's.
	ok(200, e.do("POST", "/v1/skus/B2/adjustments", e.ops, map[string]any{"delta": 1, "location": "paris", "reason": "delivery"}, key("in-b2")...))
	cat := ok(200, e.do("GET", "/v1/skus", e.shop, nil))["skus"].([]any)
	require.Len(t, cat, 2)
	require.Equal(t, pools, cat[0].(map[string]any)["pools"], "as GET /v1/skus/A1 lists them")
	for _, q := range []string{"?location=berlin", "?location=berlin&low_stock=false", "?location=berlin&sku=A1&sku=B2"} {
		at := ok(200, e.do("GET", "/v1/skus"+q, e.shop, nil))["skus"].([]any)
		require.Len(t, at, 1, "B2 is not at berlin: %s", q)
		require.Equal(t, []any{pools[0]}, at[0].(map[string]any)["pools"], q)
	}
	code(422, "unknown_location", e.do("GET", "/v1/skus?location=madrid", e.shop, nil))

	h := ok(201, e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 3}}}, key("h1")...))
	require.Equal(t, []any{map[string]any{"sku": "A1", "pool": "main", "quantity": 3.0, "location": "paris"}}, h["items"], "berlin has 2, paris 5")
	split := ok(201, e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 4, "split": true}}}, key("h2")...))
	require.Equal(t, []any{map[string]any{"sku": "A1", "pool": "main", "quantity": 4.0, "allocations": []any{
		map[string]any{"location": "berlin", "quantity": 2.0}, map[string]any{"location": "paris", "quantity": 2.0}}}}, split["items"])
	code(409, "out_of_stock", e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 1}}}, key("h3")...))
	code(422, "unknown_location", e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 1, "location": "nowhere"}}}, key("h4")...))

	// A shop key bound to berlin.
	bound, err := auth.CreateBound(context.Background(), e.pool, "shop-berlin", auth.RoleShop, []string{"berlin"})
	require.NoError(t, err)
	code(403, "location_not_allowed", e.do("POST", "/v1/reservations", bound, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 1, "location": "paris"}}}, key("b1")...))
	ok(200, e.do("POST", "/v1/reservations/"+split["id"].(string)+"/release", e.shop, nil))
	got := ok(201, e.do("POST", "/v1/reservations", bound, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 2}}}, key("b2")...))
	require.Equal(t, "berlin", got["items"].([]any)[0].(map[string]any)["location"])

	// A move, never below zero.
	moved := ok(200, e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"location": "paris", "from": "available", "to": "damaged", "quantity": 1, "reason": "dropped"}, key("m1")...))
	require.NotContains(t, moved, "dry_run")
	short := code(409, "insufficient_damaged", e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"location": "paris", "from": "damaged", "to": "lost", "quantity": 2, "reason": "x"}, key("m2")...))
	require.Equal(t, "damaged", short["state"])
	preview := ok(200, e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"location": "paris", "from": "damaged", "to": "lost", "quantity": 1, "reason": "scrap", "dry_run": true}))
	require.Equal(t, true, preview["dry_run"])
	code(422, "invalid_request", e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"from": "reserved", "to": "damaged", "quantity": 1, "reason": "x"}, key("m3")...))

	// A transfer received short and closed.
	tr := ok(201, e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "from": "paris", "to": "berlin", "quantity": 1, "reason": "rebalance"}, key("t1")...))
	require.Equal(t, "in_transit", tr["status"])
	code(409, "insufficient_available", e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "from": "paris", "to": "berlin", "quantity": 50, "reason": "x"}, key("t2")...))
	list := ok(200, e.do("GET", "/v1/transfers?status=in_transit", e.ops, nil))
	require.Len(t, list["transfers"].([]any), 1)
	require.Nil(t, list["next_cursor"])
	id := tr["id"].(string)
	code(409, "insufficient_incoming", e.do("POST", "/v1/transfers/"+id+"/receive", e.ops, map[string]any{"quantity": 2}))
	closed := ok(200, e.do("POST", "/v1/transfers/"+id+"/close", e.ops, map[string]any{"reason": "never came"}))
	require.EqualValues(t, 1, closed["lost"])
	code(409, "transfer_not_in_transit", e.do("POST", "/v1/transfers/"+id+"/cancel", e.ops, map[string]any{"reason": "x"}))
	code(404, "not_found", e.do("GET", "/v1/transfers/01a2322a-0000-7000-8000-000000000000", e.ops, nil))
	code(400, "invalid_request", e.do("GET", "/v1/transfers?cursor=nope", e.ops, nil))

	// A count.
	// Berlin: the 2 the bound key holds are on the shelf, nothing else.
	code(409, "count_below_held", e.do("POST", "/v1/skus/A1/counts", e.ops, map[string]any{"location": "berlin", "counted": 1, "reason": "monthly"}, key("c1")...))
	counted := ok(200, e.do("POST", "/v1/skus/A1/counts", e.ops, map[string]any{"location": "berlin", "counted": 3, "reason": "monthly"}, key("c2")...))
	require.EqualValues(t, 1, counted["difference"], "one more found")

	// The list of locations, with their totals, and a PATCH.
	locs := ok(200, e.do("GET", "/v1/locations?limit=2", e.ops, nil))
	require.Len(t, locs["locations"].([]any), 2)
	require.Equal(t, "default", locs["next_cursor"])
	code(422, "invalid_request", e.do("GET", "/v1/locations?limit=0", e.ops, nil))
	patched := ok(200, e.do("PATCH", "/v1/locations/paris", e.ops, map[string]any{"active": false}))
	require.Equal(t, false, patched["active"])
	code(404, "unknown_location", e.do("PATCH", "/v1/locations/madrid", e.ops, map[string]any{"active": false}))
	code(409, "location_inactive", e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 1, "location": "paris"}}}, key("h5")...))
}

// TestReinstateKeepsTheKeyBinding replays a reviewer's sequence: a key
// holds at berlin and releases; the key is revoked and made again bound to
// paris. A hold at berlin is 403, and so is reinstating the old hold
// (whose line is at berlin): reinstate makes a new hold, under the
// caller's binding like any other. Reinstated by an ops key, it is held.
func TestReinstateKeepsTheKeyBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	for _, loc := range []string{"berlin", "paris"} {
		require.Equal(t, 201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": loc, "name": loc}, "Idempotency-Key", "l-"+loc).status)
		r := e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": 5, "location": loc, "reason": "delivery"}, "Idempotency-Key", "in-"+loc)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	hold := func(token, key, loc string) resp {
		return e.do("POST", "/v1/reservations", token, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 2, "location": loc}}}, "Idempotency-Key", key)
	}
	berlin, err := auth.CreateBound(ctx, e.pool, "shop-eu", auth.RoleShop, []string{"berlin"})
	require.NoError(t, err)
	h := hold(berlin, "h1", "berlin")
	require.Equal(t, 201, h.status, "%s", h.body)
	id := h.json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/release", berlin, nil).status)

	_, err = auth.Revoke(ctx, e.pool, "shop-eu")
	require.NoError(t, err)
	paris, err := auth.CreateBound(ctx, e.pool, "shop-eu", auth.RoleShop, []string{"paris"})
	require.NoError(t, err)
	requireProblem(t, hold(paris, "h2", "berlin"), 403, "location_not_allowed")
	before := e.counts()
	p := requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/reinstate", paris, nil), 403, "location_not_allowed")
	require.Equal(t, "berlin", p["location"])
	require.Equal(t, before, e.counts(), "nothing held")
	require.Nil(t, e.do("GET", "/v1/reservations/"+id, paris, nil).json(t)["reinstated_as"], "reads are not bound")

	// An ops key is bound to nothing: it reinstates the shop's hold.
	r := e.do("POST", "/v1/reservations/"+id+"/reinstate", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "berlin", r.json(t)["items"].([]any)[0].(map[string]any)["location"])
	// Reinstated once, a bound key's call answers that hold (a read).
	again := e.do("POST", "/v1/reservations/"+id+"/reinstate", paris, nil)
	require.Equal(t, 200, again.status, "%s", again.body)
	require.Equal(t, r.json(t)["id"], again.json(t)["id"])
}

// TestTransferEndsRetriedOverHTTP: a close or a cancel sent again with the
// same Idempotency-Key answers its first answer (replayed), not 409
// transfer_not_in_transit; the same key with another body is 422; a
// transfer from or to an inactive location is 409 location_inactive; a
// cursor that names no transfer is 400, like every list's.
func TestTransferEndsRetriedOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	ok := func(status int, r resp) map[string]any {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.body)
		return r.json(t)
	}
	for _, l := range []string{"berlin", "paris"} {
		ok(201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": l, "name": l}, key("l-"+l)...))
	}
	ok(200, e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": 10, "location": "paris", "reason": "delivery"}, key("in")...))
	send := func(k string) string {
		return ok(201, e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "from": "paris", "to": "berlin", "quantity": 2, "reason": "rebalance"}, key(k)...))["id"].(string)
	}
	for _, end := range []string{"close", "cancel"} {
		id := send("t-" + end)
		path := "/v1/transfers/" + id + "/" + end
		first := e.do("POST", path, e.ops, map[string]any{"reason": "retried"}, key(end)...)
		require.Equal(t, 200, first.status, "%s", first.body)
		again := e.do("POST", path, e.ops, map[string]any{"reason": "retried"}, key(end)...)
		require.Equal(t, 200, again.status, "%s: a retry gets the first answer: %s", end, again.body)
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.JSONEq(t, string(first.body), string(again.body))
		requireProblem(t, e.do("POST", path, e.ops, map[string]any{"reason": "another"}, key(end)...), 422, "idempotency_key_reused")
		requireProblem(t, e.do("POST", path, e.ops, map[string]any{"reason": "new key"}, key(end+"-2")...), 409, "transfer_not_in_transit")
	}

	requireProblem(t, e.do("GET", "/v1/transfers?cursor=01a2322a-0000-7000-8000-000000000000", e.ops, nil), 400, "invalid_request")
	first := ok(200, e.do("GET", "/v1/transfers?limit=1", e.ops, nil))
	next := first["next_cursor"].(string)
	require.Len(t, ok(200, e.do("GET", "/v1/transfers?limit=1&cursor="+next, e.ops, nil))["transfers"].([]any), 1)

	ok(200, e.do("PATCH", "/v1/locations/berlin", e.ops, map[string]any{"active": false}))
	requireProblem(t, e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "from": "paris", "to": "berlin", "quantity": 1, "reason": "x"}, key("t-inactive")...),
		409, "location_inactive")
}
