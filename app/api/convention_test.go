package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/events/eventstest"
)

// A check is one request a route must refuse, with the status and code
// the one rule (app/api/problem.go) gives it.
type check struct {
	name         string
	method, path string
	// token is the key to send: "ops" or "shop".
	token  string
	body   any
	status int
	code   string
}

// A list is a list route and how to walk it: what the convention says of
// every list (limit, cursor, next_cursor null on the last page, the
// deprecated names) is checked on each.
type list struct {
	path, token string
	// field is the answer's array.
	field string
	// max is the route's largest limit.
	max int
	// badCursor is a cursor the route never gives.
	badCursor string
	// deprecated is the cursor's old name, if it had one, and
	// deprecatedNext the old name of next_cursor.
	deprecated, deprecatedNext string
	// feed: an empty page is the end, a page not full is not (a feed has
	// no last page).
	feed bool
}

// TestErrorConvention holds every route to the one rule for errors
// (malformed 400, well-formed but unacceptable 422, a resource the path
// names missing 404, unknown_pool for a pool of a SKU that exists) and
// every list to the one convention for pages. Every route the server
// registers must have its entry: a new route without one fails here.
func TestErrorConvention(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("A1", 10)
	e.stockIn("A1", 5) // two movements, two stock events
	h1 := e.hold("conv-1", line("A1", 1)).json(t)["id"].(string)
	e.hold("conv-2", line("A1", 1))
	r := e.do("POST", "/v1/skus/SEATS/units", e.ops, map[string]any{"reason": "venue", "units": []map[string]any{{"id": "S-1"}, {"id": "S-2"}, {"id": "S-3"}}},
		"Idempotency-Key", "conv-units")
	require.Equal(t, 200, r.status, "%s", r.body)
	for i := range 2 {
		r := e.do("POST", "/v1/webhooks", e.ops, map[string]any{"url": fmt.Sprintf("https://93.184.216.34/hook-%d", i), "events": []string{"*"}},
			"Idempotency-Key", fmt.Sprint("conv-wh-", i))
		require.Equal(t, 201, r.status, "%s", r.body)
	}
	for i := range 2 {
		_, err := e.alerts.Raise(ctx, alerts.Raise{Level: alerts.Warning, Kind: "job_retried", Subject: fmt.Sprint("s", i), Action: "none"})
		require.NoError(t, err)
	}
	r = e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "east", "name": "East", "priority": 20}, "Idempotency-Key", "conv-east")
	require.Equal(t, 201, r.status, "%s", r.body)
	var tr1 string
	for i := range 2 {
		r := e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "from": "default", "to": "east", "quantity": 1, "reason": "restock"},
			"Idempotency-Key", fmt.Sprint("conv-tr-", i))
		require.Equal(t, 201, r.status, "%s", r.body)
		tr1 = r.json(t)["id"].(string)
	}
	var in1 string
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	for i := range 2 {
		r := e.do("POST", "/v1/inbound", e.ops, map[string]any{"supplier_ref": fmt.Sprint("PO-", i), "location": "east", "expected_on": tomorrow,
			"lines": []map[string]any{{"sku": "A1", "quantity": 3}}}, "Idempotency-Key", fmt.Sprint("conv-in-", i))
		require.Equal(t, 201, r.status, "%s", r.body)
		in1 = r.json(t)["id"].(string)
	}
	eventstest.WaitServed(t, e.pool)

	missing := uuid.NewString()
	var today string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))
	const (
		ops, shop = "ops", "shop"
		bad, inv  = 400, "invalid_request"
	)
	malformed := `{"reason": `
	routes := map[string][]check{
		"POST /v1/skus/:sku/adjustments": {
			{"malformed", "POST", "/v1/skus/A1/adjustments", ops, malformed, bad, inv},
			{"delta 0", "POST", "/v1/skus/A1/adjustments", ops, map[string]any{"delta": 0, "reason": "r"}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/adjustments", ops, map[string]any{"delta": -1, "reason": "r"}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/A1/adjustments", ops, map[string]any{"delta": 1, "pool": "c9", "reason": "r"}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/skus/A1/adjustments", ops, map[string]any{"delta": 1, "location": "west", "reason": "r"}, 422, "unknown_location"},
		},
		"POST /v1/locations": {
			{"malformed", "POST", "/v1/locations", ops, malformed, bad, inv},
			{"no id", "POST", "/v1/locations", ops, map[string]any{"name": "West"}, 422, inv},
			{"latitude out of range", "POST", "/v1/locations", ops, map[string]any{"id": "west", "name": "West", "latitude": 91, "longitude": 0}, 422, inv},
			{"latitude alone", "POST", "/v1/locations", ops, map[string]any{"id": "west", "name": "West", "latitude": 45}, 422, inv},
		},
		"GET /v1/locations": {},
		"GET /v1/locations/:id": {
			{"name too long", "GET", "/v1/locations/" + strings.Repeat("l", 65), ops, nil, 422, inv},
			{"no such location", "GET", "/v1/locations/west", ops, nil, 404, "unknown_location"},
		},
		"PATCH /v1/locations/:id": {
			{"malformed", "PATCH", "/v1/locations/east", ops, malformed, bad, inv},
			{"nothing to change", "PATCH", "/v1/locations/east", ops, map[string]any{}, 422, inv},
			{"longitude out of range", "PATCH", "/v1/locations/east", ops, map[string]any{"latitude": 0, "longitude": 181}, 422, inv},
			{"no such location", "PATCH", "/v1/locations/west", ops, map[string]any{"active": false}, 404, "unknown_location"},
		},
		"POST /v1/skus/:sku/moves": {
			{"malformed", "POST", "/v1/skus/A1/moves", ops, malformed, bad, inv},
			{"quantity 0", "POST", "/v1/skus/A1/moves", ops, map[string]any{"from": "available", "to": "damaged", "quantity": 0, "reason": "r"}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/moves", ops, map[string]any{"from": "available", "to": "damaged", "quantity": 1, "reason": "r"}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/A1/moves", ops, map[string]any{"pool": "c9", "from": "available", "to": "damaged", "quantity": 1, "reason": "r"}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/skus/A1/moves", ops, map[string]any{"location": "west", "from": "available", "to": "damaged", "quantity": 1, "reason": "r"}, 422, "unknown_location"},
		},
		"POST /v1/skus/:sku/counts": {
			{"malformed", "POST", "/v1/skus/A1/counts", ops, malformed, bad, inv},
			{"negative", "POST", "/v1/skus/A1/counts", ops, map[string]any{"counted": -1, "reason": "r"}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/counts", ops, map[string]any{"counted": 1, "reason": "r"}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/A1/counts", ops, map[string]any{"pool": "c9", "counted": 1, "reason": "r"}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/skus/A1/counts", ops, map[string]any{"location": "west", "counted": 1, "reason": "r"}, 422, "unknown_location"},
		},
		"POST /v1/transfers": {
			{"malformed", "POST", "/v1/transfers", ops, malformed, bad, inv},
			{"to itself", "POST", "/v1/transfers", ops, map[string]any{"sku": "A1", "from": "east", "to": "east", "quantity": 1, "reason": "r"}, 422, inv},
			{"no such SKU", "POST", "/v1/transfers", ops, map[string]any{"sku": "NOPE", "from": "default", "to": "east", "quantity": 1, "reason": "r"}, 422, "unknown_sku"},
			{"no such pool", "POST", "/v1/transfers", ops, map[string]any{"sku": "A1", "pool": "c9", "from": "default", "to": "east", "quantity": 1, "reason": "r"}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/transfers", ops, map[string]any{"sku": "A1", "from": "default", "to": "west", "quantity": 1, "reason": "r"}, 422, "unknown_location"},
		},
		"POST /v1/inbound": {
			{"malformed", "POST", "/v1/inbound", ops, malformed, bad, inv},
			{"expected yesterday", "POST", "/v1/inbound", ops, map[string]any{"supplier_ref": "PO", "expected_on": "2001-01-01", "lines": []map[string]any{{"sku": "A1", "quantity": 1}}}, 422, inv},
			{"no lines", "POST", "/v1/inbound", ops, map[string]any{"supplier_ref": "PO", "expected_on": tomorrow, "lines": []map[string]any{}}, 422, inv},
			{"quantity 0", "POST", "/v1/inbound", ops, map[string]any{"supplier_ref": "PO", "expected_on": tomorrow, "lines": []map[string]any{{"sku": "A1", "quantity": 0}}}, 422, inv},
			{"no such pool", "POST", "/v1/inbound", ops, map[string]any{"supplier_ref": "PO", "expected_on": tomorrow, "lines": []map[string]any{{"sku": "A1", "pool": "c9", "quantity": 1}}}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/inbound", ops, map[string]any{"supplier_ref": "PO", "location": "west", "expected_on": tomorrow, "lines": []map[string]any{{"sku": "A1", "quantity": 1}}}, 422, "unknown_location"},
			{"units with an identity", "POST", "/v1/inbound", ops, map[string]any{"supplier_ref": "PO", "expected_on": tomorrow, "lines": []map[string]any{{"sku": "SEATS", "quantity": 1}}}, 409, "serialized_pool"},
		},
		"GET /v1/inbound": {
			{"no such status", "GET", "/v1/inbound?status=lost", ops, nil, 422, inv},
		},
		"GET /v1/inbound/:id": {
			{"not an id", "GET", "/v1/inbound/x", ops, nil, bad, inv},
			{"no such notice", "GET", "/v1/inbound/" + missing, ops, nil, 404, "not_found"},
		},
		"POST /v1/inbound/:id/receive": {
			{"not an id", "POST", "/v1/inbound/x/receive", ops, map[string]any{"sku": "A1", "quantity": 1}, bad, inv},
			{"malformed", "POST", "/v1/inbound/" + in1 + "/receive", ops, malformed, bad, inv},
			{"quantity 0", "POST", "/v1/inbound/" + in1 + "/receive", ops, map[string]any{"sku": "A1", "quantity": 0}, 422, inv},
			{"no such line", "POST", "/v1/inbound/" + in1 + "/receive", ops, map[string]any{"sku": "B9", "quantity": 1}, 422, inv},
			{"more than ordered", "POST", "/v1/inbound/" + in1 + "/receive", ops, map[string]any{"sku": "A1", "quantity": 4}, 409, "insufficient_incoming"},
			{"no such notice", "POST", "/v1/inbound/" + missing + "/receive", ops, map[string]any{"sku": "A1", "quantity": 1}, 404, "not_found"},
		},
		"POST /v1/inbound/:id/close": {
			{"not an id", "POST", "/v1/inbound/x/close", ops, map[string]any{"reason": "r"}, bad, inv},
			{"malformed", "POST", "/v1/inbound/" + in1 + "/close", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/inbound/" + in1 + "/close", ops, map[string]any{}, 422, inv},
			{"no such notice", "POST", "/v1/inbound/" + missing + "/close", ops, map[string]any{"reason": "r"}, 404, "not_found"},
		},
		"POST /v1/inbound/:id/cancel": {
			{"not an id", "POST", "/v1/inbound/x/cancel", ops, map[string]any{"reason": "r"}, bad, inv},
			{"malformed", "POST", "/v1/inbound/" + in1 + "/cancel", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/inbound/" + in1 + "/cancel", ops, map[string]any{}, 422, inv},
			{"no such notice", "POST", "/v1/inbound/" + missing + "/cancel", ops, map[string]any{"reason": "r"}, 404, "not_found"},
		},
		"GET /v1/transfers": {
			{"no such status", "GET", "/v1/transfers?status=lost", ops, nil, 422, inv},
		},
		"GET /v1/transfers/:id": {
			{"not an id", "GET", "/v1/transfers/x", ops, nil, bad, inv},
			{"no such transfer", "GET", "/v1/transfers/" + missing, ops, nil, 404, "not_found"},
		},
		"POST /v1/transfers/:id/receive": {
			{"not an id", "POST", "/v1/transfers/x/receive", ops, map[string]any{"quantity": 1}, bad, inv},
			{"malformed", "POST", "/v1/transfers/" + tr1 + "/receive", ops, malformed, bad, inv},
			{"quantity 0", "POST", "/v1/transfers/" + tr1 + "/receive", ops, map[string]any{"quantity": 0}, 422, inv},
			{"no such transfer", "POST", "/v1/transfers/" + missing + "/receive", ops, map[string]any{"quantity": 1}, 404, "not_found"},
		},
		"POST /v1/transfers/:id/close": {
			{"not an id", "POST", "/v1/transfers/x/close", ops, map[string]any{"reason": "r"}, bad, inv},
			{"malformed", "POST", "/v1/transfers/" + tr1 + "/close", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/transfers/" + tr1 + "/close", ops, map[string]any{}, 422, inv},
			{"no such transfer", "POST", "/v1/transfers/" + missing + "/close", ops, map[string]any{"reason": "r"}, 404, "not_found"},
		},
		"POST /v1/transfers/:id/cancel": {
			{"not an id", "POST", "/v1/transfers/x/cancel", ops, map[string]any{"reason": "r"}, bad, inv},
			{"malformed", "POST", "/v1/transfers/" + tr1 + "/cancel", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/transfers/" + tr1 + "/cancel", ops, map[string]any{}, 422, inv},
			{"no such transfer", "POST", "/v1/transfers/" + missing + "/cancel", ops, map[string]any{"reason": "r"}, 404, "not_found"},
		},
		"GET /v1/skus": {
			{"not a boolean", "GET", "/v1/skus?low_stock=maybe", shop, nil, bad, inv},
			{"not a time", "GET", "/v1/skus?updated_since=soon", shop, nil, bad, inv},
			{"a batch with a cursor", "GET", "/v1/skus?sku=A1&cursor=A1", shop, nil, bad, inv},
			{"name too long", "GET", "/v1/skus?sku=" + strings.Repeat("S", 65), shop, nil, 422, inv},
			{"101 SKUs", "GET", "/v1/skus?sku=A" + strings.Repeat("&sku=A", 100), shop, nil, 422, inv},
			{"no such location", "GET", "/v1/skus?location=west", shop, nil, 422, "unknown_location"},
			{"location twice", "GET", "/v1/skus?location=east&location=east", shop, nil, bad, inv},
		},
		"GET /v1/skus/:sku": {
			{"name too long", "GET", "/v1/skus/" + strings.Repeat("S", 65), shop, nil, 422, inv},
			{"no such SKU", "GET", "/v1/skus/NOPE", shop, nil, 404, "unknown_sku"},
		},
		"GET /v1/skus/:sku/pickup": {
			{"name too long", "GET", "/v1/skus/" + strings.Repeat("S", 65) + "/pickup", shop, nil, 422, inv},
			{"no such SKU", "GET", "/v1/skus/NOPE/pickup", shop, nil, 404, "unknown_sku"},
		},
		"POST /v1/skus/:sku/pause": {
			{"malformed", "POST", "/v1/skus/A1/pause", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/skus/A1/pause", ops, map[string]any{}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/pause", ops, map[string]any{"reason": "r"}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/A1/pause", ops, map[string]any{"pool": "c9", "reason": "r"}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/skus/A1/pause", ops, map[string]any{"location": "west", "reason": "r"}, 422, "unknown_location"},
		},
		"POST /v1/skus/:sku/resume": {
			{"malformed", "POST", "/v1/skus/A1/resume", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/skus/A1/resume", ops, map[string]any{}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/resume", ops, map[string]any{"reason": "r"}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/A1/resume", ops, map[string]any{"pool": "c9", "reason": "r"}, 422, "unknown_pool"},
		},
		"POST /v1/skus/:sku/repair": {
			{"malformed", "POST", "/v1/skus/A1/repair", ops, malformed, bad, inv},
			{"no such direction", "POST", "/v1/skus/A1/repair", ops, map[string]any{"to": "somewhere", "reason": "r"}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/repair", ops, map[string]any{"to": "ledger", "reason": "r", "dry_run": true}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/A1/repair", ops, map[string]any{"pool": "c9", "to": "ledger", "reason": "r", "dry_run": true}, 422, "unknown_pool"},
		},
		"GET /v1/skus/:sku/ledger": {
			{"no such SKU", "GET", "/v1/skus/NOPE/ledger", ops, nil, 404, "unknown_sku"},
		},
		"GET /v1/stop-sale": {}, // takes nothing that can be wrong
		"PUT /v1/stop-sale": {
			{"malformed", "PUT", "/v1/stop-sale", ops, malformed, bad, inv},
			{"active missing", "PUT", "/v1/stop-sale", ops, map[string]any{"reason": "r"}, 422, inv},
		},
		"PUT /v1/skus/:sku/threshold": {
			{"malformed", "PUT", "/v1/skus/A1/threshold", ops, malformed, bad, inv},
			{"negative", "PUT", "/v1/skus/A1/threshold", ops, map[string]any{"threshold": -1}, 422, inv},
			{"no such SKU", "PUT", "/v1/skus/NOPE/threshold", ops, map[string]any{"threshold": 1}, 404, "unknown_sku"},
			{"no such pool", "PUT", "/v1/skus/A1/threshold", ops, map[string]any{"pool": "c9", "threshold": 1}, 422, "unknown_pool"},
			{"no such location", "PUT", "/v1/skus/A1/threshold", ops, map[string]any{"location": "west", "threshold": 1}, 422, "unknown_location"},
		},
		"PUT /v1/skus/:sku/limits": {
			{"malformed", "PUT", "/v1/skus/A1/limits", ops, malformed, bad, inv},
			{"no limit", "PUT", "/v1/skus/A1/limits", ops, map[string]any{}, 422, inv},
			{"zero", "PUT", "/v1/skus/A1/limits", ops, map[string]any{"max_per_order": 0}, 422, inv},
			{"step does not divide", "PUT", "/v1/skus/A1/limits", ops, map[string]any{"step": 6, "max_per_order": 10}, 422, inv},
			{"no such SKU", "PUT", "/v1/skus/NOPE/limits", ops, map[string]any{"step": 6}, 404, "unknown_sku"},
			{"no such pool", "PUT", "/v1/skus/A1/limits", ops, map[string]any{"pool": "c9", "step": 6}, 422, "unknown_pool"},
		},
		"GET /v1/skus/:sku/limits": {
			{"none set", "GET", "/v1/skus/A1/limits", shop, nil, 404, "not_found"},
		},
		"PUT /v1/bundles/:sku": {
			{"malformed", "PUT", "/v1/bundles/KIT", ops, malformed, bad, inv},
			{"no components", "PUT", "/v1/bundles/KIT", ops, map[string]any{"reason": "kit", "components": []any{}}, 422, inv},
			{"zero quantity", "PUT", "/v1/bundles/KIT", ops, map[string]any{"reason": "kit", "components": []any{map[string]any{"sku": "A1", "quantity": 0}}}, 422, inv},
			{"itself", "PUT", "/v1/bundles/KIT", ops, map[string]any{"reason": "kit", "components": []any{map[string]any{"sku": "KIT", "quantity": 1}}}, 422, inv},
			{"no such component", "PUT", "/v1/bundles/KIT", ops, map[string]any{"reason": "kit", "components": []any{map[string]any{"sku": "NOPE", "quantity": 1}}}, 422, "unknown_sku"},
		},
		"GET /v1/bundles/:sku": {
			{"not a bundle", "GET", "/v1/bundles/A1", shop, nil, 404, "not_found"},
		},
		"DELETE /v1/bundles/:sku": {
			{"not a bundle", "DELETE", "/v1/bundles/A1", ops, nil, 404, "not_found"},
		},
		"DELETE /v1/skus/:sku/limits": {
			{"none set", "DELETE", "/v1/skus/A1/limits", ops, nil, 404, "not_found"},
		},
		"PUT /v1/skus/:sku/backorders": {
			{"malformed", "PUT", "/v1/skus/A1/backorders", ops, malformed, bad, inv},
			{"allows nothing", "PUT", "/v1/skus/A1/backorders", ops, map[string]any{}, 422, inv},
			{"negative", "PUT", "/v1/skus/A1/backorders", ops, map[string]any{"below_zero": -1}, 422, inv},
			{"horizon past a year", "PUT", "/v1/skus/A1/backorders", ops, map[string]any{"horizon_days": 367}, 422, inv},
			{"no such SKU", "PUT", "/v1/skus/NOPE/backorders", ops, map[string]any{"below_zero": 1}, 404, "unknown_sku"},
			{"no such pool", "PUT", "/v1/skus/A1/backorders", ops, map[string]any{"pool": "c9", "below_zero": 1}, 422, "unknown_pool"},
		},
		"GET /v1/skus/:sku/backorders": {
			{"none set", "GET", "/v1/skus/A1/backorders", shop, nil, 404, "not_found"},
		},
		"DELETE /v1/skus/:sku/backorders": {
			{"none set", "DELETE", "/v1/skus/A1/backorders", ops, nil, 404, "not_found"},
		},
		"POST /v1/skus/:sku/units": {
			{"malformed", "POST", "/v1/skus/SEATS/units", ops, malformed, bad, inv},
			{"no units", "POST", "/v1/skus/SEATS/units", ops, map[string]any{"reason": "r", "units": []any{}}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/units", ops, map[string]any{"pool": "c9", "reason": "r", "units": []map[string]any{{"id": "X"}}}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/SEATS/units", ops, map[string]any{"pool": "c9", "reason": "r", "units": []map[string]any{{"id": "X"}}}, 422, "unknown_pool"},
		},
		"POST /v1/skus/:sku/units/retire": {
			{"malformed", "POST", "/v1/skus/SEATS/units/retire", ops, malformed, bad, inv},
			{"no units", "POST", "/v1/skus/SEATS/units/retire", ops, map[string]any{"reason": "r", "units": []any{}}, 422, inv},
			{"no such SKU", "POST", "/v1/skus/NOPE/units/retire", ops, map[string]any{"reason": "r", "units": []string{"X"}}, 404, "unknown_sku"},
			{"no such pool", "POST", "/v1/skus/SEATS/units/retire", ops, map[string]any{"pool": "c9", "reason": "r", "units": []string{"S-1"}}, 422, "unknown_pool"},
		},
		"GET /v1/skus/:sku/units": {
			{"no such SKU", "GET", "/v1/skus/NOPE/units", shop, nil, 404, "unknown_sku"},
			{"no such status", "GET", "/v1/skus/SEATS/units?status=lost", shop, nil, 422, inv},
		},
		"POST /v1/stock/adjustments": {
			{"malformed", "POST", "/v1/stock/adjustments", ops, malformed, bad, inv},
			{"no lines", "POST", "/v1/stock/adjustments", ops, map[string]any{"reason": "r", "lines": []any{}}, 422, inv},
			{"no such SKU", "POST", "/v1/stock/adjustments", ops, map[string]any{"reason": "r", "lines": []any{map[string]any{"sku": "NOPE", "delta": -1}}}, 422, "unknown_sku"},
			{"no such pool", "POST", "/v1/stock/adjustments", ops, map[string]any{"reason": "r", "lines": []any{map[string]any{"sku": "A1", "pool": "c9", "delta": 1}}}, 422, "unknown_pool"},
			{"no such location", "POST", "/v1/stock/adjustments", ops, map[string]any{"reason": "r", "lines": []any{map[string]any{"sku": "A1", "location": "west", "delta": 1}}}, 422, "unknown_location"},
		},
		"POST /v1/reservations": {
			{"malformed", "POST", "/v1/reservations", shop, malformed, bad, inv},
			{"quantity 0", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("A1", 0)}}, 422, inv},
			{"no such strategy", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("A1", 1)}, "strategy": "cheapest"}, 422, inv},
			{"nearest without ship_to", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("A1", 1)}, "strategy": "nearest"}, 422, inv},
			{"ship_to out of range", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("A1", 1)}, "strategy": "nearest",
				"ship_to": map[string]any{"latitude": 100, "longitude": 0}}, 422, inv},
			{"ship_to without longitude", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("A1", 1)}, "strategy": "nearest",
				"ship_to": map[string]any{"latitude": 10}}, 422, inv},
			{"no such SKU", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("NOPE", 1)}}, 422, "unknown_sku"},
			{"no such campaign", "POST", "/v1/reservations", shop, map[string]any{"items": []any{line("A1", 1)}, "campaign": "c9"}, 422, "unknown_campaign"},
			{"no such location", "POST", "/v1/reservations", shop, map[string]any{"items": []any{map[string]any{"sku": "A1", "quantity": 1, "location": "west"}}}, 422, "unknown_location"},
		},
		"GET /v1/reservations": {
			{"no such status", "GET", "/v1/reservations?status=lost", shop, nil, 422, inv},
			{"bad time", "GET", "/v1/reservations?expires_before=soon", shop, nil, bad, inv},
		},
		"GET /v1/reservations/:id": {
			{"not an id", "GET", "/v1/reservations/x", shop, nil, bad, inv},
			{"no such hold", "GET", "/v1/reservations/" + missing, shop, nil, 404, "not_found"},
		},
		"POST /v1/reservations/:id/confirm": {
			{"not an id", "POST", "/v1/reservations/x/confirm", shop, nil, bad, inv},
			{"malformed", "POST", "/v1/reservations/" + h1 + "/confirm", shop, malformed, bad, inv},
			{"no such hold", "POST", "/v1/reservations/" + missing + "/confirm", shop, nil, 404, "not_found"},
		},
		"POST /v1/reservations/:id/release": {
			{"not an id", "POST", "/v1/reservations/x/release", shop, nil, bad, inv},
			{"malformed", "POST", "/v1/reservations/" + h1 + "/release", shop, malformed, bad, inv},
			{"quantity 0", "POST", "/v1/reservations/" + h1 + "/release", shop, map[string]any{"items": []any{line("A1", 0)}}, 422, inv},
			{"no such hold", "POST", "/v1/reservations/" + missing + "/release", shop, nil, 404, "not_found"},
		},
		"POST /v1/reservations/:id/extend": {
			{"not an id", "POST", "/v1/reservations/x/extend", shop, map[string]any{"ttl_seconds": 60}, bad, inv},
			{"malformed", "POST", "/v1/reservations/" + h1 + "/extend", shop, malformed, bad, inv},
			{"ttl 0", "POST", "/v1/reservations/" + h1 + "/extend", shop, map[string]any{"ttl_seconds": 0}, 422, inv},
			{"no such hold", "POST", "/v1/reservations/" + missing + "/extend", shop, map[string]any{"ttl_seconds": 60}, 404, "not_found"},
		},
		"POST /v1/reservations/:id/reinstate": {
			{"not an id", "POST", "/v1/reservations/x/reinstate", shop, nil, bad, inv},
			{"malformed", "POST", "/v1/reservations/" + h1 + "/reinstate", shop, malformed, bad, inv},
			{"no such hold", "POST", "/v1/reservations/" + missing + "/reinstate", shop, nil, 404, "not_found"},
		},
		"GET /v1/events": {},
		"POST /v1/webhooks": {
			{"malformed", "POST", "/v1/webhooks", ops, malformed, bad, inv},
			{"not a URL", "POST", "/v1/webhooks", ops, map[string]any{"url": "nowhere", "events": []string{"*"}}, 422, inv},
		},
		"GET /v1/webhooks": {},
		"GET /v1/webhooks/:id": {
			{"not an id", "GET", "/v1/webhooks/x", ops, nil, bad, inv},
			{"no such webhook", "GET", "/v1/webhooks/999999", ops, nil, 404, "not_found"},
		},
		"DELETE /v1/webhooks/:id": {
			{"not an id", "DELETE", "/v1/webhooks/x", ops, nil, bad, inv},
			{"no such webhook", "DELETE", "/v1/webhooks/999999", ops, nil, 404, "not_found"},
		},
		"POST /v1/campaigns": {
			{"malformed", "POST", "/v1/campaigns", ops, malformed, bad, inv},
			{"no id", "POST", "/v1/campaigns", ops, map[string]any{"allotments": []any{}}, 422, inv},
		},
		"GET /v1/campaigns/:id": {
			{"name too long", "GET", "/v1/campaigns/" + strings.Repeat("c", 65), ops, nil, 422, inv},
			{"no such campaign", "GET", "/v1/campaigns/c9", ops, nil, 404, "unknown_campaign"},
		},
		"POST /v1/campaigns/:id/end": {
			{"malformed", "POST", "/v1/campaigns/c9/end", ops, malformed, bad, inv},
			{"no such campaign", "POST", "/v1/campaigns/c9/end", ops, map[string]any{"reason": "r"}, 404, "unknown_campaign"},
		},
		"POST /v1/campaigns/:id/pause": {
			{"malformed", "POST", "/v1/campaigns/c9/pause", ops, malformed, bad, inv},
			{"no such campaign", "POST", "/v1/campaigns/c9/pause", ops, map[string]any{"reason": "r"}, 404, "unknown_campaign"},
		},
		"POST /v1/campaigns/:id/resume": {
			{"malformed", "POST", "/v1/campaigns/c9/resume", ops, malformed, bad, inv},
			{"no such campaign", "POST", "/v1/campaigns/c9/resume", ops, map[string]any{"reason": "r"}, 404, "unknown_campaign"},
		},
		"POST /v1/rollbacks": {
			{"malformed", "POST", "/v1/rollbacks", ops, malformed, bad, inv},
			{"no reason", "POST", "/v1/rollbacks", ops, map[string]any{"operator": "o", "sku": "A1"}, 422, inv},
		},
		"GET /v1/rollbacks/:id": {
			{"not an id", "GET", "/v1/rollbacks/x", ops, nil, bad, inv},
			{"no such rollback", "GET", "/v1/rollbacks/999999", ops, nil, 404, "not_found"},
		},
		"POST /v1/rollbacks/:id/resume": {
			{"not an id", "POST", "/v1/rollbacks/x/resume", ops, nil, bad, inv},
			{"malformed", "POST", "/v1/rollbacks/1/resume", ops, malformed, bad, inv},
			{"no such rollback", "POST", "/v1/rollbacks/999999/resume", ops, nil, 404, "not_found"},
		},
		"GET /v1/alerts": {
			{"no such status", "GET", "/v1/alerts?status=lost", ops, nil, 422, inv},
		},
		"POST /v1/alerts/:id/ack": {
			{"not an id", "POST", "/v1/alerts/x/ack", ops, nil, bad, inv},
			{"no such alert", "POST", "/v1/alerts/999999/ack", ops, nil, 404, "not_found"},
		},
		"POST /v1/alerts/:id/take": {
			{"not an id", "POST", "/v1/alerts/x/take", ops, nil, bad, inv},
			{"no such alert", "POST", "/v1/alerts/999999/take", ops, nil, 404, "not_found"},
		},
		"GET /v1/stats": {
			{"not a duration", "GET", "/v1/stats?window=soon", ops, nil, bad, inv},
			{"window too short", "GET", "/v1/stats?window=1ns", ops, nil, 422, inv},
		},
		"POST /v1/reconciliations": {
			{"malformed", "POST", "/v1/reconciliations", ops, malformed, bad, inv},
			{"no SKUs", "POST", "/v1/reconciliations", ops, map[string]any{"skus": []string{}}, 422, inv},
		},
		"GET /v1/reports/daily": {
			{"no date", "GET", "/v1/reports/daily", ops, nil, bad, inv},
			{"not a date", "GET", "/v1/reports/daily?date=2026-12-32", ops, nil, bad, inv},
			{"not a cursor", "GET", "/v1/reports/daily?date=" + today + "&cursor=x", ops, nil, bad, inv},
			{"limit 0", "GET", "/v1/reports/daily?date=" + today + "&limit=0", ops, nil, 422, inv},
			{"no such zone", "GET", "/v1/reports/daily?date=" + today + "&tz=Mars%2FOlympus", ops, nil, 422, inv},
			{"ends in the year 10000", "GET", "/v1/reports/daily?date=9999-12-31", ops, nil, 422, inv},
		},
		"GET /v1/reconciliations/latest": {}, // takes nothing that can be wrong
		"GET /v1/reconciliations/:id": {
			{"not an id", "GET", "/v1/reconciliations/x", ops, nil, bad, inv},
			{"no such run", "GET", "/v1/reconciliations/999999", ops, nil, 404, "not_found"},
		},
	}
	lists := map[string]list{
		"GET /v1/skus/:sku/ledger": {path: "/v1/skus/A1/ledger", token: ops, field: "movements", max: 1000, badCursor: "x",
			deprecated: "before_id", deprecatedNext: "next_before_id"},
		"GET /v1/skus/:sku/units": {path: "/v1/skus/SEATS/units", token: shop, field: "units", max: 1000, badCursor: "%01",
			deprecated: "after", deprecatedNext: "next_after"},
		"GET /v1/skus":          {path: "/v1/skus", token: shop, field: "skus", max: 1000, badCursor: "%01"},
		"GET /v1/reservations":  {path: "/v1/reservations", token: shop, field: "reservations", max: 1000, badCursor: "x"},
		"GET /v1/events":        {path: "/v1/events", token: ops, field: "events", max: 1000, badCursor: "latest", deprecated: "after", deprecatedNext: "next", feed: true},
		"GET /v1/webhooks":      {path: "/v1/webhooks", token: ops, field: "webhooks", max: 1000, badCursor: "x"},
		"GET /v1/alerts":        {path: "/v1/alerts", token: ops, field: "alerts", max: 500, badCursor: "x"},
		"GET /v1/reports/daily": {path: "/v1/reports/daily?date=" + today, token: ops, field: "pools", max: 1000, badCursor: "x"},
		"GET /v1/locations":     {path: "/v1/locations", token: ops, field: "locations", max: 1000, badCursor: "%01"},
		"GET /v1/transfers":     {path: "/v1/transfers", token: ops, field: "transfers", max: 1000, badCursor: "x"},
		"GET /v1/inbound":       {path: "/v1/inbound", token: ops, field: "inbound", max: 1000, badCursor: "x"},
	}

	// Every route has its entry (the unauthenticated pages and River's
	// dashboard aside: they take no input that can be wrong).
	for _, r := range api.New(api.Deps{JobsUI: http.NotFoundHandler(), Console: http.NotFoundHandler()}).Routes() {
		if strings.HasPrefix(r.Method, "echo_") || !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		key := r.Method + " " + r.Path
		if _, ok := routes[key]; !ok {
			t.Errorf("route %s has no entry in TestErrorConvention's table: add the requests it must refuse", key)
		}
	}

	token := map[string]string{ops: e.ops, shop: e.shop}
	before := e.counts()
	for route, checks := range routes {
		for i, c := range checks {
			t.Run(route+"/"+c.name, func(t *testing.T) {
				var headers []string
				if c.method == "POST" {
					headers = []string{"Idempotency-Key", fmt.Sprintf("conv-%s-%d", route, i)}
				}
				r := e.do(c.method, c.path, token[c.token], c.body, headers...)
				requireProblem(t, r, c.status, c.code)
				require.True(t, strings.HasSuffix(string(r.body), "}\n"), "a problem ends in a newline as every answer does: %q", r.body)
			})
		}
	}
	require.Equal(t, before, e.counts(), "a refused request changes nothing")

	for route, l := range lists {
		t.Run(route, func(t *testing.T) {
			tok := token[l.token]
			sep := "?"
			if strings.Contains(l.path, "?") {
				sep = "&"
			}
			get := func(query string) resp { return e.do("GET", l.path+sep+query, tok, nil) }
			// Pages of one, to the end, each item once.
			var seen []string
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 50, "the pages never end")
				r := get("limit=1&cursor=" + url.QueryEscape(cursor))
				require.Equal(t, 200, r.status, "%s", r.body)
				page := r.json(t)
				next, ok := page["next_cursor"]
				require.True(t, ok, "next_cursor is always in the answer: %s", r.body)
				items := page[l.field].([]any)
				for _, it := range items {
					seen = append(seen, fmt.Sprint(it))
				}
				if next == nil {
					break
				}
				require.Len(t, items, 1, "a page before the last is full")
				cursor = next.(string)
				if l.deprecated != "" {
					old := get("limit=1&" + l.deprecated + "=" + url.QueryEscape(cursor)).json(t)
					require.Equal(t, fmt.Sprint(get("limit=1&cursor=" + url.QueryEscape(cursor)).json(t)[l.field]), fmt.Sprint(old[l.field]),
						"the deprecated %s pages as cursor does", l.deprecated)
					require.Contains(t, old, l.deprecatedNext)
				}
			}
			require.GreaterOrEqual(t, len(seen), 2, "the list has two items or more, so paging was walked")
			all := get("limit=" + fmt.Sprint(l.max)).json(t)
			require.Len(t, all[l.field], len(seen), "pages of one hold what one page holds")
			if !l.feed {
				require.Nil(t, all["next_cursor"], "a page with everything is the last")
			}

			requireProblem(t, get("limit=0"), 422, inv)
			requireProblem(t, get(fmt.Sprint("limit=", l.max+1)), 422, inv)
			requireProblem(t, get("limit=x"), bad, inv)
			requireProblem(t, get("limit=1&limit=2"), bad, inv)
			requireProblem(t, get("cursor="+l.badCursor), bad, inv)
			if l.deprecated != "" {
				requireProblem(t, get(l.deprecated+"="+l.badCursor), bad, inv)
			}
		})
	}
}
