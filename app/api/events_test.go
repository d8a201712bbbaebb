package api_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/events/eventstest"
)

func TestEventsOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	id := e.hold("k1", line("A1", 2)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil).status)
	eventstest.WaitServed(t, e.pool)

	// One at a time, from the start, until an empty page: the feed's end
	// for now, with next_cursor null (and the deprecated next the cursor
	// given).
	var types []string
	cursor := ""
	for {
		page := e.do("GET", "/v1/events?limit=1&cursor="+cursor, e.ops, nil)
		require.Equal(t, 200, page.status, "%s", page.body)
		got := page.json(t)
		evs := got["events"].([]any)
		if len(evs) == 0 {
			require.Nil(t, got["next_cursor"], "an empty page is the end for now")
			require.Equal(t, cursor, got["next"], "the deprecated next says where to read from again")
			break
		}
		ev := evs[0].(map[string]any)
		require.Equal(t, ev["id"], got["next_cursor"])
		require.Equal(t, ev["id"], got["next"])
		types = append(types, ev["type"].(string)+" "+ev["sku"].(string))
		cursor = got["next_cursor"].(string)
	}
	require.Equal(t, []string{"stock.changed A1", "hold.created A1", "stock.changed A1", "hold.confirmed A1", "stock.changed A1"}, types)

	whole := e.do("GET", "/v1/events?limit=1000", e.ops, nil).json(t)
	evs := whole["events"].([]any)
	require.Len(t, evs, 5)
	last := evs[4].(map[string]any)
	require.Equal(t, map[string]any{"total": float64(10), "available": float64(8), "reserved": float64(0), "sold": float64(2),
		"quality_control": float64(0), "damaged": float64(0), "safety_stock": float64(0), "incoming": float64(0),
		"delta": map[string]any{"total": float64(0), "available": float64(0), "reserved": float64(-2), "sold": float64(2),
			"quality_control": float64(0), "damaged": float64(0), "safety_stock": float64(0), "incoming": float64(0)},
		"version": float64(3)}, last["data"])
	created := evs[1].(map[string]any)
	require.Equal(t, id, created["reservation_id"])
	require.Equal(t, "o-k1", created["data"].(map[string]any)["order_ref"])

	requireProblem(t, e.do("GET", "/v1/events", e.shop, nil), 403, "forbidden")
	requireProblem(t, e.do("GET", "/v1/events?after=latest", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/events?limit=0", e.ops, nil), 422, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/events?limit=x", e.ops, nil), 400, "invalid_request")
}

func TestThresholdOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	r := e.do("PUT", "/v1/skus/A1/threshold", e.ops, map[string]any{"threshold": 3})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.EqualValues(t, 3, r.json(t)["pools"].([]any)[0].(map[string]any)["low_threshold"])
	got := e.do("GET", "/v1/skus/A1", e.shop, nil).json(t)
	require.EqualValues(t, 3, got["pools"].([]any)[0].(map[string]any)["low_threshold"])
	r = e.do("PUT", "/v1/skus/A1/threshold", e.ops, map[string]any{"pool": "main", "threshold": nil})
	require.Equal(t, 200, r.status)
	require.Nil(t, r.json(t)["pools"].([]any)[0].(map[string]any)["low_threshold"], "null removes it")

	before := e.counts()
	requireProblem(t, e.do("PUT", "/v1/skus/A1/threshold", e.ops, map[string]any{}), 422, "invalid_request")
	requireProblem(t, e.do("PUT", "/v1/skus/A1/threshold", e.ops, map[string]any{"threshold": -1}), 422, "invalid_request")
	requireProblem(t, e.do("PUT", "/v1/skus/A1/threshold", e.ops, `{"threshold": "3"}`), 400, "invalid_request")
	requireProblem(t, e.do("PUT", "/v1/skus/A1/threshold", e.ops, `{"threshold": 2.5}`), 400, "invalid_request")
	requireProblem(t, e.do("PUT", "/v1/skus/A1/threshold", e.ops, map[string]any{"pool": "bf", "threshold": 1}), 422, "unknown_pool")
	requireProblem(t, e.do("PUT", "/v1/skus/NOPE/threshold", e.ops, map[string]any{"threshold": 1}), 404, "unknown_sku")
	requireProblem(t, e.do("PUT", "/v1/skus/A1/threshold", e.shop, map[string]any{"threshold": 1}), 403, "forbidden")
	require.Equal(t, before, e.counts())
}

func TestWebhooksOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	before := e.counts()
	for _, url := range []string{"http://127.0.0.1:9/hook", "http://localhost/hook", "http://169.254.169.254/", "http://[::1]/", "ftp://93.184.216.34/"} {
		p := requireProblem(t, e.do("POST", "/v1/webhooks", e.ops, map[string]any{"url": url, "events": []string{"*"}}, "Idempotency-Key", "w-"+url), 422, "invalid_request")
		require.Contains(t, p["detail"], "url")
	}
	requireProblem(t, e.do("POST", "/v1/webhooks", e.ops, map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"stock.nope"}}, "Idempotency-Key", "w-bad"), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/webhooks", e.ops, map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"*"}}), 400, "idempotency_key_missing")
	requireProblem(t, e.do("POST", "/v1/webhooks", e.shop, map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"*"}}, "Idempotency-Key", "w-shop"), 403, "forbidden")
	require.Equal(t, before, e.counts(), "refusals register nothing")

	body := map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"hold.confirmed", "stock.low"}}
	r := e.do("POST", "/v1/webhooks", e.ops, body, "Idempotency-Key", "w-1")
	require.Equal(t, 201, r.status, "%s", r.body)
	made := r.json(t)
	secret := made["secret"].(string)
	require.NotEmpty(t, secret)
	again := e.do("POST", "/v1/webhooks", e.ops, body, "Idempotency-Key", "w-1")
	require.Equal(t, 201, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, secret, again.json(t)["secret"], "a replay is the same webhook")

	id := made["id"].(float64)
	path := "/v1/webhooks/" + strconv.FormatInt(int64(id), 10)
	got := e.do("GET", path, e.ops, nil)
	require.Equal(t, 200, got.status, "%s", got.body)
	require.NotContains(t, string(got.body), secret, "the secret is shown once")
	require.Equal(t, []any{"hold.confirmed", "stock.low"}, got.json(t)["events"])
	list := e.do("GET", "/v1/webhooks", e.ops, nil).json(t)["webhooks"].([]any)
	require.Len(t, list, 1)
	require.NotContains(t, string(e.do("GET", "/v1/webhooks", e.ops, nil).body), secret)

	require.Equal(t, 204, e.do("DELETE", path, e.ops, nil).status)
	requireProblem(t, e.do("GET", path, e.ops, nil), 404, "not_found")
	requireProblem(t, e.do("DELETE", path, e.ops, nil), 404, "not_found")
	requireProblem(t, e.do("GET", "/v1/webhooks/x", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("DELETE", "/v1/webhooks/0", e.ops, nil), 400, "invalid_request")
}
