package api_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
)

// TestStrategiesAndPickupOverHTTP: locations placed on the map and marked
// for pickup; a hold allocated nearest to its ship_to, one by most stock,
// one by a key whose default is most_stock; the pickup locations a SKU can
// be collected at now (not one whose stock is gone, nor one that is not for
// pickup); each exchange checked against openapi.json.
func TestStrategiesAndPickupOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	ok := func(status int, r resp) map[string]any {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.body)
		return r.json(t)
	}
	for _, l := range []map[string]any{
		{"id": "paris", "name": "Paris", "priority": -3, "latitude": 48.86, "longitude": 2.35, "pickup": true},
		{"id": "lyon", "name": "Lyon", "priority": -2, "latitude": 45.76, "longitude": 4.84, "pickup": true},
		{"id": "berlin", "name": "Berlin", "priority": -1, "latitude": 52.52, "longitude": 13.40},
	} {
		created := ok(201, e.do("POST", "/v1/locations", e.ops, l, key("loc-"+l["id"].(string))...))
		require.Equal(t, l["latitude"], created["latitude"])
		require.Equal(t, l["pickup"] == true, created["pickup"])
	}
	for loc, n := range map[string]int{"paris": 1, "lyon": 2, "berlin": 9} {
		ok(200, e.do("POST", "/v1/skus/MAP/adjustments", e.ops, map[string]any{"delta": n, "location": loc, "reason": "delivery"}, key("in-"+loc)...))
	}
	from := func(r map[string]any) string { return r["items"].([]any)[0].(map[string]any)["location"].(string) }
	hold := func(k string, body map[string]any, token string) string {
		body["items"] = []any{map[string]any{"sku": "MAP", "quantity": 1}}
		return from(ok(201, e.do("POST", "/v1/reservations", token, body, key(k)...)))
	}
	require.Equal(t, "lyon", hold("marseille", map[string]any{"strategy": "nearest", "ship_to": map[string]any{"latitude": 43.30, "longitude": 5.37}}, e.shop))
	require.Equal(t, "berlin", hold("most", map[string]any{"strategy": "most_stock"}, e.shop))
	require.Equal(t, "paris", hold("first", map[string]any{}, e.shop))
	most, err := auth.CreateWith(context.Background(), e.pool, "shop-most", auth.RoleShop, auth.Options{Strategy: "most_stock"})
	require.NoError(t, err)
	require.Equal(t, "berlin", hold("by-key", map[string]any{}, most), "the key's default")
	require.Equal(t, "lyon", hold("by-key-asked", map[string]any{"strategy": "priority"}, most), "asked beats the key's default (paris is empty)")

	// Paris and lyon are empty now and berlin is not for pickup: nowhere.
	p := ok(200, e.do("GET", "/v1/skus/MAP/pickup", e.shop, nil))
	require.Empty(t, p["locations"], "lyon's two went to marseille and by-key-asked")
	ok(200, e.do("POST", "/v1/skus/MAP/adjustments", e.ops, map[string]any{"delta": 3, "location": "lyon", "reason": "delivery"}, key("in-lyon-2")...))
	p = ok(200, e.do("GET", "/v1/skus/MAP/pickup", e.shop, nil))
	require.Equal(t, []any{map[string]any{"location": "lyon", "name": "Lyon", "latitude": 45.76, "longitude": 4.84, "available": 3.0}}, p["locations"])
	ok(200, e.do("PATCH", "/v1/locations/berlin", e.ops, map[string]any{"pickup": true}))
	p = ok(200, e.do("GET", "/v1/skus/MAP/pickup", e.shop, nil))
	require.Len(t, p["locations"], 2, "berlin is for pickup now")
}
