package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
)

// lineAt is a hold line of n units of sku taken at location.
func lineAt(sku string, n int, location string) map[string]any {
	return map[string]any{"sku": sku, "quantity": n, "location": location}
}

// twoWarehouses adds paris (priority 1) and berlin (priority 2) through
// the API.
func twoWarehouses(e *env) {
	e.t.Helper()
	for i, id := range []string{"paris", "berlin"} {
		r := e.do("POST", "/v1/locations", e.ops, map[string]any{"id": id, "name": id, "priority": i + 1}, "Idempotency-Key", "loc-"+id)
		require.Equal(e.t, 201, r.status, "%s", r.body)
	}
}

func (e *env) stockInAt(sku, location string, n int) {
	e.t.Helper()
	r := e.do("POST", "/v1/skus/"+sku+"/adjustments", e.ops, map[string]any{"delta": n, "location": location, "reason": "delivery"},
		"Idempotency-Key", "in-"+sku+"-"+location)
	require.Equal(e.t, 200, r.status, "%s", r.body)
}

// TestTwoLinesOfOneSKUAtOneRow: a hold whose two lines of one SKU land on
// one stock row, one naming the location and the other allocated there
// or split over it, is one line of both (it was a 500 on the lines'
// primary key), and its replay answers the same.
func TestTwoLinesOfOneSKUAtOneRow(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	twoWarehouses(e)
	e.stockInAt("A1", "paris", 5)
	e.stockInAt("A1", "berlin", 5)

	r := e.hold("named-and-allocated", lineAt("A1", 2, "paris"), line("A1", 1))
	require.Equal(t, 201, r.status, "%s", r.body)
	require.Equal(t, []any{map[string]any{"sku": "A1", "pool": "main", "quantity": 3.0, "location": "paris"}}, r.json(t)["items"])

	split := map[string]any{"sku": "A1", "quantity": 4, "split": true}
	r = e.hold("named-and-split", lineAt("A1", 1, "paris"), split)
	require.Equal(t, 201, r.status, "%s", r.body)
	require.Equal(t, []any{map[string]any{"sku": "A1", "pool": "main", "quantity": 5.0, "allocations": []any{
		map[string]any{"location": "berlin", "quantity": 3.0}, map[string]any{"location": "paris", "quantity": 2.0}}}}, r.json(t)["items"],
		"paris had 3: 1 named, 1 of the split, then berlin")
	replay := e.hold("named-and-split", lineAt("A1", 1, "paris"), split)
	require.Equal(t, 201, replay.status, "%s", replay.body)
	require.Equal(t, r.json(t)["items"], replay.json(t)["items"])
}

// TestTwoLinesOfOneSeatPool: on a pool of seats, two quantity lines of
// one SKU, one naming its location and one allocated there, hold as many
// different seats on one line; seats named on a line with a location
// beside a line of the SKU without one (or the other way round) are
// refused 422 and write nothing (both were 500s: the lines' primary key,
// and their units check).
func TestTwoLinesOfOneSeatPool(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	units := []map[string]any{}
	for _, id := range []string{"A-1", "A-2", "A-3", "A-4"} {
		units = append(units, map[string]any{"id": id})
	}
	add := e.do("POST", "/v1/skus/SEATS/units", e.ops, map[string]any{"reason": "plan", "units": units}, "Idempotency-Key", "plan")
	require.Equal(t, 200, add.status, "%s", add.body)
	before := e.counts()
	for _, items := range [][]any{
		{map[string]any{"sku": "SEATS", "units": []string{"A-1"}, "location": "default"}, line("SEATS", 1)},
		{map[string]any{"sku": "SEATS", "units": []string{"A-1"}}, lineAt("SEATS", 1, "default")},
	} {
		p := requireProblem(t, e.hold("seats-apart", items...), 422, "invalid_request")
		require.Contains(t, p["detail"], "same location")
	}
	require.Equal(t, before, e.counts(), "refused: nothing written")
	r := e.hold("seats-twice", lineAt("SEATS", 1, "default"), line("SEATS", 2))
	require.Equal(t, 201, r.status, "%s", r.body)
	held := r.json(t)["items"].([]any)
	require.Len(t, held, 1)
	require.EqualValues(t, 3, held[0].(map[string]any)["quantity"])
	require.Len(t, held[0].(map[string]any)["units"], 3, "three different seats")
}

// TestCapCountsEveryLocation: a campaign's max_per_order counts a SKU's
// units across its lines at every location: 2 at paris and 2 at berlin
// under a cap of 2 is refused 422 limit_exceeded, naming the 4 asked.
func TestCapCountsEveryLocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	twoWarehouses(e)
	e.stockInAt("FLASH", "paris", 10)
	e.stockInAt("FLASH", "berlin", 10)
	camp := map[string]any{"id": "bf", "starts_at": time.Now().UTC().Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_seconds": 120, "max_per_order": 2, "allotments": []any{
			map[string]any{"sku": "FLASH", "quantity": 5, "location": "paris"}, map[string]any{"sku": "FLASH", "quantity": 5, "location": "berlin"}}}
	r := e.do("POST", "/v1/campaigns", e.ops, camp, "Idempotency-Key", "bf")
	require.Equal(t, 201, r.status, "%s", r.body)
	require.NoError(t, e.camps.Start(ctx, "bf"))
	hold := func(key string, items ...any) resp {
		return e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": items}, "Idempotency-Key", key)
	}
	before := e.counts()
	p := requireProblem(t, hold("apart", lineAt("FLASH", 2, "paris"), lineAt("FLASH", 2, "berlin")), 422, "limit_exceeded")
	require.Equal(t, "FLASH", p["sku"])
	require.Contains(t, p["detail"], "at most 2 of SKU \"FLASH\" in one hold, 4 requested")
	requireProblem(t, hold("named-and-allocated", lineAt("FLASH", 1, "paris"), line("FLASH", 2)), 422, "limit_exceeded")
	require.Equal(t, before, e.counts(), "nothing held")
	ok := hold("at-cap", lineAt("FLASH", 1, "paris"), lineAt("FLASH", 1, "berlin"))
	require.Equal(t, 201, ok.status, "%s", ok.body)
}

// TestStopSaleOnTheOnlyLocation: a hold allocated among locations whose
// only one has its sales stopped is refused 503 stop_sale naming it, not
// 409 out_of_stock, while its stock is there; once lifted it is granted.
func TestStopSaleOnTheOnlyLocation(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 50)
	flip := func(active bool) {
		t.Helper()
		r := e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"location": "default", "active": active, "reason": "stocktake"})
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	flip(true)
	for i, it := range []any{line("A1", 1), map[string]any{"sku": "A1", "quantity": 1, "split": true}} {
		for j := range 3 { // the same after a refusal: nothing remembered as sold out
			p := requireProblem(t, e.hold(fmt.Sprint("stopped-", i, "-", j), it), 503, "stop_sale")
			require.Equal(t, "default", p["location"])
			require.Equal(t, "A1", p["sku"])
		}
	}
	flip(false)
	r := e.hold("after", line("A1", 1))
	require.Equal(t, 201, r.status, "%s", r.body)
}

// TestBoundKeyOutOfStockDetail: a key bound to locations refused
// out_of_stock is told what it asked and the most one of its locations
// has, each in its place.
func TestBoundKeyOutOfStockDetail(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	twoWarehouses(e)
	e.stockInAt("A1", "paris", 2)
	e.stockInAt("A1", "berlin", 1)
	bound, err := auth.CreateBound(context.Background(), e.pool, "shop-eu", auth.RoleShop, []string{"paris", "berlin"})
	require.NoError(t, err)
	send := func(key string, it map[string]any) map[string]any {
		return requireProblem(t, e.do("POST", "/v1/reservations", bound, map[string]any{"items": []any{it}}, "Idempotency-Key", key), 409, "out_of_stock")
	}
	p := send("five", map[string]any{"sku": "A1", "quantity": 5})
	require.Equal(t, `SKU "A1" (pool main): no location this key may use (paris, berlin) has 5 available (the most at one is 2)`, p["detail"])
	p = send("five-split", map[string]any{"sku": "A1", "quantity": 5, "split": true})
	require.Equal(t, `SKU "A1" (pool main) has 3 available across the active locations this key may use (paris, berlin), 5 requested`, p["detail"])
}
