package api_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/events/eventstest"
)

// TestBundleThreshold: a bundle's low-stock threshold is set as any SKU's,
// at a location where its components are; its stock view shows it, the
// catalogue's low_stock keeps the bundle once it is at or below it, the
// feed has one stock.low of the bundle for the component hold that took it
// there, and deleting the bundle removes the threshold. A pool other than
// main, or a location where no component is, is refused and changes
// nothing.
func TestBundleThreshold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	twoWarehouses(e)
	e.stockIn("MUG", 10)
	def := e.do("PUT", "/v1/bundles/BOX", e.ops, map[string]any{"components": []any{line("MUG", 2)}, "reason": "gift box"})
	require.Equal(t, 200, def.status, "%s", def.body)

	requireProblem(t, e.do("PUT", "/v1/skus/BOX/threshold", e.ops, map[string]any{"pool": "c9", "threshold": 1}), 422, "unknown_pool")
	requireProblem(t, e.do("PUT", "/v1/skus/BOX/threshold", e.ops, map[string]any{"location": "paris", "threshold": 1}), 422, "unknown_pool")
	requireProblem(t, e.do("PUT", "/v1/skus/BOX/threshold", e.ops, map[string]any{"location": "west", "threshold": 1}), 422, "unknown_location")
	var rows int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM bundle_thresholds`).Scan(&rows))
	require.Zero(t, rows, "refusals change nothing")

	r := e.do("PUT", "/v1/skus/BOX/threshold", e.ops, map[string]any{"threshold": 2})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, []any{map[string]any{"location": "default", "available": float64(5), "low_threshold": float64(2)}},
		r.json(t)["bundle"].(map[string]any)["locations"])
	low := func() []any {
		r := e.do("GET", "/v1/skus?low_stock=true", e.shop, nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var skus []any
		for _, s := range r.json(t)["skus"].([]any) {
			skus = append(skus, s.(map[string]any)["sku"])
		}
		return skus
	}
	require.Empty(t, low())

	h := e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{line("MUG", 6)}}, "Idempotency-Key", "mugs")
	require.Equal(t, 201, h.status, "%s", h.body)
	require.Equal(t, []any{"BOX"}, low(), "2 boxes left, at the threshold")
	eventstest.WaitServed(t, e.pool)
	feed := e.do("GET", "/v1/events?limit=1000", e.ops, nil)
	require.Equal(t, 200, feed.status, "%s", feed.body)
	var lows []any
	for _, ev := range feed.json(t)["events"].([]any) {
		if m := ev.(map[string]any); m["type"] == "stock.low" {
			lows = append(lows, []any{m["sku"], m["location"], m["pool"], m["data"]})
		}
	}
	require.Equal(t, []any{[]any{"BOX", "default", "main",
		map[string]any{"threshold": float64(2), "available": float64(2), "version": float64(1), "component": "MUG"}}}, lows)

	r = e.do("PUT", "/v1/skus/BOX/threshold", e.ops, map[string]any{"threshold": nil})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Nil(t, r.json(t)["bundle"].(map[string]any)["locations"].([]any)[0].(map[string]any)["low_threshold"])
	require.Equal(t, 200, e.do("PUT", "/v1/skus/BOX/threshold", e.ops, map[string]any{"threshold": 1}).status)
	require.Equal(t, 204, e.do("DELETE", "/v1/bundles/BOX", e.ops, nil).status)
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM bundle_thresholds`).Scan(&rows))
	require.Zero(t, rows, "a deleted bundle's thresholds go with it")
	var watched int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM stock WHERE bundle_watch`).Scan(&watched))
	require.Zero(t, watched, "its components are not watched any more")
}
