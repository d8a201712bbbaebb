package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/reconcile"
)

func TestReconciliations(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	requireProblem(t, e.do("GET", "/v1/reconciliations/latest", e.ops, nil), 404, "not_found")
	requireProblem(t, e.do("POST", "/v1/reconciliations", e.shop, nil, "Idempotency-Key", "r"), 403, "forbidden")
	requireProblem(t, e.do("GET", "/v1/reconciliations/latest", e.shop, nil), 403, "forbidden")
	requireProblem(t, e.do("POST", "/v1/reconciliations", e.ops, nil), 400, "idempotency_key_missing")

	// A hold the expiry loop missed, an hour past its expiry.
	e.stockIn("A1", 10)
	h := e.hold("h1", line("A1", 2))
	require.Equal(t, 201, h.status, "%s", h.body)
	id := h.json(t)["id"].(string)
	_, err := e.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)

	r := e.do("POST", "/v1/reconciliations", e.ops, nil, "Idempotency-Key", "r1")
	require.Equal(t, 202, r.status, "%s", r.body)
	runID := r.json(t)["run_id"].(float64)
	require.Positive(t, runID)
	require.Positive(t, r.json(t)["job_id"].(float64))
	again := e.do("POST", "/v1/reconciliations", e.ops, nil, "Idempotency-Key", "r1")
	require.Equal(t, 202, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(r.body), string(again.body))
	requireProblem(t, e.do("POST", "/v1/reconciliations", e.ops, map[string]any{"skus": []string{"A1"}}, "Idempotency-Key", "r1"), 422, "idempotency_key_reused")

	latest := e.do("GET", "/v1/reconciliations/latest", e.ops, nil)
	require.Equal(t, 200, latest.status, "%s", latest.body)
	m := latest.json(t)
	require.EqualValues(t, int64(runID), m["id"])
	require.Equal(t, "pending", m["status"])
	require.Equal(t, "http", m["trigger"])
	require.Equal(t, map[string]any{"auto_fix": []any{}, "retry": []any{}, "high_risk": []any{}}, m["findings"])

	// What the reconcile job does.
	_, err = e.rec.Run(ctx, reconcile.ReconcileArgs{RunID: int64(runID)})
	require.NoError(t, err)

	latest = e.do("GET", "/v1/reconciliations/latest", e.ops, nil)
	require.Equal(t, 200, latest.status, "%s", latest.body)
	m = latest.json(t)
	require.Equal(t, "succeeded", m["status"])
	require.EqualValues(t, 1, m["rows_checked"])
	require.EqualValues(t, 1, m["auto_fixed"])
	require.EqualValues(t, 0, m["high_risk"])
	require.Nil(t, m["skus"])
	findings := m["findings"].(map[string]any)
	fix := findings["auto_fix"].([]any)
	require.Len(t, fix, 1)
	f := fix[0].(map[string]any)
	require.Equal(t, "stuck_hold", f["kind"])
	require.Equal(t, "auto_fix", f["class"])
	require.Equal(t, id, f["reservation_id"])
	require.Equal(t, "A1", f["sku"])
	require.Empty(t, findings["high_risk"])
	require.Empty(t, findings["retry"])

	byID := e.do("GET", fmt.Sprintf("/v1/reconciliations/%d", int64(runID)), e.ops, nil)
	require.Equal(t, 200, byID.status)
	require.JSONEq(t, string(latest.body), string(byID.body))
	requireProblem(t, e.do("GET", "/v1/reconciliations/9999", e.ops, nil), 404, "not_found")
	requireProblem(t, e.do("GET", "/v1/reconciliations/abc", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/reconciliations/0", e.ops, nil), 400, "invalid_request")

	hold := e.do("GET", "/v1/reservations/"+id, e.shop, nil)
	require.Equal(t, "expired", hold.json(t)["status"])

	// A run limited to some SKUs; bad bodies create nothing.
	before := e.counts()
	requireProblem(t, e.do("POST", "/v1/reconciliations", e.ops, map[string]any{"skus": []string{"a/b"}}, "Idempotency-Key", "r2"), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/reconciliations", e.ops, `{"skus": "A1"}`, "Idempotency-Key", "r3"), 400, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/reconciliations", e.ops, `{"sku": ["A1"]}`, "Idempotency-Key", "r4"), 400, "invalid_request")
	require.Equal(t, before, e.counts())
	r = e.do("POST", "/v1/reconciliations", e.ops, map[string]any{"skus": []string{"A1", "B2"}}, "Idempotency-Key", "r5")
	require.Equal(t, 202, r.status, "%s", r.body)
	m = e.do("GET", "/v1/reconciliations/latest", e.ops, nil).json(t)
	require.Equal(t, r.json(t)["run_id"], m["id"])
	require.Equal(t, []any{"A1", "B2"}, m["skus"])
}
