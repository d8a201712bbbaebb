package api_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func seatLine(sku string, ids ...string) map[string]any {
	return map[string]any{"sku": sku, "units": ids}
}

func TestUnitsOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)

	// A small venue: rows A and B, four seats each.
	var plan []map[string]any
	for _, row := range []string{"A", "B"} {
		for p := 1; p <= 4; p++ {
			plan = append(plan, map[string]any{"id": fmt.Sprintf("%s-%d", row, p), "group": row, "position": p,
				"attributes": map[string]any{"band": "front"}})
		}
	}
	body := map[string]any{"reason": "seating plan", "units": plan}
	add := e.do("POST", "/v1/skus/SHOW/units", e.ops, body, "Idempotency-Key", "plan-1")
	require.Equal(t, 200, add.status, "%s", add.body)
	p := add.json(t)["pools"].([]any)[0].(map[string]any)
	require.EqualValues(t, 8, p["available"])
	require.Equal(t, true, p["serialized"])
	again := e.do("POST", "/v1/skus/SHOW/units", e.ops, body, "Idempotency-Key", "plan-1")
	require.Equal(t, 200, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, 403, e.do("POST", "/v1/skus/SHOW/units", e.shop, body, "Idempotency-Key", "plan-2").status)

	// Two customers race for: one gets them, the other is
	// told which seats went.
	var wg sync.WaitGroup
	answers := make([]resp, 2)
	// Both ask for the same pair, so the rest of the walk does not depend
	// on who wins (TestNamedSeatsRace races overlapping pairs).
	for i, seatsWanted := range [][]string{{"A-2", "A-3"}, {"A-3", "A-2"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], _ = e.sendHold(fmt.Sprint("race-", i), seatLine("SHOW", seatsWanted...))
		}()
	}
	wg.Wait()
	won, lost := answers[0], answers[1]
	if won.status != 201 {
		won, lost = lost, won
	}
	require.Equal(t, 201, won.status, "%s", won.body)
	pr := requireProblem(t, lost, 409, "unit_unavailable")
	require.Equal(t, []any{"A-2", "A-3"}, pr["units"])
	wonID := won.json(t)["id"].(string)

	// Two seats together: row A is broken up, so row B.
	adj := e.hold("together", map[string]any{"sku": "SHOW", "quantity": 2, "adjacent": true})
	require.Equal(t, 201, adj.status, "%s", adj.body)
	items := adj.json(t)["items"].([]any)
	require.Equal(t, []any{"B-1", "B-2"}, items[0].(map[string]any)["units"])
	adjID := adj.json(t)["id"].(string)

	// A partial release names the seats; a bare quantity is refused.
	bad := e.do("POST", "/v1/reservations/"+adjID+"/release", e.shop, map[string]any{"items": []any{line("SHOW", 1)}})
	requireProblem(t, bad, 422, "invalid_request")
	part := e.do("POST", "/v1/reservations/"+adjID+"/release", e.shop, map[string]any{"items": []any{seatLine("SHOW", "B-2")}})
	require.Equal(t, 200, part.status, "%s", part.body)
	require.Equal(t, []any{"B-1"}, part.json(t)["items"].([]any)[0].(map[string]any)["units"])
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+wonID+"/confirm", e.shop, nil).status)

	// Quantities of a serialized pool do not move.
	requireProblem(t, e.do("POST", "/v1/skus/SHOW/adjustments", e.ops, map[string]any{"delta": 1, "reason": "x"}, "Idempotency-Key", "adj"),
		409, "serialized_pool")

	// Retire an available seat; a sold one is refused by name.
	requireProblem(t, e.do("POST", "/v1/skus/SHOW/units/retire", e.ops, map[string]any{"reason": "broken", "units": []string{"A-2"}}, "Idempotency-Key", "r1"),
		409, "unit_unavailable")
	ret := e.do("POST", "/v1/skus/SHOW/units/retire", e.ops, map[string]any{"reason": "broken", "units": []string{"B-4"}}, "Idempotency-Key", "r2")
	require.Equal(t, 200, ret.status, "%s", ret.body)

	// Listing, by status and in pages.
	sold := e.do("GET", "/v1/skus/SHOW/units?status=sold", e.shop, nil)
	require.Equal(t, 200, sold.status, "%s", sold.body)
	var soldIDs []string
	for _, u := range sold.json(t)["units"].([]any) {
		soldIDs = append(soldIDs, u.(map[string]any)["id"].(string))
		require.Equal(t, wonID, u.(map[string]any)["reservation_id"])
	}
	require.Equal(t, []string{"A-2", "A-3"}, soldIDs)
	var all []string
	q := "/v1/skus/SHOW/units?limit=3"
	for {
		page := e.do("GET", q, e.shop, nil).json(t)
		for _, u := range page["units"].([]any) {
			all = append(all, u.(map[string]any)["id"].(string))
		}
		next, ok := page["next_cursor"].(string)
		require.Equal(t, page["next_cursor"], page["next_after"], "the deprecated name says the same")
		if !ok {
			break
		}
		q = "/v1/skus/SHOW/units?limit=3&cursor=" + next
	}
	require.Equal(t, []string{"A-1", "A-2", "A-3", "A-4", "B-1", "B-2", "B-3", "B-4"}, all)
	requireProblem(t, e.do("GET", "/v1/skus/SHOW/units?status=lost", e.shop, nil), 422, "invalid_request")

	// Bad input changes nothing.
	before := e.counts()
	for name, b := range map[string]map[string]any{
		"no reason":         {"units": []any{map[string]any{"id": "C-1"}}},
		"no units":          {"reason": "x", "units": []any{}},
		"id twice":          {"reason": "x", "units": []any{map[string]any{"id": "C-1"}, map[string]any{"id": "C-1"}}},
		"position, no row":  {"reason": "x", "units": []any{map[string]any{"id": "C-1", "position": 1}}},
		"attributes array":  {"reason": "x", "units": []any{map[string]any{"id": "C-1", "attributes": []any{1}}}},
		"id with a slash":   {"reason": "x", "units": []any{map[string]any{"id": "C/1"}}},
		"negative position": {"reason": "x", "units": []any{map[string]any{"id": "C-1", "group": "C", "position": -1}}},
	} {
		r := e.do("POST", "/v1/skus/SHOW/units", e.ops, b, "Idempotency-Key", "bad-"+name)
		requireProblem(t, r, 422, "invalid_request")
	}
	requireProblem(t, e.do("POST", "/v1/skus/SHOW/units", e.ops, map[string]any{"reason": "x", "units": []any{map[string]any{"id": "A-1"}}},
		"Idempotency-Key", "dup"), 409, "conflict")
	requireProblem(t, e.hold("both", map[string]any{"sku": "SHOW", "quantity": 2, "adjacent": true, "units": []string{"A-1", "A-4"}}), 422, "invalid_request")
	requireProblem(t, e.hold("seat twice", seatLine("SHOW", "A-1", "A-1")), 422, "invalid_request")
	require.Equal(t, before, e.counts())
}

// TestManyUnitsInOneRequest: 10,000 units fit one request, past the
// 64 KiB every other body is held to.
func TestManyUnitsInOneRequest(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	units := make([]map[string]any, 10_000)
	for i := range units {
		units[i] = map[string]any{"id": fmt.Sprintf("SN-%08d", i)}
	}
	r := e.do("POST", "/v1/skus/PHONE/units", e.ops, map[string]any{"reason": "delivery", "units": units}, "Idempotency-Key", "d1")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.EqualValues(t, 10_000, r.json(t)["pools"].([]any)[0].(map[string]any)["total"])
	// Other routes still stop at 64 KiB.
	big := `{"reason":"` + strings.Repeat("x", 70<<10) + `","delta":1}`
	requireProblem(t, e.do("POST", "/v1/skus/PHONE/adjustments", e.ops, big, "Idempotency-Key", "big"), 413, "body_too_large")
}

// TestUnitsShowOnlyTheCallersHolds: a unit's reservation_id is shown to
// the shop whose hold it is and to ops, never to another shop, which sees
// only that the seat is taken.
func TestUnitsShowOnlyTheCallersHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	plan := []map[string]any{{"id": "A-1"}, {"id": "A-2"}, {"id": "A-3"}}
	require.Equal(t, 200, e.do("POST", "/v1/skus/SHOW/units", e.ops, map[string]any{"reason": "plan", "units": plan}, "Idempotency-Key", "plan").status)
	held, err := e.sendHold("mine", seatLine("SHOW", "A-1"))
	require.NoError(t, err)
	require.Equal(t, 201, held.status, "%s", held.body)
	id := held.json(t)["id"].(string)
	other, err := createKey(e, "shop-b")
	require.NoError(t, err)

	holders := func(token string) map[string]any {
		r := e.do("GET", "/v1/skus/SHOW/units", token, nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		out := map[string]any{}
		for _, u := range r.json(t)["units"].([]any) {
			m := u.(map[string]any)
			out[m["id"].(string)+" "+m["status"].(string)] = m["reservation_id"]
		}
		return out
	}
	require.Equal(t, map[string]any{"A-1 held": id, "A-2 available": nil, "A-3 available": nil}, holders(e.shop))
	require.Equal(t, map[string]any{"A-1 held": id, "A-2 available": nil, "A-3 available": nil}, holders(e.ops))
	require.Equal(t, map[string]any{"A-1 held": nil, "A-2 available": nil, "A-3 available": nil}, holders(other))
}
