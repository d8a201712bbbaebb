package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStopSaleForOneClient: stop-sale with "client" refuses the new holds
// of that key owner's keys only (503 stop_sale naming the client) while
// another client's go on, and the switch for everything still covers
// both; a client no key was ever named is 422 unknown_client; turning a
// switch off answers what it lifted; GET lists every client's switch.
func TestStopSaleForOneClient(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	other, err := createKey(e, "shop-b")
	require.NoError(t, err)
	holdBy := func(token, key string) resp {
		return e.do("POST", "/v1/reservations", token, map[string]any{"order_ref": "o-" + key, "items": []any{line("A1", 1)}}, "Idempotency-Key", key)
	}
	before := holdBy(other, "b-before")
	require.Equal(t, 201, before.status)

	p := requireProblem(t, e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": true, "reason": "x", "client": "nobody"}), 422, "unknown_client")
	require.Contains(t, p["detail"], `no API key was ever named "nobody"`)
	requireProblem(t, e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": true, "reason": "x", "client": "bad\u200bname"}), 422, "invalid_request")

	r := e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": true, "reason": "channel oversells", "client": "shop-b"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, "shop-b", got["client"])
	require.Equal(t, true, got["active"])
	require.Equal(t, "alice", got["actor"])
	require.Nil(t, got["lifted"])

	counts := e.counts()
	p = requireProblem(t, holdBy(other, "b-during"), 503, "stop_sale")
	require.Equal(t, "shop-b", p["client"])
	require.Contains(t, p["detail"], "sales to shop-b are stopped (channel oversells)")
	require.Equal(t, counts, e.counts(), "a refused hold leaves no trace")
	require.Equal(t, 201, holdBy(other, "b-before").status, "a replay answers the hold made before")
	require.Equal(t, 201, holdBy(e.shop, "a-during").status, "another client goes on")

	all := e.do("GET", "/v1/stop-sale", e.ops, nil).json(t)
	require.Equal(t, false, all["active"])
	clients := all["clients"].([]any)
	require.Len(t, clients, 1)
	require.Equal(t, "shop-b", clients[0].(map[string]any)["client"])
	require.Equal(t, true, clients[0].(map[string]any)["active"])

	// The switch for everything covers every client, whatever theirs.
	require.Equal(t, 200, e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": true, "reason": "payments down"}).status)
	requireProblem(t, holdBy(e.shop, "a-stopped"), 503, "stop_sale")
	r = e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": false, "reason": "payments back"})
	require.Equal(t, 200, r.status)
	lifted := r.json(t)["lifted"].(map[string]any)
	require.Equal(t, "payments down", lifted["reason"])
	require.Equal(t, true, lifted["active"])
	require.NotContains(t, lifted, "client")
	requireProblem(t, holdBy(other, "b-still"), 503, "stop_sale")

	r = e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": false, "reason": "fixed", "client": "shop-b"})
	require.Equal(t, 200, r.status)
	got = r.json(t)
	require.Equal(t, false, got["active"])
	lifted = got["lifted"].(map[string]any)
	require.Equal(t, "channel oversells", lifted["reason"])
	require.Equal(t, "shop-b", lifted["client"])
	require.Equal(t, 201, holdBy(other, "b-after").status)
	r = e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": false, "reason": "again", "client": "shop-b"})
	require.Nil(t, r.json(t)["lifted"], "turning off what is off lifts nothing")
}

// TestResumeShowsWhatItLifts: a resume answers the pause it lifted (who,
// with which key, why); resuming a pool on sale lifts nothing.
func TestResumeShowsWhatItLifts(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/pause", e.ops, map[string]any{"reason": "recount"}).status)
	requireProblem(t, e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{}), 422, "invalid_request")
	r := e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{"reason": "counted"})
	require.Equal(t, 200, r.status, "%s", r.body)
	lifted := r.json(t)["lifted"].(map[string]any)
	require.Equal(t, "alice", lifted["actor"])
	require.Equal(t, "alice", lifted["actor_key"])
	require.Equal(t, "recount", lifted["reason"])
	require.NotEmpty(t, lifted["at"])
	r = e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{"reason": "again"})
	require.Equal(t, 200, r.status)
	require.Nil(t, r.json(t)["lifted"])
}
