package api_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHoldLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)

	r := e.hold("k1", line("A1", 2))
	require.Equal(t, 201, r.status, "%s", r.body)
	res := r.json(t)
	require.Equal(t, "held", res["status"])
	require.Equal(t, "o-k1", res["order_ref"])
	require.Nil(t, res["campaign"])
	require.Nil(t, res["release_reason"])
	require.Equal(t, []any{map[string]any{"sku": "A1", "pool": "main", "quantity": 2.0, "location": "default"}}, res["items"])
	id := res["id"].(string)
	require.Equal(t, "/v1/reservations/"+id, r.header.Get("Location"))
	expires, err := time.Parse(time.RFC3339, res["expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(900*time.Second), expires, 30*time.Second, "default TTL is 900 s")

	got := e.do("GET", "/v1/reservations/"+id, e.shop, nil)
	require.Equal(t, 200, got.status)
	require.Equal(t, id, got.json(t)["id"])

	stock := e.do("GET", "/v1/skus/A1", e.shop, nil).json(t)
	pool := stock["pools"].([]any)[0].(map[string]any)
	require.EqualValues(t, 8, pool["available"])
	require.EqualValues(t, 2, pool["reserved"])
	require.Equal(t, "on_sale", pool["status"])

	c := e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil)
	require.Equal(t, 200, c.status, "%s", c.body)
	require.Equal(t, "confirmed", c.json(t)["status"])
	c2 := e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil)
	require.Equal(t, 200, c2.status)
	require.JSONEq(t, string(c.body), string(c2.body), "confirming again answers the same")
	rel := e.do("POST", "/v1/reservations/"+id+"/release", e.shop, map[string]any{"reason": "cancelled"})
	p := requireProblem(t, rel, 409, "reservation_not_held")
	require.Equal(t, "confirmed", p["reservation_status"])

	r2 := e.hold("k2", line("A1", 3)).json(t)
	id2 := r2["id"].(string)
	rel = e.do("POST", "/v1/reservations/"+id2+"/release", e.shop, map[string]any{"reason": "customer cancelled"})
	require.Equal(t, 200, rel.status, "%s", rel.body)
	require.Equal(t, "released", rel.json(t)["status"])
	require.Equal(t, "customer cancelled", rel.json(t)["release_reason"])
	rel = e.do("POST", "/v1/reservations/"+id2+"/release", e.shop, nil)
	require.Equal(t, 200, rel.status, "releasing again: 200")
	p = requireProblem(t, e.do("POST", "/v1/reservations/"+id2+"/confirm", e.shop, nil), 409, "reservation_not_held")
	require.Equal(t, "released", p["reservation_status"])

	ledger := e.do("GET", "/v1/skus/A1/ledger?limit=3", e.ops, nil)
	require.Equal(t, 200, ledger.status)
	moves := ledger.json(t)["movements"].([]any)
	require.Len(t, moves, 3)
	require.Equal(t, "release", moves[0].(map[string]any)["kind"], "newest first")
	require.Equal(t, "shop-a", moves[0].(map[string]any)["actor"])
}

func TestHoldRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 5)
	e.stockIn("B1", 5)

	p := requireProblem(t, e.hold("k1", line("A1", 1), line("B1", 6)), 409, "out_of_stock")
	require.Equal(t, "B1", p["sku"])
	p = requireProblem(t, e.hold("k2", line("A1", 1), line("NOPE", 1)), 422, "unknown_sku")
	require.Equal(t, "NOPE", p["sku"])

	pause := e.do("POST", "/v1/skus/B1/pause", e.ops, map[string]any{"reason": "stock count"})
	require.Equal(t, 200, pause.status, "%s", pause.body)
	require.Equal(t, "paused", pause.json(t)["pools"].([]any)[0].(map[string]any)["status"])
	p = requireProblem(t, e.hold("k3", line("B1", 1)), 409, "sku_paused")
	require.Equal(t, "B1", p["sku"])
	resume := e.do("POST", "/v1/skus/B1/resume", e.ops, map[string]any{"reason": "counted"})
	require.Equal(t, 200, resume.status)
	require.Equal(t, 201, e.hold("k3", line("B1", 1)).status)

	p = requireProblem(t, e.do("POST", "/v1/reservations", e.shop,
		map[string]any{"items": []any{line("A1", 1)}, "campaign": "nope"}, "Idempotency-Key", "k4"), 422, "unknown_campaign")
	_ = p
	var n int
	require.NoError(t, e.pool.QueryRow(t.Context(), "SELECT count(*) FROM reservations").Scan(&n))
	require.Equal(t, 1, n, "refused holds leave no trace")
}

// TestThousandConcurrentHolds is the oversell test: 1,000 shoppers race for
// 100 units of one SKU through HTTP, on the plain path and the coalesced one.
func TestThousandConcurrentHolds(t *testing.T) {
	t.Parallel()
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprint("coalesce=", coalesce), func(t *testing.T) {
			t.Parallel()
			e := setup(t, &setupOpts{coalesce: coalesce})
			e.stockIn("HOT", 100)

			answers := make([]resp, 1000)
			errs := make([]error, 1000)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Under load a lock wait may run out (503 busy): the
					// client retries with its key, as the API asks.
					key := fmt.Sprint("c", i)
					answers[i], errs[i] = e.sendRetryingBusy("POST", "/v1/reservations", e.shop,
						map[string]any{"order_ref": "o-" + key, "items": []any{line("HOT", 1)}}, "Idempotency-Key", key)
				}()
			}
			wg.Wait()
			count := map[int]int{}
			for i, r := range answers {
				require.NoError(t, errs[i])
				count[r.status]++
				if r.status == 409 {
					require.Equal(t, "out_of_stock", r.json(t)["code"], "%s", r.body)
				}
			}
			require.Equal(t, map[int]int{201: 100, 409: 900}, count)
			pool := e.do("GET", "/v1/skus/HOT", e.shop, nil).json(t)["pools"].([]any)[0].(map[string]any)
			require.EqualValues(t, 0, pool["available"])
			require.EqualValues(t, 100, pool["reserved"])
		})
	}
}

func TestIdempotencyKeyStorm(t *testing.T) {
	t.Parallel()
	e := setup(t, &setupOpts{coalesce: true})
	e.stockIn("A1", 100)
	bodies := make([]string, 50)
	statuses := make([]int, 50)
	replays := make([]string, 50)
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.sendHold("storm", line("A1", 3))
			bodies[i], statuses[i], replays[i], errs[i] = string(r.body), r.status, r.header.Get("Idempotent-Replayed"), err
		}()
	}
	wg.Wait()
	fresh := 0
	for i := range bodies {
		require.NoError(t, errs[i])
		require.Equal(t, 201, statuses[i])
		require.Equal(t, bodies[0], bodies[i], "every answer is the same")
		if replays[i] == "" {
			fresh++
		} else {
			require.Equal(t, "true", replays[i])
		}
	}
	require.Equal(t, 1, fresh, "one request made the hold, the others replayed it")
	var n int
	require.NoError(t, e.pool.QueryRow(t.Context(), "SELECT count(*) FROM reservations").Scan(&n))
	require.Equal(t, 1, n)

	requireProblem(t, e.hold("storm", line("A1", 4)), 422, "idempotency_key_reused")
	other := e.do("POST", "/v1/reservations", e.ops, map[string]any{"items": []any{line("A1", 4)}}, "Idempotency-Key", "storm")
	require.Equal(t, 201, other.status, "keys are scoped to the API key's owner")
}

func TestMultiSKUHoldsInRandomOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	skus := []string{"M1", "M2", "M3", "M4"}
	for _, s := range skus {
		e.stockIn(s, 60)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 120)
	errs := make([]error, 120)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var items []any
			for _, j := range rand.Perm(len(skus)) {
				items = append(items, line(skus[j], 1))
			}
			// Repeat a SKU so the summing path runs under contention too.
			items = append(items, line(skus[i%len(skus)], 1))
			var r resp
			r, errs[i] = e.sendHold(fmt.Sprint("m", i), items...)
			statuses[i] = r.status
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for i, s := range statuses {
		require.NoError(t, errs[i])
		count[s]++
	}
	// Each hold takes 5 units across 4 SKUs of 60; no deadlock (a 500) and
	// no partial hold: the counters add up to whole holds.
	require.Zero(t, count[500])
	var reserved int
	require.NoError(t, e.pool.QueryRow(t.Context(), "SELECT sum(reserved) FROM stock").Scan(&reserved))
	require.Equal(t, 5*count[201], reserved)
	require.Equal(t, 120, count[201]+count[409])
}

func TestConfirmReleaseRaceHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 100)
	for i := range 30 {
		id := e.hold(fmt.Sprint("r", i), line("A1", 1)).json(t)["id"].(string)
		var c, r resp
		var cErr, rErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c, cErr = e.send("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil) }()
		go func() { defer wg.Done(); r, rErr = e.send("POST", "/v1/reservations/"+id+"/release", e.shop, nil) }()
		wg.Wait()
		require.NoError(t, cErr)
		require.NoError(t, rErr)
		require.NotEqual(t, c.status == 200, r.status == 200, "exactly one wins: confirm %d, release %d", c.status, r.status)
		loser := c
		if c.status == 200 {
			loser = r
		}
		requireProblem(t, loser, 409, "reservation_not_held")
	}
}

func TestConfirmAfterExpiry(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 5)
	r := e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{line("A1", 2)}, "ttl_seconds": 60}, "Idempotency-Key", "ttl")
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	// Its time runs out: move the expiry into the past rather than wait.
	tag, err := e.pool.Exec(t.Context(), "UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1", id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	p := requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil), 409, "reservation_not_held")
	require.Equal(t, "expired", p["reservation_status"])
	pool := e.do("GET", "/v1/skus/A1", e.shop, nil).json(t)["pools"].([]any)[0].(map[string]any)
	require.EqualValues(t, 5, pool["available"], "the expired hold's stock is back")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 5)
	requireProblem(t, e.do("GET", "/v1/skus/A1", "", nil), 401, "unauthorized")
	requireProblem(t, e.do("GET", "/v1/skus/A1", "sh_not-a-key", nil), 401, "unauthorized")
	requireProblem(t, e.do("POST", "/v1/skus/A1/adjustments", e.shop, map[string]any{"delta": 1}, "Idempotency-Key", "x"), 403, "forbidden")
	requireProblem(t, e.do("GET", "/v1/skus/A1/ledger", e.shop, nil), 403, "forbidden")
	r := e.do("GET", "/v1/skus/A1", "", nil, "Authorization", "Basic "+strings.Repeat("x", 8))
	requireProblem(t, r, 401, "unauthorized")

	// Another shop cannot see or touch shop-a's hold.
	id := e.hold("mine", line("A1", 1)).json(t)["id"].(string)
	other, err := createKey(e, "shop-b")
	require.NoError(t, err)
	requireProblem(t, e.do("GET", "/v1/reservations/"+id, other, nil), 404, "not_found")
	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/release", other, nil), 404, "not_found")
	require.Equal(t, 200, e.do("GET", "/v1/reservations/"+id, e.ops, nil).status, "ops see every hold")
}
