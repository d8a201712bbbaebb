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

// TestCampaignEndsAtAnotherLocation, over HTTP: stock +10 at paris, a campaign whose allotment is 6 at paris, a
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

// TestEndedCampaignStrandsNothing, over HTTP: in a campaign's pool at default, 3 and 1 sent to berlin and 1
// moved to quality control; the campaign ends; then the first transfer is
// received and the second cancelled. Every unit ends in main, in the state
// it was in (the 5 used to stay in the ended campaign's pools for ever,
// out of sight of GET /v1/skus/{sku}); the sold one stays in the pool as
// sold; and from the end on no write goes into or out of its pools.
func TestEndedCampaignStrandsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	key := func(k string) []string { return []string{"Idempotency-Key", k} }
	ok := func(status int, r resp) map[string]any {
		t.Helper()
		require.Equal(t, status, r.status, "%s", r.body)
		return r.json(t)
	}
	require.Equal(t, 201, e.do("POST", "/v1/locations", e.ops, map[string]any{"id": "berlin", "name": "Berlin", "priority": 2}, key("l")...).status)
	e.stockIn("A1", 12)
	ok(201, e.do("POST", "/v1/campaigns", e.ops, campaignBody("bf", "", map[string]any{"sku": "A1", "quantity": 10}), key("c")...))
	require.NoError(t, e.camps.Start(ctx, "bf"))
	sold := ok(201, e.do("POST", "/v1/reservations", e.shop, map[string]any{"campaign": "bf", "items": []any{line("A1", 1)}}, key("h")...))
	ok(200, e.do("POST", "/v1/reservations/"+sold["id"].(string)+"/confirm", e.shop, nil))

	first := ok(201, e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "pool": "bf", "from": "default", "to": "berlin", "quantity": 3, "reason": "x"}, key("t1")...))
	second := ok(201, e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "pool": "bf", "from": "default", "to": "berlin", "quantity": 1, "reason": "x"}, key("t2")...))
	ok(200, e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"pool": "bf", "from": "available", "to": "quality_control", "quantity": 1, "reason": "x"}, key("m")...))
	e.endCampaign("bf")

	camp := ok(200, e.do("GET", "/v1/campaigns/bf", e.ops, nil))
	require.Equal(t, "rolled_back", camp["status"])
	require.Equal(t, []any{
		map[string]any{"sku": "A1", "location": "berlin", "total": 0.0, "available": 0.0, "reserved": 0.0, "sold": 0.0,
			"quality_control": 0.0, "damaged": 0.0, "safety_stock": 0.0, "incoming": 4.0, "status": "paused"},
		map[string]any{"sku": "A1", "location": "default", "total": 1.0, "available": 0.0, "reserved": 0.0, "sold": 1.0,
			"quality_control": 0.0, "damaged": 0.0, "safety_stock": 0.0, "incoming": 0.0, "status": "paused"},
	}, camp["pools"], "all on hand went back, every state; the sold unit stays; 4 in transit")
	main := e.row("A1", "default", "main")
	require.EqualValues(t, 6, main["available"], "2 never carved + 4 given back: %v", main)
	require.EqualValues(t, 1, main["quality_control"], "the moved unit, in its state")
	require.NotNil(t, e.row("A1", "berlin", "bf"), "a row with units in transit stays in sight")
	require.Nil(t, e.row("A1", "default", "bf"), "a row holding only what it sold is history")

	// From the end on: nothing into or out of its pools.
	for name, r := range map[string]resp{
		"transfer": e.do("POST", "/v1/transfers", e.ops, map[string]any{"sku": "A1", "pool": "bf", "from": "berlin", "to": "default", "quantity": 1, "reason": "x"}, key("t3")...),
		"move":     e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"pool": "bf", "from": "available", "to": "damaged", "quantity": 1, "reason": "x"}, key("m2")...),
		"dry move": e.do("POST", "/v1/skus/A1/moves", e.ops, map[string]any{"pool": "bf", "from": "available", "to": "damaged", "quantity": 1, "reason": "x", "dry_run": true}),
		"adjust":   e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"pool": "bf", "delta": 1, "reason": "x"}, key("a")...),
		"take":     e.do("POST", "/v1/skus/A1/adjustments", e.ops, map[string]any{"pool": "bf", "delta": -1, "reason": "x"}, key("a2")...),
		"bulk": e.do("POST", "/v1/stock/adjustments", e.ops, map[string]any{"reason": "x", "lines": []any{
			map[string]any{"sku": "A1", "delta": 1}, map[string]any{"sku": "A1", "pool": "bf", "delta": 1}}}, key("b")...),
		"count": e.do("POST", "/v1/skus/A1/counts", e.ops, map[string]any{"pool": "bf", "counted": 3, "reason": "x"}, key("n")...),
		"units": e.do("POST", "/v1/skus/A1/units", e.ops, map[string]any{"pool": "bf", "reason": "x", "units": []any{map[string]any{"id": "U1"}}}, key("u")...),
	} {
		p := requireProblem(t, r, 409, "campaign_ended")
		require.Equal(t, "bf", p["pool"], name)
	}

	// The transfers in transit land in main: received at berlin, cancelled
	// back at default.
	ok(200, e.do("POST", "/v1/transfers/"+first["id"].(string)+"/receive", e.ops, map[string]any{"quantity": 3}))
	ok(200, e.do("POST", "/v1/transfers/"+second["id"].(string)+"/cancel", e.ops, map[string]any{"reason": "not needed"}))
	require.EqualValues(t, 3, e.row("A1", "berlin", "main")["available"])
	require.EqualValues(t, 7, e.row("A1", "default", "main")["available"])
	require.Nil(t, e.row("A1", "berlin", "bf"), "nothing left in transit: history")
	var onHand, inTransit, sold1 int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT coalesce(sum(total - sold), 0), coalesce(sum(incoming), 0), coalesce(sum(sold), 0) FROM stock WHERE pool = 'bf'`).Scan(&onHand, &inTransit, &sold1))
	require.Equal(t, [3]int64{0, 0, 1}, [3]int64{onHand, inTransit, sold1}, "the ended campaign's pools hold only what it sold")
	var total int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT sum(total) FROM stock WHERE sku = 'A1'`).Scan(&total))
	require.EqualValues(t, 12, total, "no unit lost")
}
