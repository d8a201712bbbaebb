package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLimitsOverHTTP sets a SKU's limits, reads them back, holds over and
// within them (the problem names the limit, what it allows and, per
// customer, what the customer holds already), and removes them; a
// campaign's max_per_customer caps one customer's holds of its SKUs.
func TestLimitsOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	e.stockIn("TEA", 100)
	e.stockIn("FLASH", 100)

	r := e.do("PUT", "/v1/skus/TEA/limits", e.ops, map[string]any{"step": 6, "max_per_order": 12, "max_per_customer": 12})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := e.do("GET", "/v1/skus/TEA/limits", e.shop, nil)
	require.Equal(t, 200, got.status, "%s", got.body)
	require.EqualValues(t, 6, got.json(t)["step"])
	require.Nil(t, got.json(t)["min_per_order"])

	hold := func(key, customer string, body map[string]any) resp {
		if customer != "" {
			body["customer_ref"] = customer
		}
		return e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", key)
	}
	before := e.counts()
	p := requireProblem(t, hold("seven", "", map[string]any{"items": []any{line("TEA", 7)}}), 422, "limit_exceeded")
	require.Equal(t, "step", p["limit"])
	require.EqualValues(t, 6, p["allowed"])
	require.Equal(t, "TEA", p["sku"])
	p = requireProblem(t, hold("many", "", map[string]any{"items": []any{line("TEA", 18)}}), 422, "limit_exceeded")
	require.Equal(t, "max_per_order", p["limit"])
	require.Equal(t, before, e.counts(), "nothing held, nothing recorded")

	ok := hold("first", "dana", map[string]any{"items": []any{line("TEA", 6)}})
	require.Equal(t, 201, ok.status, "%s", ok.body)
	require.Equal(t, "dana", ok.json(t)["customer_ref"])
	require.Equal(t, 201, hold("second", "dana", map[string]any{"items": []any{line("TEA", 6)}}).status)
	p = requireProblem(t, hold("third", "dana", map[string]any{"items": []any{line("TEA", 6)}}), 422, "limit_exceeded")
	require.Equal(t, "max_per_customer", p["limit"])
	require.EqualValues(t, 12, p["allowed"])
	require.EqualValues(t, 12, p["held"])
	requireProblem(t, hold("bad-customer", "\x01", map[string]any{"items": []any{line("TEA", 6)}}), 422, "invalid_request")

	require.Equal(t, 204, e.do("DELETE", "/v1/skus/TEA/limits", e.ops, nil).status)
	requireProblem(t, e.do("GET", "/v1/skus/TEA/limits", e.shop, nil), 404, "not_found")
	require.Equal(t, 201, hold("free", "dana", map[string]any{"items": []any{line("TEA", 7)}}).status)

	camp := map[string]any{"id": "drop", "starts_at": time.Now().UTC().Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_seconds": 120, "max_per_customer": 2, "customer_window_seconds": 3600, "allotments": []any{map[string]any{"sku": "FLASH", "quantity": 50}}}
	r = e.do("POST", "/v1/campaigns", e.ops, camp, "Idempotency-Key", "drop")
	require.Equal(t, 201, r.status, "%s", r.body)
	require.EqualValues(t, 2, r.json(t)["max_per_customer"])
	require.NoError(t, e.camps.Start(ctx, "drop"))
	require.Equal(t, 201, hold("c1", "erin", map[string]any{"campaign": "drop", "items": []any{line("FLASH", 2)}}).status)
	p = requireProblem(t, hold("c2", "erin", map[string]any{"campaign": "drop", "items": []any{line("FLASH", 1)}}), 422, "limit_exceeded")
	require.Equal(t, "max_per_customer", p["limit"])
	require.Equal(t, "drop", p["pool"])
	require.Equal(t, 201, hold("c3", "frank", map[string]any{"campaign": "drop", "items": []any{line("FLASH", 2)}}).status)

	camp["id"], camp["max_per_customer"] = "no-cap", nil
	requireProblem(t, e.do("POST", "/v1/campaigns", e.ops, camp, "Idempotency-Key", "no-cap"), 422, "invalid_request")
}

// TestPartialHoldOverHTTP: a partial line answers the quantity it got;
// bad partial lines are 422 and change nothing.
func TestPartialHoldOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("MUG", 3)
	hold := func(key string, items ...any) resp {
		return e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": items}, "Idempotency-Key", key)
	}
	before := e.counts()
	requireProblem(t, hold("bad", map[string]any{"sku": "MUG", "quantity": 2, "partial": true, "min_quantity": 3}), 422, "invalid_request")
	requireProblem(t, hold("bad2", map[string]any{"sku": "MUG", "quantity": 2, "min_quantity": 1}), 422, "invalid_request")
	require.Equal(t, before, e.counts())
	r := hold("some", map[string]any{"sku": "MUG", "quantity": 5, "partial": true, "min_quantity": 2})
	require.Equal(t, 201, r.status, "%s", r.body)
	require.EqualValues(t, 3, r.json(t)["items"].([]any)[0].(map[string]any)["quantity"])
	again := hold("some", map[string]any{"sku": "MUG", "quantity": 5, "partial": true, "min_quantity": 2})
	require.Equal(t, 201, again.status, "a replay answers the first answer")
	require.EqualValues(t, 3, again.json(t)["items"].([]any)[0].(map[string]any)["quantity"])
	requireProblem(t, hold("none", map[string]any{"sku": "MUG", "quantity": 5, "partial": true}), 409, "out_of_stock")
}
