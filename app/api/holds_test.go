package api_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func (e *env) ids(page map[string]any) []string {
	var out []string
	for _, r := range page["reservations"].([]any) {
		out = append(out, r.(map[string]any)["id"].(string))
	}
	return out
}

func TestListReservations(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 100)
	e.stockIn("B2", 100)
	other, err := createKey(e, "shop-b")
	require.NoError(t, err)
	var mine []string // newest first
	for i := range 5 {
		sku := "A1"
		if i%2 == 1 {
			sku = "B2"
		}
		r := e.do("POST", "/v1/reservations", e.shop, map[string]any{"order_ref": fmt.Sprint("o-", i%3), "items": []any{line(sku, 1)}},
			"Idempotency-Key", fmt.Sprint("k", i))
		require.Equal(t, 201, r.status, "%s", r.body)
		mine = append([]string{r.json(t)["id"].(string)}, mine...)
	}
	for i := range 2 {
		r := e.do("POST", "/v1/reservations", other, map[string]any{"order_ref": "o-0", "items": []any{line("A1", 1)}}, "Idempotency-Key", fmt.Sprint("b", i))
		require.Equal(t, 201, r.status)
	}
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+mine[0]+"/confirm", e.shop, nil).status)

	all := e.do("GET", "/v1/reservations", e.shop, nil)
	require.Equal(t, 200, all.status, "%s", all.body)
	require.Equal(t, mine, e.ids(all.json(t)), "a shop sees its own, newest first")
	require.Nil(t, all.json(t)["next_cursor"])

	// Pages of two, by cursor: every hold once, in order.
	var paged []string
	q := "/v1/reservations?limit=2"
	for {
		page := e.do("GET", q, e.shop, nil).json(t)
		paged = append(paged, e.ids(page)...)
		next, ok := page["next_cursor"].(string)
		if !ok {
			break
		}
		q = "/v1/reservations?limit=2&cursor=" + next
	}
	require.Equal(t, mine, paged)

	byRef := e.ids(e.do("GET", "/v1/reservations?order_ref=o-0", e.shop, nil).json(t))
	require.Equal(t, []string{mine[1], mine[4]}, byRef, "holds 3 and 0, not shop-b's")
	require.Len(t, e.ids(e.do("GET", "/v1/reservations?order_ref=o-0", e.ops, nil).json(t)), 4, "ops see every client's")
	require.Equal(t, []string{mine[0]}, e.ids(e.do("GET", "/v1/reservations?status=confirmed", e.shop, nil).json(t)))
	require.Equal(t, []string{mine[1], mine[3]}, e.ids(e.do("GET", "/v1/reservations?sku=B2", e.shop, nil).json(t)))
	require.Empty(t, e.ids(e.do("GET", "/v1/reservations?sku=B2&status=expired", e.shop, nil).json(t)))
	require.Len(t, e.ids(e.do("GET", "/v1/reservations", e.ops, nil).json(t)), 7)

	for _, bad := range []struct {
		query  string
		status int
	}{{"limit=0", 422}, {"limit=1001", 422}, {"limit=x", 400}, {"status=gone", 422}, {"cursor=nope", 400}, {"sku=%20A1", 422}} {
		p := requireProblem(t, e.do("GET", "/v1/reservations?"+bad.query, e.shop, nil), bad.status, "invalid_request")
		require.NotEmpty(t, p["detail"], bad.query)
	}
	requireProblem(t, e.do("GET", "/v1/reservations", "", nil), 401, "unauthorized")
}

func TestExtendOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	h := e.hold("k1", line("A1", 2)).json(t)
	id := h["id"].(string)
	before := time.Now()
	r := e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, map[string]any{"ttl_seconds": 3600})
	require.Equal(t, 200, r.status, "%s", r.body)
	at, err := time.Parse(time.RFC3339Nano, r.json(t)["expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, before.Add(time.Hour), at, 5*time.Second)

	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, map[string]any{}), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, map[string]any{"ttl_seconds": 604800}), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, `{"ttl_seconds": "60"}`), 400, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, nil), 400, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/reservations/not-a-uuid/extend", e.shop, map[string]any{"ttl_seconds": 60}), 400, "invalid_request")
	other, err := createKey(e, "shop-b")
	require.NoError(t, err)
	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", other, map[string]any{"ttl_seconds": 60}), 404, "not_found")

	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil).status)
	p := requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, map[string]any{"ttl_seconds": 60}), 409, "reservation_not_held")
	require.Equal(t, "confirmed", p["reservation_status"])
}

func TestPartialReleaseOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("B2", 10)
	id := e.hold("k1", line("A1", 3), line("B2", 1)).json(t)["id"].(string)
	path := "/v1/reservations/" + id + "/release"
	body := map[string]any{"reason": "one out of stock at the warehouse", "items": []any{line("A1", 1)}}

	r := e.do("POST", path, e.shop, body, "Idempotency-Key", "part-1")
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, "held", got["status"])
	require.Equal(t, []any{map[string]any{"sku": "A1", "pool": "main", "quantity": float64(2), "location": "default"}, map[string]any{"sku": "B2", "pool": "main", "quantity": float64(1), "location": "default"}}, got["items"])
	before := e.counts()
	again := e.do("POST", path, e.shop, body, "Idempotency-Key", "part-1")
	require.Equal(t, 200, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(r.body), string(again.body))
	require.Equal(t, before, e.counts(), "a replay releases nothing more")
	requireProblem(t, e.do("POST", path, e.shop, map[string]any{"items": []any{line("A1", 2)}}, "Idempotency-Key", "part-1"), 422, "idempotency_key_reused")
	requireProblem(t, e.do("POST", path, e.shop, body, "Idempotency-Key", ""), 400, "idempotency_key_invalid")

	for _, bad := range []any{
		map[string]any{"items": []any{}},
		map[string]any{"items": []any{line("C3", 1)}},
		map[string]any{"items": []any{line("A1", 3)}},
		map[string]any{"items": []any{line("A1", 0)}},
	} {
		requireProblem(t, e.do("POST", path, e.shop, bad), 422, "invalid_request")
	}
	require.Equal(t, before, e.counts(), "refusals change nothing")

	// Without a key, each partial release hands back more.
	r = e.do("POST", path, e.shop, map[string]any{"items": []any{line("B2", 1)}})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Len(t, r.json(t)["items"], 1)

	ledger := e.do("GET", "/v1/skus/A1/ledger", e.ops, nil).json(t)
	newest := ledger["movements"].([]any)[0].(map[string]any)
	require.Equal(t, "release_partial", newest["kind"])
	require.EqualValues(t, 1, newest["delta_available"])
	require.Equal(t, "one out of stock at the warehouse", newest["reason"])

	// The old contract: no items, the whole hold.
	r = e.do("POST", path, e.shop, map[string]any{"reason": "cancelled"})
	require.Equal(t, 200, r.status)
	require.Equal(t, "released", r.json(t)["status"])
	stock := e.do("GET", "/v1/skus/A1", e.shop, nil).json(t)["pools"].([]any)[0].(map[string]any)
	require.EqualValues(t, 10, stock["available"])
}

// TestMaxPerOrder caps the units of one SKU a hold may take from a
// campaign: a hold over the cap is refused with 422 limit_exceeded before
// it is tried, and changes nothing; two lines of the SKU count together.
// A campaign's holds last its hold TTL at most, so they cannot be extended.
func TestMaxPerOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	e.stockIn("FLASH", 100)
	e.stockIn("GIFT", 100)
	camp := map[string]any{"id": "bf", "starts_at": time.Now().UTC().Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_seconds": 120, "max_per_order": 2, "allotments": []any{map[string]any{"sku": "FLASH", "quantity": 50}, map[string]any{"sku": "GIFT", "quantity": 50}}}
	r := e.do("POST", "/v1/campaigns", e.ops, camp, "Idempotency-Key", "bf")
	require.Equal(t, 201, r.status, "%s", r.body)
	require.EqualValues(t, 2, r.json(t)["max_per_order"])
	require.NoError(t, e.camps.Start(ctx, "bf"))

	before := e.counts()
	hold := func(key string, items ...any) resp {
		return e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": items}, "Idempotency-Key", key)
	}
	p := requireProblem(t, hold("over", line("GIFT", 1), line("FLASH", 3)), 422, "limit_exceeded")
	require.Equal(t, "FLASH", p["sku"])
	require.Equal(t, "bf", p["pool"])
	requireProblem(t, hold("summed", line("FLASH", 1), line("FLASH", 2)), 422, "limit_exceeded")
	require.Equal(t, before, e.counts(), "nothing held, nothing recorded")
	ok := hold("at-cap", line("FLASH", 2), line("GIFT", 2))
	require.Equal(t, 201, ok.status, "%s", ok.body)
	id := ok.json(t)["id"].(string)

	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/extend", e.shop, map[string]any{"ttl_seconds": 600}), 422, "invalid_request")

	for _, bad := range []any{0, 1_000_001, "2"} {
		c := map[string]any{}
		for k, v := range camp {
			c[k] = v
		}
		c["id"], c["max_per_order"] = fmt.Sprint("c-", bad), bad
		status := 422
		if _, isString := bad.(string); isString {
			status = 400
		}
		requireProblem(t, e.do("POST", "/v1/campaigns", e.ops, c, "Idempotency-Key", url.QueryEscape(fmt.Sprint("c-", bad))), status, "invalid_request")
	}
}

// TestReplayAnswersTheFirstAnswer: an idempotent retry of a hold answers
// its first answer byte for byte, whatever happened to the hold since: a
// replay after partial releases (of a split line, a seat and a whole
// line) and an extend answered today's lines and expiry. The hold's lines
// are asked in an order that is not the lines' sort order, a line is split
// across two locations, and one names seats, so every part of the answer
// is covered; the replay is tried after each change, through the hold
// batch, and after the hold ended.
func TestReplayAnswersTheFirstAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for i, loc := range []string{"paris", "berlin"} {
		require.Equal(t, 201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": loc, "name": loc, "priority": i + 1}, "Idempotency-Key", "l-"+loc).status)
	}
	for loc, n := range map[string]int{"paris": 2, "berlin": 3} {
		r := e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": n, "location": loc, "reason": "delivery"}, "Idempotency-Key", "in-"+loc)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	e.stockIn("B1", 5)
	seats := e.do("POST", "/v1/skus/SHOW/units", e.ops, map[string]any{"reason": "plan", "units": []map[string]any{
		{"id": "A-1", "group": "A", "position": 1}, {"id": "A-2", "group": "A", "position": 2}, {"id": "A-3", "group": "A", "position": 3}}},
		"Idempotency-Key", "plan")
	require.Equal(t, 200, seats.status, "%s", seats.body)

	body := map[string]any{"order_ref": "o-1", "ttl_seconds": 600, "items": []any{
		line("B1", 2), map[string]any{"sku": "A1", "quantity": 4, "split": true}, seatLine("SHOW", "A-3", "A-1")}}
	key := "order-1"
	first := e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", key)
	require.Equal(t, 201, first.status, "%s", first.body)
	id := first.json(t)["id"].(string)
	replay := func(when string) {
		t.Helper()
		r := e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", key)
		require.Equal(t, 201, r.status, "%s: %s", when, r.body)
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), when)
		require.Equal(t, string(first.body), string(r.body), "%s: the first answer, byte for byte", when)
	}
	replay("at once")

	path := "/v1/reservations/" + id
	for i, items := range [][]any{
		{map[string]any{"sku": "A1", "quantity": 1, "location": "berlin"}},
		{seatLine("SHOW", "A-1")},
		{line("B1", 2)},
	} {
		r := e.do("POST", path+"/release", e.shop, map[string]any{"reason": "part", "items": items})
		require.Equal(t, 200, r.status, "%s", r.body)
		require.Equal(t, "held", r.json(t)["status"])
		replay(fmt.Sprintf("after partial release %d", i+1))
	}
	r := e.do("POST", path+"/extend", e.shop, map[string]any{"ttl_seconds": 3600})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NotEqual(t, first.json(t)["expires_at"], r.json(t)["expires_at"])
	replay("after an extend")
	require.Equal(t, 200, e.do("POST", path+"/release", e.shop, map[string]any{"reason": "gone"}).status)
	replay("after the release")
	require.Equal(t, "released", e.do("GET", path, e.shop, nil).json(t)["status"], "GET shows the hold as it is")

	// A campaign's hold (its TTL wins over the request's), partly released,
	// replayed while the campaign runs (through the batch) and after it
	// ended (looked up apart: the campaign takes no holds).
	camp := map[string]any{"id": "bf", "starts_at": time.Now().UTC().Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_seconds": 120, "allotments": []any{map[string]any{"sku": "B1", "quantity": 3}}}
	require.Equal(t, 201, e.do("POST", "/v1/campaigns", e.ops, camp, "Idempotency-Key", "bf").status)
	require.NoError(t, e.camps.Start(context.Background(), "bf"))
	body = map[string]any{"campaign": "bf", "ttl_seconds": 600, "items": []any{line("B1", 3)}}
	key = "order-2"
	first = e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", key)
	require.Equal(t, 201, first.status, "%s", first.body)
	path = "/v1/reservations/" + first.json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", path+"/release", e.shop, map[string]any{"reason": "part", "items": []any{line("B1", 1)}}).status)
	replay("a campaign's hold after a partial release")
	r = e.do("POST", "/v1/campaigns/bf/end", e.ops, map[string]any{"operator": "alice", "reason": "over"})
	require.Equal(t, 202, r.status, "%s", r.body)
	replay("a campaign's hold after the campaign ended")
}
