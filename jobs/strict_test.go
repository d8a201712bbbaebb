package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/jobs"
)

// insertRawJob enqueues a job of kind with args the way a DBA does, with
// nothing but SQL, and wakes the workers.
func insertRawJob(t *testing.T, b *bundle, kind, args string) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx,
		`INSERT INTO river_job (kind, args, max_attempts) VALUES ($1, $2, 3) RETURNING id`, kind, args).Scan(&id))
	_, err := b.pool.Exec(ctx, `SELECT pg_notify(current_schema() || '.river_insert', '{"queue": "default"}')`)
	require.NoError(t, err)
	return id
}

// requireRefused waits for job id to be cancelled and returns its critical
// alert of kind. A refused job is cancelled on its first attempt: no
// retry can mend its args.
func requireRefused(t *testing.T, b *bundle, id int64, kind string) alerts.Alert {
	t.Helper()
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var state string
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, id).Scan(&state))
		assert.Equal(c, "cancelled", state)
	}, 15*time.Second, 20*time.Millisecond, "job %d", id)
	var attempt int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT attempt FROM river_job WHERE id = $1`, id).Scan(&attempt))
	require.Equal(t, 1, attempt, "cancelled at once, not retried")
	list, err := b.alerts.List(ctx, alerts.StatusOpen, alerts.MaxList)
	require.NoError(t, err)
	for _, a := range list {
		if a.Subject == fmt.Sprintf("job:%d", id) {
			require.Equal(t, kind, a.Kind)
			require.Equal(t, alerts.Critical, a.Level)
			return a
		}
	}
	t.Fatalf("no alert for refused job %d", id)
	return alerts.Alert{}
}

// TestMisspeltManualRollbackIsRefused: plain-SQL rollbacks with misspelt
// args. Decoded leniently, "dryrun", "pol" and "held_befor" would be ignored
// and the job would release every hold of R1 for real, and "dry_run":
// "true" would be retried three times and discarded. Each must be cancelled
// at once, release nothing, and raise a manual_rollback_refused alert
// naming the problem.
func TestMisspeltManualRollbackIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "R1", 10)
	r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "k", Items: []inventory.Item{{SKU: "R1", Quantity: 2}}})
	require.NoError(t, err)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	for _, c := range []struct{ args, names string }{
		{`{"operator":"alice","reason":"count only","dryrun":true,"sku":"R1"}`, `unknown field \"dryrun\"`},
		{`{"operator":"alice","reason":"count only","dry_run":true,"sku":"R1","pol":"main"}`, `unknown field \"pol\"`},
		{`{"operator":"alice","reason":"old ones","sku":"R1","held_befor":"2000-01-01T00:00:00Z"}`, `unknown field \"held_befor\"`},
		{`{"operator":"alice","reason":"count only","dry_run":"true","sku":"R1"}`, `field \"dry_run\": cannot unmarshal string`},
		{`{"operator":"alice","reason":"ambiguous","reservation_ids":[],"sku":"R1"}`, `field \"reservation_ids\" is given empty`},
		{`{"operator":"alice","reason":"ambiguous","campaign":"","sku":"R1"}`, `field \"campaign\" is given empty`},
		{`{"operator":"alice","reason":"the future","sku":"R1","held_before":"` + future + `"}`, `is later than now`},
		{`{"operator":"alice","reason":"the future","sku":"R1","held_before":"2100-01-01T00:00:00Z"}`, `is later than now`},
	} {
		id := insertRawJob(t, b, "manual_rollback", c.args)
		a := requireRefused(t, b, id, jobs.AlertManualRollbackRefused)
		require.Contains(t, string(a.Details), c.names, c.args)
		require.JSONEq(t, c.args, detail(t, a, "args"), "the alert shows the args")
	}
	require.Equal(t, string(inventory.StatusHeld), b.status(t, r.ID), "nothing released")
	require.Zero(t, b.releases(t, r.ID))
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rollback_requests`).Scan(&n))
	require.Zero(t, n, "no request recorded")
}

// TestMalformedJobsOfEveryKindAreRefused inserts one malformed job of each
// kind: each is cancelled at once with a job_args_invalid alert, and its
// worker never runs.
func TestMalformedJobsOfEveryKindAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{reconcile: true, reconcileInterval: time.Hour, retention: time.Hour, retentionInterval: time.Hour})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "k", TTLSeconds: 1, Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.NoError(t, err)

	for _, c := range []struct{ kind, args string }{
		{"rollback_batch", `{"rollback_id": "1"}`},
		{"campaign_start", `{"campaign": "bf", "starts": "now"}`},
		{"campaign_end", `{"campaign": 7}`},
		{"reconcile", `{"trigger": "periodic", "sku": ["A1"]}`},
		{"deliver_alert", `{"alert_id": 1.5}`},
		{"sweep_expired", `{"grace": "0s"}`},
		{"watch_discarded", `[]`},
		{"retention", `{"after": "1h"}`},
		{"ledger_partitions", `{"months": 3}`},
		{"webhook_deliver", `{"webhook_id": -1}`},
		{"webhook_dispatch", `{"tick": "250ms"}`},
	} {
		id := insertRawJob(t, b, c.kind, c.args)
		a := requireRefused(t, b, id, jobs.AlertJobArgsInvalid)
		require.Equal(t, `"`+c.kind+`"`, detail(t, a, "job_kind"), c.args)
	}
	var runs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_runs`).Scan(&runs))
	require.Zero(t, runs, "the malformed reconcile job did not run")
	// The hold expired by its own job, not the malformed one's.
	b.waitStatus(t, r.ID, inventory.StatusExpired, 20*time.Second)
	require.Equal(t, 1, b.releases(t, r.ID))
}

// detail returns the JSON text of one of an alert's details.
func detail(t *testing.T, a alerts.Alert, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(a.Details, &m))
	v, ok := m[name]
	require.True(t, ok, "details have %s: %s", name, a.Details)
	return string(v)
}
