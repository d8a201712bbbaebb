package api_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/reconcile"
)

// corrupt adds n units to a pool's total and available with no ledger row:
// every CHECK still holds, the lines still agree, the ledger does not.
func (e *env) corrupt(sku string, n int) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `UPDATE stock SET total = total + $2, available = available + $2 WHERE sku = $1 AND pool = 'main'`, sku, n)
	require.NoError(e.t, err)
}

func (e *env) pool0(sku string) map[string]any {
	e.t.Helper()
	r := e.do("GET", "/v1/skus/"+sku, e.ops, nil)
	require.Equal(e.t, 200, r.status, "%s", r.body)
	return r.json(e.t)["pools"].([]any)[0].(map[string]any)
}

func counters(m any) map[string]any {
	c := m.(map[string]any)
	return map[string]any{"total": c["total"], "available": c["available"], "reserved": c["reserved"], "sold": c["sold"]}
}

// TestResumeIsGatedByTheBooks: a pool whose counters disagree with its
// ledger cannot be resumed (409 books_unbalanced with the difference, still
// paused) until it is repaired or the resume is forced; a clean resume is
// followed by a reconciliation shown in the answer.
func TestResumeIsGatedByTheBooks(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("B1", 10)
	pause := func(sku string) {
		r := e.do("POST", "/v1/skus/"+sku+"/pause", e.ops, map[string]any{"reason": "count"})
		require.Equal(t, 200, r.status, "%s", r.body)
	}

	pause("B1")
	r := e.do("POST", "/v1/skus/B1/resume", e.ops, map[string]any{"reason": "counted"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, "on_sale", got["pools"].([]any)[0].(map[string]any)["status"])
	run := got["reconciliation"].(map[string]any)
	require.Equal(t, "resume", run["trigger"])
	require.Equal(t, "succeeded", run["status"])
	require.Equal(t, []any{"B1"}, run["skus"])
	require.EqualValues(t, 0, run["high_risk"])

	pause("A1")
	e.corrupt("A1", 5)
	p := requireProblem(t, e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{"reason": "counted"}), 409, "books_unbalanced")
	require.Equal(t, "A1", p["sku"])
	require.Equal(t, states(5.0, 5.0, 0.0, 0.0), p["difference"])
	require.Equal(t, states(15.0, 15.0, 0.0, 0.0), p["counters"])
	require.Equal(t, "paused", e.pool0("A1")["status"], "the pool stays paused")
	requireProblem(t, e.do("POST", "/v1/reservations", e.shop, map[string]any{"items": []any{line("A1", 1)}}, "Idempotency-Key", "h"), 409, "sku_paused")

	requireProblem(t, e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{"force": true}), 422, "invalid_request")
	r = e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{"reason": "sell while we count", "force": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Nil(t, r.json(t)["reconciliation"], "a forced resume is not reconciled at once: it would pause the pool again")
	require.Equal(t, "on_sale", e.pool0("A1")["status"])
	a, ok := findAlert(t, e, "forced_resume", "sku:A1/main")
	require.True(t, ok, "a forced resume is alerted")
	require.Equal(t, "critical", a["level"])
	details := a["details"].(map[string]any)
	require.Equal(t, "alice", details["actor"])
	require.Equal(t, states(5.0, 5.0, 0.0, 0.0), details["difference"])
	led := e.do("GET", "/v1/skus/A1/ledger?limit=1", e.ops, nil).json(t)["movements"].([]any)[0].(map[string]any)
	require.Equal(t, "resume", led["kind"])
	require.Contains(t, led["reason"], "forced")
	require.Equal(t, "alice", led["actor_key"])

	// Repaired to the ledger, the pool's books balance again.
	r = e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit"})
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestBooksAlertResolvedByTheResume: the books_out_of_balance alert a
// reconciliation raises says what to press on the console (its SKU page's
// repair and resume), and once the books are repaired and the pool resumed
// through its gate it is resolved, saying who resumed it and why; it used
// to stay open, saying nothing. A forced resume of books that still
// disagree leaves it open.
func TestBooksAlertResolvedByTheResume(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("MUG", 20)
	e.stockIn("TEE", 20)
	e.corrupt("MUG", 3)
	e.corrupt("TEE", 2)
	_, err := e.rec.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.NoError(t, err)
	a, ok := findAlert(t, e, "books_out_of_balance", "sku:MUG/main")
	require.True(t, ok)
	action := a["suggested_action"].(string)
	require.Contains(t, action, "/ops/skus/MUG")
	require.Contains(t, action, `"Repair the books"`)
	require.Contains(t, action, `"Apply the repair"`)
	require.Contains(t, action, "Resume")
	require.Equal(t, "paused", e.pool0("MUG")["status"])

	r := e.do("POST", "/v1/skus/MUG/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit undone"})
	require.Equal(t, 200, r.status, "%s", r.body)
	_, ok = findAlert(t, e, "books_out_of_balance", "sku:MUG/main")
	require.True(t, ok, "a repair alone does not resolve it: the pool is still paused")
	r = e.do("POST", "/v1/skus/MUG/resume", e.ops, map[string]any{"reason": "books repaired"})
	require.Equal(t, 200, r.status, "%s", r.body)
	_, ok = findAlert(t, e, "books_out_of_balance", "sku:MUG/main")
	require.False(t, ok, "the resume through the gate resolves it")
	list := e.do("GET", "/v1/alerts?status=resolved", e.ops, nil).json(t)["alerts"].([]any)
	require.Len(t, list, 1)
	done := list[0].(map[string]any)
	require.Equal(t, "sku:MUG/main", done["subject"])
	require.NotNil(t, done["resolved_at"])
	require.Contains(t, done["resolution"], "the books balance")
	require.Contains(t, done["resolution"], "alice resumed the pool: books repaired")

	// Forced while its books still disagree: the alert stays open.
	r = e.do("POST", "/v1/skus/TEE/resume", e.ops, map[string]any{"reason": "sell while we count", "force": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	tee, ok := findAlert(t, e, "books_out_of_balance", "sku:TEE/main")
	require.True(t, ok, "a forced resume fixes nothing")
	require.Nil(t, tee["resolution"])
	r = e.do("POST", "/v1/skus/TEE/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit undone"})
	require.Equal(t, 200, r.status, "%s", r.body)
}

func findAlert(t *testing.T, e *env, kind, subject string) (map[string]any, bool) {
	t.Helper()
	list := e.do("GET", "/v1/alerts?status=open", e.ops, nil).json(t)["alerts"].([]any)
	for _, a := range list {
		m := a.(map[string]any)
		if m["kind"] == kind && m["subject"] == subject {
			return m, true
		}
	}
	return nil, false
}

// TestRepairPreviewsThenApplies: a dry run answers the repair and changes
// nothing; applied, to the ledger it sets the counters, to the counters it
// writes one correcting ledger row; each is followed by a reconciliation
// that finds the books balanced, and then the gate lets the pool resume.
func TestRepairPreviewsThenApplies(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("B1", 10)
	id := e.hold("h1", line("A1", 2)).json(t)["id"].(string)
	e.corrupt("A1", 3)
	e.corrupt("B1", 4)

	for _, bad := range []map[string]any{
		{"to": "ledger"},
		{"to": "somewhere", "reason": "x"},
		{"reason": "x"},
		{"to": "ledger", "reason": "x", "pool": "nope/"},
	} {
		before := e.counts()
		requireProblem(t, e.do("POST", "/v1/skus/A1/repair", e.ops, bad), 422, "invalid_request")
		require.Equal(t, before, e.counts())
	}
	requireProblem(t, e.do("POST", "/v1/skus/NOPE/repair", e.ops, map[string]any{"to": "ledger", "reason": "x"}), 404, "unknown_sku")
	requireProblem(t, e.do("POST", "/v1/skus/A1/repair", e.shop, map[string]any{"to": "ledger", "reason": "x"}), 403, "forbidden")

	before := e.counts()
	r := e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit", "dry_run": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, "A1", got["sku"])
	require.Equal(t, "main", got["pool"])
	require.Equal(t, states(13.0, 11.0, 2.0, 0.0), got["before"])
	require.Equal(t, states(10.0, 8.0, 2.0, 0.0), got["after"])
	require.Equal(t, states(-3.0, -3.0, 0.0, 0.0), got["difference"])
	require.Equal(t, false, got["applied"])
	require.Nil(t, got["reconciliation"])
	require.Equal(t, before, e.counts(), "a dry run changes nothing")

	r = e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got = r.json(t)
	require.Equal(t, true, got["applied"])
	require.Equal(t, map[string]any{"total": 10.0, "available": 8.0, "reserved": 2.0, "sold": 0.0}, counters(e.pool0("A1")))
	run := got["reconciliation"].(map[string]any)
	require.Equal(t, "repair", run["trigger"])
	require.EqualValues(t, 0, run["high_risk"], "%v", run)
	led := e.do("GET", "/v1/skus/A1/ledger?limit=1", e.ops, nil).json(t)["movements"].([]any)[0].(map[string]any)
	require.Equal(t, "repair", led["kind"])
	require.Equal(t, "hand edit", led["reason"])
	require.Equal(t, "alice", led["actor_key"])

	// Again: nothing left to repair.
	got = e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "again"}).json(t)
	require.Equal(t, false, got["applied"])
	require.Equal(t, states(0.0, 0.0, 0.0, 0.0), got["difference"])

	// An apply with the difference its preview showed is refused when the
	// books moved since (the console's Apply and stockhold repair --apply
	// send it): nothing is written, the answer has the new difference.
	e.corrupt("A1", 5)
	preview := e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit", "dry_run": true}).json(t)
	require.Equal(t, states(-5.0, -5.0, 0.0, 0.0), preview["difference"])
	e.corrupt("A1", 500)
	before = e.counts()
	p := requireProblem(t, e.do("POST", "/v1/skus/A1/repair", e.ops,
		map[string]any{"to": "ledger", "reason": "hand edit", "expected_difference": preview["difference"]}), 409, "preview_stale")
	require.Equal(t, states(-505.0, -505.0, 0.0, 0.0), p["difference"])
	require.Equal(t, preview["difference"], p["expected_difference"])
	require.Equal(t, before, e.counts(), "nothing written")
	got = e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit",
		"expected_difference": p["difference"]}).json(t)
	require.Equal(t, true, got["applied"], "applied with the difference now shown")
	require.Equal(t, map[string]any{"total": 10.0, "available": 8.0, "reserved": 2.0, "sold": 0.0}, counters(e.pool0("A1")))

	// To the counters: the ledger accepts the 4 units.
	r = e.do("POST", "/v1/skus/B1/repair", e.ops, map[string]any{"to": "counters", "reason": "found in the back"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got = r.json(t)
	require.Equal(t, got["before"], got["after"])
	require.Equal(t, states(4.0, 4.0, 0.0, 0.0), got["difference"])
	require.EqualValues(t, 0, got["reconciliation"].(map[string]any)["high_risk"])
	led = e.do("GET", "/v1/skus/B1/ledger?limit=1", e.ops, nil).json(t)["movements"].([]any)[0].(map[string]any)
	require.Equal(t, "repair", led["kind"])
	require.EqualValues(t, 4, led["delta_total"])

	// The hold is untouched and still confirms.
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil).status)
}

// TestAdjustmentsNeedAReasonAndPreview: an adjustment without a reason is
// 422 and changes nothing; a dry run answers the stock as it would be, or
// the refusal, and changes nothing; a real one shows the reconciliation
// that followed.
func TestAdjustmentsNeedAReasonAndPreview(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	before := e.counts()
	requireProblem(t, e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": 5}, "Idempotency-Key", "r0"), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": 5, "dry_run": true}), 422, "invalid_request")

	r := e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": -4, "reason": "broken", "dry_run": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, true, got["dry_run"])
	require.EqualValues(t, 6, got["pools"].([]any)[0].(map[string]any)["available"])
	p := requireProblem(t, e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": -40, "reason": "broken", "dry_run": true}), 409, "insufficient_available")
	require.Equal(t, "A1", p["sku"])
	require.Equal(t, before, e.counts(), "neither changed anything")

	r = e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": -4, "reason": "broken"}, "Idempotency-Key", "r1")
	require.Equal(t, 200, r.status, "%s", r.body)
	got = r.json(t)
	require.Nil(t, got["dry_run"])
	require.EqualValues(t, 6, got["pools"].([]any)[0].(map[string]any)["available"])
	run := got["reconciliation"].(map[string]any)
	require.Equal(t, "adjustment", run["trigger"])
	require.Equal(t, []any{"A1"}, run["skus"])
}

// TestStopSaleRefusesNewHoldsOnly: while stop-sale is on, new holds get 503
// stop_sale with Retry-After and leave no trace; confirms, releases and
// reads go on; a replay of a hold made before answers it; lifting it lets
// holds in again. Who and why are recorded.
func TestStopSaleRefusesNewHoldsOnly(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	first := e.hold("before", line("A1", 1)).json(t)["id"].(string)
	second := e.hold("before-2", line("A1", 1)).json(t)["id"].(string)

	got := e.do("GET", "/v1/stop-sale", e.ops, nil).json(t)
	require.Equal(t, false, got["active"])
	requireProblem(t, e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": true}), 422, "invalid_request")
	requireProblem(t, e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"reason": "x"}), 422, "invalid_request")
	requireProblem(t, e.do("PUT", "/v1/stop-sale", e.shop, map[string]any{"active": true, "reason": "x"}), 403, "forbidden")
	requireProblem(t, e.do("GET", "/v1/stop-sale", e.shop, nil), 403, "forbidden")

	r := e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": true, "reason": "payments down"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got = r.json(t)
	require.Equal(t, true, got["active"])
	require.Equal(t, "payments down", got["reason"])
	require.Equal(t, "alice", got["actor"])
	require.Equal(t, "alice", got["actor_key"])

	before := e.counts()
	p := requireProblem(t, e.hold("during", line("A1", 1)), 503, "stop_sale")
	require.Contains(t, p["detail"], "payments down")
	require.NotEmpty(t, r.header.Get("Content-Type"))
	h := e.hold("during-2", line("A1", 1))
	require.Equal(t, "60", h.header.Get("Retry-After"))
	require.Equal(t, before, e.counts(), "a refused hold leaves no trace")

	again := e.hold("before", line("A1", 1))
	require.Equal(t, 201, again.status, "a replay answers the hold made before: %s", again.body)
	require.Equal(t, first, again.json(t)["id"])
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+first+"/confirm", e.shop, nil).status)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+second+"/release", e.shop, nil).status)
	require.Equal(t, 200, e.do("GET", "/v1/skus/A1", e.shop, nil).status)

	r = e.do("PUT", "/v1/stop-sale", e.ops, map[string]any{"active": false, "reason": "payments back"})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, false, r.json(t)["active"])
	require.Equal(t, 201, e.hold("after", line("A1", 1)).status)
}

// TestCampaignSwitch pauses and resumes every pool of a campaign; the
// resume is gated by each pool's books, all or nothing.
func TestCampaignSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	e.stockIn("FLASH", 100)
	e.stockIn("GIFT", 100)
	camp := map[string]any{"id": "bf", "starts_at": time.Now().UTC().Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_seconds": 120, "allotments": []any{map[string]any{"sku": "FLASH", "quantity": 50}, map[string]any{"sku": "GIFT", "quantity": 50}}}
	require.Equal(t, 201, e.do("POST", "/v1/campaigns", e.ops, camp, "Idempotency-Key", "bf").status)
	require.NoError(t, e.camps.Start(ctx, "bf"))
	hold := func(key string) resp {
		return e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": []any{line("GIFT", 1)}}, "Idempotency-Key", key)
	}
	require.Equal(t, 201, hold("c1").status)

	requireProblem(t, e.do("POST", "/v1/campaigns/bf/pause", e.ops, map[string]any{}), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/campaigns/nope/pause", e.ops, map[string]any{"reason": "x"}), 404, "unknown_campaign")
	r := e.do("POST", "/v1/campaigns/bf/pause", e.ops, map[string]any{"reason": "price error"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.EqualValues(t, 2, got["changed"])
	for _, s := range got["skus"].([]any) {
		require.Equal(t, "paused", s.(map[string]any)["status"])
	}
	p := requireProblem(t, hold("c2"), 409, "sku_paused")
	require.Equal(t, "bf", p["pool"])
	require.Equal(t, 201, e.hold("main", line("GIFT", 1)).status, "main is not the campaign's")

	_, err := e.pool.Exec(ctx, `UPDATE stock SET total = total + 1, available = available + 1 WHERE sku = 'GIFT' AND pool = 'bf'`)
	require.NoError(t, err)
	p = requireProblem(t, e.do("POST", "/v1/campaigns/bf/resume", e.ops, map[string]any{"reason": "fixed"}), 409, "books_unbalanced")
	require.Equal(t, "GIFT", p["sku"])
	requireProblem(t, hold("c3"), 409, "sku_paused")
	_, err = e.pool.Exec(ctx, `UPDATE stock SET total = total - 1, available = available - 1 WHERE sku = 'GIFT' AND pool = 'bf'`)
	require.NoError(t, err)

	r = e.do("POST", "/v1/campaigns/bf/resume", e.ops, map[string]any{"reason": "fixed"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got = r.json(t)
	require.EqualValues(t, 2, got["changed"])
	require.Equal(t, "resume", got["reconciliation"].(map[string]any)["trigger"])
	require.Equal(t, 201, hold("c4").status)
}

// TestLateConfirmationAndReinstate: a confirm after the hold expired is
// 409 and raises a late_confirmation alert naming the hold and its order
// reference; reinstate holds the same lines again (200 held, idempotent),
// which then confirm; out of stock it is 409 naming the line.
func TestLateConfirmationAndReinstate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	e.stockIn("A1", 3)
	e.stockIn("B1", 3)
	id := e.hold("late", line("A1", 2), line("B1", 1)).json(t)["id"].(string)
	_, err := e.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute', created_at = created_at - interval '16 minutes' WHERE id = $1`, id)
	require.NoError(t, err)

	p := requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil), 409, "reservation_not_held")
	require.Equal(t, "expired", p["reservation_status"])
	a, ok := findAlert(t, e, "late_confirmation", "hold:"+id)
	require.True(t, ok, "a late payment is alerted")
	require.Equal(t, "warning", a["level"])
	require.Equal(t, id, a["details"].(map[string]any)["reservation_id"])
	require.Equal(t, "o-late", a["details"].(map[string]any)["order_ref"])

	held := e.hold("other", line("B1", 1))
	require.Equal(t, 201, held.status)
	r := e.do("POST", "/v1/reservations/"+id+"/reinstate", e.shop, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	newID := got["id"].(string)
	require.NotEqual(t, id, newID)
	require.Equal(t, "held", got["status"])
	require.Equal(t, "o-late", got["order_ref"])
	require.Equal(t, id, got["reinstated_from"])
	require.ElementsMatch(t, []any{
		map[string]any{"sku": "A1", "pool": "main", "quantity": 2.0, "location": "default"},
		map[string]any{"sku": "B1", "pool": "main", "quantity": 1.0, "location": "default"},
	}, got["items"])
	again := e.do("POST", "/v1/reservations/"+id+"/reinstate", e.shop, nil)
	require.Equal(t, 200, again.status)
	require.Equal(t, newID, again.json(t)["id"], "reinstating again answers the same hold")
	require.Equal(t, newID, e.do("GET", "/v1/reservations/"+id, e.shop, nil).json(t)["reinstated_as"])
	require.Equal(t, "confirmed", e.do("POST", "/v1/reservations/"+newID+"/confirm", e.shop, nil).json(t)["status"])
	requireProblem(t, e.do("POST", "/v1/reservations/"+newID+"/reinstate", e.shop, nil), 409, "reservation_not_ended")

	// Out of stock: all or nothing, naming the line.
	gone := e.hold("gone", line("A1", 1), line("B1", 1)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+gone+"/release", e.shop, nil).status)
	require.Equal(t, 201, e.hold("taker", line("B1", 1)).status)
	before := e.counts()
	p = requireProblem(t, e.do("POST", "/v1/reservations/"+gone+"/reinstate", e.shop, nil), 409, "out_of_stock")
	require.Equal(t, "B1", p["sku"])
	require.Equal(t, before, e.counts(), "nothing held")

	other, err := createKey(e, "shop-b")
	require.NoError(t, err)
	requireProblem(t, e.do("POST", "/v1/reservations/"+gone+"/reinstate", other, nil), 404, "not_found")
	requireProblem(t, e.do("POST", "/v1/reservations/not-an-id/reinstate", e.shop, nil), 400, "invalid_request")

	// Who reinstated is on the new hold's ledger rows: the shop itself, or
	// an operator (with the key that authenticated them), never the shop
	// for an operator's act.
	reserveRow := func(hold string) map[string]any {
		t.Helper()
		for _, m := range e.do("GET", "/v1/skus/A1/ledger?limit=100", e.ops, nil).json(t)["movements"].([]any) {
			if mv := m.(map[string]any); mv["kind"] == "reserve" && mv["reservation_id"] == hold {
				return mv
			}
		}
		t.Fatalf("no reserve row of %s", hold)
		return nil
	}
	row := reserveRow(newID)
	require.Equal(t, "shop-a", row["actor"])
	require.Equal(t, "shop-a", row["actor_key"])
	late := e.hold("late-2", line("A1", 1)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+late+"/release", e.shop, nil).status)
	r = e.do("POST", "/v1/reservations/"+late+"/reinstate", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	byOps := r.json(t)["id"].(string)
	row = reserveRow(byOps)
	require.Equal(t, "alice", row["actor"], "the operator, not the shop")
	require.Equal(t, "alice", row["actor_key"])
	require.Nil(t, reserveRow(late)["actor_key"], "a shop's own hold, as before")
	require.Equal(t, 200, e.do("GET", "/v1/reservations/"+byOps, e.shop, nil).status, "still the shop's hold")
}

// TestListExpiringHolds lists the holds about to expire, soonest first:
// ops see every client's, a shop its own.
func TestListExpiringHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 100)
	other, err := createKey(e, "shop-b")
	require.NoError(t, err)
	mk := func(token, key string, ttl int) string {
		r := e.do("POST", "/v1/reservations", token, map[string]any{"order_ref": key, "items": []any{line("A1", 1)}, "ttl_seconds": ttl}, "Idempotency-Key", key)
		require.Equal(t, 201, r.status, "%s", r.body)
		return r.json(t)["id"].(string)
	}
	late := mk(e.shop, "late", 3000)
	soon := mk(other, "soon", 60)
	mid := mk(e.shop, "mid", 300)
	mk(e.shop, "later", 3000)
	confirmed := mk(e.shop, "paid", 120)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+confirmed+"/confirm", e.shop, nil).status)
	_ = late

	before := url.QueryEscape(time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339))
	ids := func(token, query string) []string {
		r := e.do("GET", "/v1/reservations?"+query, token, nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var out []string
		for _, h := range r.json(t)["reservations"].([]any) {
			out = append(out, h.(map[string]any)["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{soon, mid}, ids(e.ops, "status=held&expires_before="+before))
	require.Equal(t, []string{soon, confirmed, mid}, ids(e.ops, "expires_before="+before))
	require.Equal(t, []string{mid}, ids(e.shop, "status=held&expires_before="+before))
	require.Equal(t, []string{soon}, ids(e.ops, "status=held&limit=1&expires_before="+before))
	page := e.do("GET", "/v1/reservations?status=held&limit=1&expires_before="+before, e.ops, nil).json(t)
	require.Equal(t, []string{mid}, ids(e.ops, fmt.Sprintf("status=held&limit=1&expires_before=%s&cursor=%s", before, page["next_cursor"])))
	requireProblem(t, e.do("GET", "/v1/reservations?expires_before=tomorrow", e.ops, nil), 400, "invalid_request")

	// A cursor is scoped to the caller: another shop's hold (whose expiry
	// it would place) and a hold that does not exist are 400, not a page.
	for _, cursor := range []string{soon, "0190f0a0-0000-7000-8000-000000000000"} {
		requireProblem(t, e.do("GET", fmt.Sprintf("/v1/reservations?expires_before=%s&cursor=%s", before, cursor), e.shop, nil), 400, "invalid_request")
	}
	requireProblem(t, e.do("GET", fmt.Sprintf("/v1/reservations?expires_before=%s&cursor=%s", before, "0190f0a0-0000-7000-8000-000000000000"), e.ops, nil),
		400, "invalid_request")
	require.Equal(t, []string{mid}, ids(e.shop, fmt.Sprintf("expires_before=%s&cursor=%s", before, confirmed)), "its own hold as the cursor")
	require.Empty(t, ids(other, fmt.Sprintf("expires_before=%s&cursor=%s", before, soon)), "its own hold as the cursor")
}

// TestTakeAlert assigns an owner, recorded with the key; the alert stays
// open.
func TestTakeAlert(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	id := e.hold("late", line("A1", 1)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/release", e.shop, nil).status)
	requireProblem(t, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil), 409, "reservation_not_held")
	a, ok := findAlert(t, e, "late_confirmation", "hold:"+id)
	require.True(t, ok)
	require.Nil(t, a["owner"])
	path := fmt.Sprintf("/v1/alerts/%v/take", a["id"])
	requireProblem(t, e.do("POST", path, e.ops, map[string]any{"operator": ""}), 422, "invalid_request")
	r := e.do("POST", path, e.ops, map[string]any{"operator": "bob"})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, "bob", got["owner"])
	require.Equal(t, "alice", got["owner_key"])
	require.Equal(t, "open", got["status"])
	require.NotNil(t, got["taken_at"])
	requireProblem(t, e.do("POST", "/v1/alerts/999999/take", e.ops, nil), 404, "not_found")
}

// TestRepairOfAPoolOfUnits: a pool of units can only have its units as
// its counters, so a repair whose result would not (to the ledger, when a
// ledger row was added by hand) is 409 serialized_pool for its dry run and
// its apply alike, saying what can repair it, and changes nothing; the
// repair to the counters, which are the units, applies. Before, the dry
// run showed a change that could never apply, and the apply was a 500.
func TestRepairOfAPoolOfUnits(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	plan := []map[string]any{{"id": "A-1"}, {"id": "A-2"}, {"id": "A-3"}}
	require.Equal(t, 200, e.do("POST", "/v1/skus/SHOW/units", e.ops, map[string]any{"reason": "plan", "units": plan}, "Idempotency-Key", "plan").status)
	_, err := e.pool.Exec(ctx, `
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
		SELECT sku, pool, 'adjust', 2, 2, 0, 0, version, 'mallory' FROM stock WHERE sku = 'SHOW'`)
	require.NoError(t, err)

	before := e.counts()
	for _, dry := range []bool{true, false} {
		p := requireProblem(t, e.do("POST", "/v1/skus/SHOW/repair", e.ops, map[string]any{"to": "ledger", "reason": "x", "dry_run": dry}),
			409, "serialized_pool")
		require.Contains(t, p["detail"], "repair to the counters")
		require.Equal(t, map[string]any{"available": 3.0, "held": 0.0, "sold": 0.0}, p["unit_counts"])
		require.Equal(t, before, e.counts(), "nothing changed")
	}
	r := e.do("POST", "/v1/skus/SHOW/repair", e.ops, map[string]any{"to": "counters", "reason": "the row was a typo"})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, states(-2.0, -2.0, 0.0, 0.0), r.json(t)["difference"])
	require.EqualValues(t, 0, r.json(t)["reconciliation"].(map[string]any)["high_risk"])

	// A seat retired behind the triggers: neither side is the units.
	conn, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica; UPDATE units SET status = 'retired' WHERE sku = 'SHOW' AND id = 'A-2'; RESET session_replication_role`)
	require.NoError(t, err)
	for _, to := range []string{"ledger", "counters"} {
		p := requireProblem(t, e.do("POST", "/v1/skus/SHOW/repair", e.ops, map[string]any{"to": to, "reason": "x"}), 409, "serialized_pool")
		require.Contains(t, p["detail"], "put them back")
	}
	_, err = conn.Exec(ctx, `SET session_replication_role = replica; UPDATE units SET status = 'available' WHERE sku = 'SHOW' AND id = 'A-2'; RESET session_replication_role`)
	require.NoError(t, err)
}

// states is a pool's counters as the answers give them: every state, those
// not for sale (and incoming) at zero.
func states(total, available, reserved, sold float64) map[string]any {
	return map[string]any{"total": total, "available": available, "reserved": reserved, "sold": sold,
		"quality_control": 0.0, "damaged": 0.0, "safety_stock": 0.0, "incoming": 0.0, "short": 0.0}
}

// TestPromiseDriftGatesResumeAndIsRepaired: a row whose backordered (units
// promised past what it had on hand) drifted from what its ledger's
// delta_backordered sum to, by a hand edit, is paused by reconciliation;
// its resume is refused 409 books_unbalanced naming the promise while it
// is off; a repair to the ledger sets it back in one transaction with its
// ledger row, and then the gate lets the pool resume with balanced books.
func TestPromiseDriftGatesResumeAndIsRepaired(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("PRE", 2)
	r := e.do("PUT", "/v1/skus/PRE/backorders", e.ops, map[string]any{"below_zero": 5})
	require.Equal(t, 200, r.status, "%s", r.body)
	h := e.hold("pre-1", line("PRE", 4))
	require.Equal(t, 201, h.status, "%s", h.body)
	require.EqualValues(t, 2, e.row("PRE", "default", "main")["backordered"])

	// The promise counter forgets 2 units: every CHECK still holds (and
	// the pool could promise them again), the ledger and the lines do not.
	_, err := e.pool.Exec(ctx, `UPDATE stock SET backordered = backordered - 2 WHERE sku = 'PRE' AND pool = 'main'`)
	require.NoError(t, err)
	_, err = e.rec.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, "paused", e.pool0("PRE")["status"], "reconciliation pauses the drifted promise")

	p := requireProblem(t, e.do("POST", "/v1/skus/PRE/resume", e.ops, map[string]any{"reason": "counted"}), 409, "books_unbalanced")
	require.EqualValues(t, -2, p["difference"].(map[string]any)["backordered"], "%v", p)
	require.EqualValues(t, 2, p["ledger"].(map[string]any)["backordered"], "%v", p)
	require.EqualValues(t, 2, p["lines"].(map[string]any)["backordered"], "%v", p)
	require.Contains(t, p["detail"], "backordered 0 against 2 by the ledger")
	require.Equal(t, "paused", e.pool0("PRE")["status"], "the pool stays paused while the promise is off")

	r = e.do("POST", "/v1/skus/PRE/repair", e.ops, map[string]any{"to": "ledger", "reason": "promise edited by hand", "dry_run": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	preview := r.json(t)
	require.EqualValues(t, 2, preview["difference"].(map[string]any)["backordered"], "%s", r.body)
	require.Equal(t, false, preview["applied"])
	r = e.do("POST", "/v1/skus/PRE/repair", e.ops, map[string]any{"to": "ledger", "reason": "promise edited by hand",
		"expected_difference": preview["difference"]})
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, true, got["applied"])
	require.EqualValues(t, 2, got["after"].(map[string]any)["backordered"], "%s", r.body)

	var counter, ledger int64
	var repairs int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT s.backordered,
	        (SELECT sum(g.delta_backordered) FROM ledger g WHERE g.sku = s.sku AND g.location = s.location AND g.pool = s.pool),
	        (SELECT count(*) FROM ledger g WHERE g.sku = s.sku AND g.kind = 'repair' AND g.stock_version = s.version)
	    FROM stock s WHERE s.sku = 'PRE' AND s.pool = 'main'`).Scan(&counter, &ledger, &repairs))
	require.EqualValues(t, 2, counter)
	require.Equal(t, ledger, counter, "the repair sets the counter to what the ledger says")
	require.Equal(t, 1, repairs, "with its ledger row, at the version it made")

	r = e.do("POST", "/v1/skus/PRE/resume", e.ops, map[string]any{"reason": "promise repaired"})
	require.Equal(t, 200, r.status, "%s", r.body)
	run := r.json(t)["reconciliation"].(map[string]any)
	require.Equal(t, "succeeded", run["status"])
	require.EqualValues(t, 0, run["high_risk"])
	var ok bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT ok FROM stock_health WHERE sku = 'PRE' AND pool = 'main'`).Scan(&ok))
	require.True(t, ok, "the books balance")
}

// TestPromiseRepairToCountersWritesItsDelta: a repair to the counters of a
// drifted promise writes one ledger row whose delta_backordered is the
// counter minus the ledger, so the ledger then sums to the counter.
func TestPromiseRepairToCountersWritesItsDelta(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("PRC", 2)
	r := e.do("PUT", "/v1/skus/PRC/backorders", e.ops, map[string]any{"below_zero": 5})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, 201, e.hold("prc-1", line("PRC", 3)).status)
	_, err := e.pool.Exec(ctx, `UPDATE stock SET backordered = backordered + 1 WHERE sku = 'PRC' AND pool = 'main'`)
	require.NoError(t, err)
	r = e.do("POST", "/v1/skus/PRC/repair", e.ops, map[string]any{"to": "counters", "reason": "promise accepted"})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.EqualValues(t, 1, r.json(t)["difference"].(map[string]any)["backordered"], "%s", r.body)
	var counter, ledger, delta int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT s.backordered,
	        (SELECT sum(g.delta_backordered) FROM ledger g WHERE g.sku = s.sku AND g.location = s.location AND g.pool = s.pool),
	        (SELECT g.delta_backordered FROM ledger g WHERE g.sku = s.sku AND g.kind = 'repair')
	    FROM stock s WHERE s.sku = 'PRC' AND s.pool = 'main'`).Scan(&counter, &ledger, &delta))
	require.EqualValues(t, 2, counter)
	require.EqualValues(t, 1, delta)
	require.Equal(t, counter, ledger)
	// The lines still promise 1: the gate stays shut until the counter is
	// put back and accepted again (a row of delta_backordered -1).
	p := requireProblem(t, e.do("POST", "/v1/skus/PRC/resume", e.ops, map[string]any{"reason": "accepted"}), 409, "books_unbalanced")
	require.Contains(t, p["detail"], "backordered 2 against 2 by the ledger and 1 promised on the lines")
	_, err = e.pool.Exec(ctx, `UPDATE stock SET backordered = 1 WHERE sku = 'PRC' AND pool = 'main'`)
	require.NoError(t, err)
	r = e.do("POST", "/v1/skus/PRC/repair", e.ops, map[string]any{"to": "counters", "reason": "promise put back"})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.EqualValues(t, -1, r.json(t)["difference"].(map[string]any)["backordered"], "%s", r.body)
}
