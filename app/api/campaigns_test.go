package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// endCampaign ends campaign id over HTTP and plays its rollback's chain
// (the rollback_batch jobs) to the last batch, which finishes it.
func (e *env) endCampaign(id string) {
	e.t.Helper()
	t := e.t
	r := e.do("POST", "/v1/campaigns/"+id+"/end", e.ops, map[string]any{"operator": "alice", "reason": "over"})
	require.Equal(t, 202, r.status, "%s", r.body)
	created := r.json(t)
	job := int64(created["job_id"].(float64))
	for range 10 {
		b, err := e.camps.RollbackBatch(context.Background(), int64(created["rollback_id"].(float64)), job)
		require.NoError(t, err)
		if b.Finished {
			return
		}
		job = b.Next.ID
	}
	t.Fatalf("campaign %s's rollback did not finish", id)
}

// row is the entry of GET /v1/skus/{sku} for (location, pool), nil when
// it lists none.
func (e *env) row(sku, location, pool string) map[string]any {
	e.t.Helper()
	r := e.do("GET", "/v1/skus/"+sku, e.ops, nil)
	require.Equal(e.t, 200, r.status, "%s", r.body)
	for _, p := range r.json(e.t)["pools"].([]any) {
		if m := p.(map[string]any); m["location"] == location && m["pool"] == pool {
			return m
		}
	}
	return nil
}

func campaignBody(id, location string, allotments ...any) map[string]any {
	b := map[string]any{"id": id, "starts_at": time.Now().UTC().Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"hold_ttl_seconds": 600, "allotments": allotments}
	if location != "" {
		b["location"] = location
	}
	return b
}

// TestCampaignEndsAtAnotherLocation replays issue 37's first item over
// HTTP: stock +10 at paris, a campaign whose allotment is 6 at paris, a
// hold in it; its end answers 202 (it was 422 unknown_pool, naming
// default), the campaign takes no more holds, its rollback finishes it and
// its stock is back in main at paris.
func TestCampaignEndsAtAnotherLocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	require.Equal(t, 201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "paris", "name": "Paris", "priority": 2}, key("l")...).status)
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"delta": 10, "location": "paris", "reason": "delivery"}, key("in")...).status)
	r := e.do("POST", "/v1/campaigns", e.ops, campaignBody("bf", "", map[string]any{"sku": "A1", "location": "paris", "quantity": 6}), key("c")...)
	require.Equal(t, 201, r.status, "%s", r.body)
	require.NoError(t, e.camps.Start(ctx, "bf"))
	hold := func(k string) resp {
		return e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": []any{line("A1", 1)}}, key(k)...)
	}
	require.Equal(t, 201, hold("h1").status)

	e.endCampaign("bf")
	requireProblem(t, hold("h2"), 409, "campaign_not_active")
	got := e.do("GET", "/v1/campaigns/bf", e.ops, nil).json(t)
	require.Equal(t, "rolled_back", got["status"])
	main := e.row("A1", "paris", "main")
	require.EqualValues(t, 10, main["available"], "%v", main)
	require.Nil(t, e.row("A1", "default", "main"))
}
