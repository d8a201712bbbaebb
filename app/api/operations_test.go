package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// These run without workers: they check what the API records and enqueues;
// jobs/ tests run the work itself.

func TestCampaignsAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("FLASH", 50)
	body := map[string]any{
		"id": "bf", "starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"ends_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), "hold_ttl_seconds": 120,
		"allotments": []any{map[string]any{"sku": "FLASH", "quantity": 20}},
	}
	r := e.do("POST", "/v1/campaigns", e.ops, body, "Idempotency-Key", "camp-1")
	require.Equal(t, 201, r.status, "%s", r.body)
	c := r.json(t)
	require.Equal(t, "scheduled", c["status"])
	require.EqualValues(t, 120, c["hold_ttl_seconds"])
	again := e.do("POST", "/v1/campaigns", e.ops, body, "Idempotency-Key", "camp-1")
	require.Equal(t, 201, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(r.body), string(again.body))
	requireProblem(t, e.do("POST", "/v1/campaigns", e.ops, body, "Idempotency-Key", "camp-2"), 409, "conflict")

	// Start and end are scheduled with the campaign.
	jobs := rivertest.RequireManyInserted(context.Background(), t, riverpgxv5.New(e.pool), []rivertest.ExpectedJob{
		{Args: campaigns.CampaignStartArgs{}}, {Args: campaigns.CampaignEndArgs{}},
	})
	require.JSONEq(t, `{"campaign": "bf"}`, string(jobs[0].EncodedArgs))
	require.JSONEq(t, `{"campaign": "bf"}`, string(jobs[1].EncodedArgs))

	p := requireProblem(t, e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": []any{line("FLASH", 1)}}, "Idempotency-Key", "h1"), 409, "campaign_not_active")
	require.Equal(t, "FLASH", p["sku"])

	end := e.do("POST", "/v1/campaigns/bf/end", e.ops, map[string]any{"operator": "alice", "reason": "cancelled"})
	require.Equal(t, 202, end.status, "%s", end.body)
	require.Positive(t, end.json(t)["rollback_id"])
	require.Positive(t, end.json(t)["job_id"])
	got := e.do("GET", "/v1/campaigns/bf", e.ops, nil).json(t)
	require.Equal(t, "ended", got["status"])
	require.Equal(t, "alice", got["ended_by"])
	require.Equal(t, "campaign_end", got["rollback"].(map[string]any)["source"])

	requireProblem(t, e.do("GET", "/v1/campaigns/nope", e.ops, nil), 404, "unknown_campaign")
	requireProblem(t, e.do("POST", "/v1/campaigns/nope/end", e.ops, nil), 404, "unknown_campaign")
	bad := map[string]any{"id": "x", "starts_at": "2030-01-01T00:00:00Z", "ends_at": "2029-01-01T00:00:00Z", "hold_ttl_seconds": 60,
		"allotments": []any{map[string]any{"sku": "FLASH", "quantity": 1}}}
	requireProblem(t, e.do("POST", "/v1/campaigns", e.ops, bad, "Idempotency-Key", "camp-3"), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/campaigns", e.shop, body, "Idempotency-Key", "camp-4"), 403, "forbidden")
}

func TestRollbacksAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	id := e.hold("h", line("A1", 1)).json(t)["id"].(string)

	body := map[string]any{"operator": "alice", "reason": "fraud", "reservation_ids": []string{id}}
	r := e.do("POST", "/v1/rollbacks", e.ops, body, "Idempotency-Key", "rb-1")
	require.Equal(t, 202, r.status, "%s", r.body)
	created := r.json(t)
	rid := fmt.Sprint(created["rollback_id"])
	got := e.do("GET", "/v1/rollbacks/"+rid, e.ops, nil)
	require.Equal(t, 200, got.status)
	g := got.json(t)
	require.Equal(t, "pending", g["status"])
	require.Equal(t, "alice", g["operator"])
	require.Equal(t, "fraud", g["reason"])
	require.Equal(t, "http", g["source"])
	require.Equal(t, created["job_id"], g["job_id"])
	require.Equal(t, []any{id}, g["scope"].(map[string]any)["reservation_ids"])

	job := rivertest.RequireInserted(context.Background(), t, riverpgxv5.New(e.pool), rollbacks.ManualRollbackArgs{}, nil)
	require.EqualValues(t, created["job_id"], job.ID)

	replay := e.do("POST", "/v1/rollbacks", e.ops, body, "Idempotency-Key", "rb-1")
	require.Equal(t, 202, replay.status)
	require.JSONEq(t, string(r.body), string(replay.body))

	// A cut-off of its own, with a campaign's scope as with any: shown
	// with the scope.
	cut := time.Now().Add(-time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	r = e.do("POST", "/v1/rollbacks", e.ops, map[string]any{"operator": "alice", "reason": "x", "campaign": "c1", "cutoff": cut, "dry_run": true},
		"Idempotency-Key", "rb-cut")
	require.Equal(t, 202, r.status, "%s", r.body)
	got = e.do("GET", fmt.Sprint("/v1/rollbacks/", r.json(t)["rollback_id"]), e.ops, nil)
	require.Equal(t, cut, got.json(t)["scope"].(map[string]any)["cutoff"])

	// A location's lines, or a SKU's at one location: both scopes the
	// document admits; a location that does not exist is refused.
	require.Equal(t, 201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "paris", "name": "Paris"}, "Idempotency-Key", "loc-paris").status)
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for name, b := range map[string]map[string]any{
		"location":        {"operator": "alice", "reason": "x", "location": "paris", "held_before": past, "dry_run": true},
		"sku at location": {"operator": "alice", "reason": "x", "sku": "A1", "location": "paris", "dry_run": true},
	} {
		r := e.do("POST", "/v1/rollbacks", e.ops, b, "Idempotency-Key", "rb-"+name)
		require.Equal(t, 202, r.status, "%s: %s", name, r.body)
		got := e.do("GET", fmt.Sprint("/v1/rollbacks/", r.json(t)["rollback_id"]), e.ops, nil).json(t)
		require.Equal(t, "paris", got["scope"].(map[string]any)["location"], name)
	}

	before := e.counts()
	for name, b := range map[string]map[string]any{
		"nowhere":        {"operator": "alice", "reason": "x", "location": "madrid"},
		"sku at nowhere": {"operator": "alice", "reason": "x", "sku": "A1", "location": "madrid"},
	} {
		p := requireProblem(t, e.do("POST", "/v1/rollbacks", e.ops, b, "Idempotency-Key", "rb-"+name), 422, "unknown_location")
		require.Equal(t, "madrid", p["location"], name)
	}
	for name, b := range map[string]map[string]any{
		"no operator": {"reason": "x", "campaign": "c1"},
		"no reason":   {"operator": "alice", "campaign": "c1"},
		"no scope":    {"operator": "alice", "reason": "x"},
		"two scopes":  {"operator": "alice", "reason": "x", "campaign": "c1", "sku": "A1"},
		"pool alone":  {"operator": "alice", "reason": "x", "pool": "main"},
		"no ids":      {"operator": "alice", "reason": "x", "reservation_ids": []string{}},
		"ids and sku": {"operator": "alice", "reason": "x", "reservation_ids": []string{}, "sku": "A1"},
		"no campaign": {"operator": "alice", "reason": "x", "campaign": "", "sku": "A1"},
		"no pool":     {"operator": "alice", "reason": "x", "sku": "A1", "pool": ""},
		"the future":  {"operator": "alice", "reason": "x", "sku": "A1", "held_before": "2100-01-01T00:00:00Z"},
		"an hour on":  {"operator": "alice", "reason": "x", "sku": "A1", "held_before": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		"cut later":   {"operator": "alice", "reason": "x", "reservation_ids": []string{id}, "cutoff": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	} {
		p := requireProblem(t, e.do("POST", "/v1/rollbacks", e.ops, b, "Idempotency-Key", "rb-"+name), 422, "invalid_request")
		require.NotEmpty(t, p["detail"], name)
	}
	requireProblem(t, e.do("POST", "/v1/rollbacks", e.ops, map[string]any{"operator": "a", "reason": "b", "reservation_ids": []string{"nope"}}, "Idempotency-Key", "rb-x"), 400, "invalid_request")
	require.Equal(t, before, e.counts())
	requireProblem(t, e.do("GET", "/v1/rollbacks/999999", e.ops, nil), 404, "not_found")
	requireProblem(t, e.do("GET", "/v1/rollbacks/abc", e.ops, nil), 400, "invalid_request")
}

func TestResumeRollbackAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("A1", 10)
	id := e.hold("h", line("A1", 1)).json(t)["id"].(string)
	created := e.do("POST", "/v1/rollbacks", e.ops, map[string]any{"operator": "alice", "reason": "fraud", "reservation_ids": []string{id}},
		"Idempotency-Key", "rb-1").json(t)
	path := fmt.Sprintf("/v1/rollbacks/%v/resume", created["rollback_id"])

	// Its manual_rollback job is still to run: nothing to resume.
	r := e.do("POST", path, e.ops, nil)
	require.Equal(t, 202, r.status, "%s", r.body)
	require.Equal(t, false, r.json(t)["resumed"])
	require.Equal(t, created["job_id"], r.json(t)["job_id"])
	require.Equal(t, "pending", r.json(t)["status"])

	// Its job is cancelled from the dashboard: the request is stranded.
	_, err := e.pool.Exec(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE id = $1`, created["job_id"])
	require.NoError(t, err)
	r = e.do("POST", path, e.ops, map[string]any{"operator": "bob"})
	require.Equal(t, 202, r.status, "%s", r.body)
	resumed := r.json(t)
	require.Equal(t, true, resumed["resumed"])
	require.Equal(t, "running", resumed["status"])
	require.NotEqual(t, created["job_id"], resumed["job_id"])
	var kind, state string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT kind, state FROM river_job WHERE id = $1`, resumed["job_id"]).Scan(&kind, &state))
	require.Equal(t, []string{"rollback_batch", "available"}, []string{kind, state})

	// Again: idempotent, the same job carries it on.
	again := e.do("POST", path, e.ops, nil)
	require.Equal(t, 202, again.status)
	require.Equal(t, false, again.json(t)["resumed"])
	require.Equal(t, resumed["job_id"], again.json(t)["job_id"])
	got := e.do("GET", fmt.Sprintf("/v1/rollbacks/%v", created["rollback_id"]), e.ops, nil).json(t)
	require.EqualValues(t, 1, got["resumes"])
	require.Equal(t, "bob", got["resumed_by"])
	require.NotEmpty(t, got["requested_at"])

	requireProblem(t, e.do("POST", "/v1/rollbacks/999999/resume", e.ops, nil), 404, "not_found")
	requireProblem(t, e.do("POST", "/v1/rollbacks/abc/resume", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("POST", path, e.ops, map[string]any{"operator": "a/b"}), 422, "invalid_request")
	requireProblem(t, e.do("POST", path, e.ops, map[string]any{"who": "bob"}), 400, "invalid_request")
	requireProblem(t, e.do("POST", path, e.shop, nil), 403, "forbidden")
}

func TestAlertsAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	raise := alerts.Raise{Level: alerts.Critical, Kind: "books_out_of_balance", Subject: "sku:A1/main", SKU: "A1", Pool: "main",
		Details: map[string]any{"reserved": 3}, Action: "look"}
	first, err := e.alerts.Raise(ctx, raise)
	require.NoError(t, err)
	second, err := e.alerts.Raise(ctx, raise)
	require.NoError(t, err)
	require.Equal(t, first.ID, second.ID, "one open alert per kind and subject")
	require.EqualValues(t, 2, second.Occurrences)

	list := e.do("GET", "/v1/alerts?status=open", e.ops, nil)
	require.Equal(t, 200, list.status)
	items := list.json(t)["alerts"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "critical", items[0].(map[string]any)["level"])
	require.Equal(t, "A1", items[0].(map[string]any)["sku"])

	ack := e.do("POST", fmt.Sprintf("/v1/alerts/%d/ack", first.ID), e.ops, map[string]any{"operator": "alice"})
	require.Equal(t, 200, ack.status, "%s", ack.body)
	require.Equal(t, "acked", ack.json(t)["status"])
	require.Equal(t, "alice", ack.json(t)["acked_by"])
	require.Empty(t, e.do("GET", "/v1/alerts?status=open", e.ops, nil).json(t)["alerts"])
	third, err := e.alerts.Raise(ctx, raise)
	require.NoError(t, err)
	require.NotEqual(t, first.ID, third.ID, "after an ack, a new occurrence opens a new alert")

	requireProblem(t, e.do("GET", "/v1/alerts?status=closed", e.ops, nil), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/alerts/999999/ack", e.ops, map[string]any{"operator": "alice"}), 404, "not_found")
	requireProblem(t, e.do("GET", "/v1/alerts", e.shop, nil), 403, "forbidden")
}

// TestOperatorActionsRecordTheKey: any ops key may claim any operator, so
// every operator action records, beside the claim, the key that
// authenticated it, and shows it: a rollback and its resume, a campaign's
// end, an alert's acknowledgement, and the ledger rows of adjustments
// (single and bulk), pauses and resumes.
func TestOperatorActionsRecordTheKey(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	bob, err := auth.Create(ctx, e.pool, "ops-bob", auth.RoleOps)
	require.NoError(t, err)
	claim := map[string]any{"operator": "alice", "reason": "says alice"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range claim {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	// Adjustments, bulk adjustments, pause and resume: the ledger rows.
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/adjustments", bob, map[string]any{"delta": 10, "reason": "restock"},
		"Idempotency-Key", "adj").status)
	require.Equal(t, 200, e.do("POST", "/v1/stock/adjustments", bob, map[string]any{"reason": "count",
		"lines": []any{map[string]any{"sku": "A1", "delta": 1}}}, "Idempotency-Key", "bulk").status)
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/pause", bob, map[string]any{"reason": "audit"}).status)
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/resume", bob, map[string]any{"reason": "audited"}).status)
	ledger := e.do("GET", "/v1/skus/A1/ledger", e.ops, nil).json(t)["movements"].([]any)
	require.Len(t, ledger, 4)
	for _, m := range ledger {
		require.Equal(t, "ops-bob", m.(map[string]any)["actor_key"], "%v", m)
	}

	// A rollback claimed for alice, sent with bob's key; then resumed.
	id := e.hold("h", line("A1", 1)).json(t)["id"].(string)
	r := e.do("POST", "/v1/rollbacks", bob, with(map[string]any{"reservation_ids": []string{id}}), "Idempotency-Key", "rb")
	require.Equal(t, 202, r.status, "%s", r.body)
	rid := fmt.Sprint(r.json(t)["rollback_id"])
	_, err = e.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'manual_rollback'`)
	require.NoError(t, err)
	require.Equal(t, 202, e.do("POST", "/v1/rollbacks/"+rid+"/resume", e.ops, map[string]any{"operator": "carol"}).status)
	got := e.do("GET", "/v1/rollbacks/"+rid, e.ops, nil).json(t)
	require.Equal(t, "alice", got["operator"])
	require.Equal(t, "ops-bob", got["operator_key"])
	require.Equal(t, "carol", got["resumed_by"])
	require.Equal(t, "alice", got["resumed_key"])

	// A campaign's end.
	require.Equal(t, 201, e.do("POST", "/v1/campaigns", e.ops, map[string]any{
		"id": "bf", "starts_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"ends_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), "hold_ttl_seconds": 120,
		"allotments": []any{map[string]any{"sku": "A1", "quantity": 1}},
	}, "Idempotency-Key", "camp").status)
	require.Equal(t, 202, e.do("POST", "/v1/campaigns/bf/end", bob, claim).status)
	camp := e.do("GET", "/v1/campaigns/bf", e.ops, nil).json(t)
	require.Equal(t, "alice", camp["ended_by"])
	require.Equal(t, "ops-bob", camp["ended_key"])
	require.Equal(t, "ops-bob", camp["rollback"].(map[string]any)["operator_key"], "the end's rollback too")

	// An alert's acknowledgement.
	a, err := e.alerts.Raise(ctx, alerts.Raise{Level: alerts.Warning, Kind: "late_confirmation", Subject: "x"})
	require.NoError(t, err)
	acked := e.do("POST", fmt.Sprint("/v1/alerts/", a.ID, "/ack"), bob, map[string]any{"operator": "alice"})
	require.Equal(t, 200, acked.status, "%s", acked.body)
	require.Equal(t, "alice", acked.json(t)["acked_by"])
	require.Equal(t, "ops-bob", acked.json(t)["acked_key"])

	var stored string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT concat_ws(' ', (SELECT operator_key FROM rollback_requests WHERE id = $1),
		(SELECT ended_key FROM campaigns WHERE id = 'bf'), (SELECT acked_key FROM alerts WHERE id = $2),
		(SELECT min(actor_key) FROM ledger WHERE kind = 'pause'))`, rid, a.ID).Scan(&stored))
	require.Equal(t, "ops-bob ops-bob ops-bob ops-bob", stored, "stored in the tables")
}
