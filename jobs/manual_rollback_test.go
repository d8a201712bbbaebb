package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
)

// insertRawRollback enqueues a manual rollback the way a DBA does, with
// nothing but SQL (the same statements as sql/manual_rollback.sql).
func insertRawRollback(t *testing.T, b *bundle, args string) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx,
		`INSERT INTO river_job (kind, args, max_attempts) VALUES ('manual_rollback', $1, 3) RETURNING id`, args).Scan(&id))
	_, err := b.pool.Exec(ctx, `SELECT pg_notify(current_schema() || '.river_insert', '{"queue": "default"}')`)
	require.NoError(t, err)
	return id
}

func TestManualRollbackBySQL(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	var ids []uuid.UUID
	for i := range 3 {
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("k", i), Items: []inventory.Item{{SKU: "A1", Quantity: 2}}})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	jobID := insertRawRollback(t, b, fmt.Sprintf(
		`{"operator": "alice", "reason": "payment provider outage", "reservation_ids": [%q, %q]}`, ids[0], ids[1]))

	start := time.Now()
	var status string
	var released int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := b.pool.QueryRow(ctx, `SELECT status, released_count FROM rollback_requests WHERE job_id = $1`, jobID).Scan(&status, &released)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", status)
	}, 10*time.Second, 50*time.Millisecond)
	t.Logf("plain-SQL rollback done in %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 2, released)

	var operator, reason, source string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT operator, reason, source FROM rollback_requests WHERE job_id = $1`, jobID).Scan(&operator, &reason, &source))
	require.Equal(t, []string{"alice", "payment provider outage", "sql"}, []string{operator, reason, source})
	var actors []string
	rows, err := b.pool.Query(ctx, `SELECT actor || ':' || kind || ':' || reason FROM ledger WHERE reservation_id = ANY($1) AND kind = 'rollback'`, ids)
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		actors = append(actors, a)
	}
	require.ElementsMatch(t, []string{"alice:rollback:payment provider outage", "alice:rollback:payment provider outage"}, actors)
	require.Equal(t, string(inventory.StatusHeld), b.status(t, ids[2]), "out of scope: untouched")

	// A second reconciliation of the rollback's SKUs is asked for in its
	// last batch, recorded on the request, with its job.
	var trigger string
	var skus []string
	var jobs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT r.trigger, r.skus,
			(SELECT count(*) FROM river_job j WHERE j.kind = 'reconcile' AND (j.args->>'run_id')::bigint = r.id)
		FROM rollback_requests q JOIN reconcile_runs r ON r.id = q.reconcile_run_id WHERE q.job_id = $1`, jobID).Scan(&trigger, &skus, &jobs))
	require.Equal(t, "rollback", trigger)
	require.Equal(t, []string{"A1"}, skus)
	require.Equal(t, 1, jobs)
}

func TestManualRollbackWithoutOperatorIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "k", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.NoError(t, err)

	for _, args := range []string{
		fmt.Sprintf(`{"reason": "no operator", "reservation_ids": [%q]}`, r.ID),
		fmt.Sprintf(`{"operator": "bob", "reservation_ids": [%q]}`, r.ID),
		`{"operator": "bob", "reason": "no scope"}`,
	} {
		jobID := insertRawRollback(t, b, args)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var state string
			assert.NoError(c, b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, jobID).Scan(&state))
			assert.Equal(c, "cancelled", state)
		}, 10*time.Second, 50*time.Millisecond, args)
		a, err := b.alerts.List(ctx, alerts.StatusOpen, 100)
		require.NoError(t, err)
		var found bool
		for _, x := range a {
			found = found || x.Subject == fmt.Sprintf("job:%d", jobID)
		}
		require.True(t, found, "refused with an alert: %s", args)
	}
	require.Equal(t, string(inventory.StatusHeld), b.status(t, r.ID), "nothing released")
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM rollback_requests`).Scan(&n))
	require.Zero(t, n)
}

func TestManualRollbackDryRunAndSKUScope(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{rollbackPause: 10 * time.Millisecond})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 1000)
	dbtest.StockIn(t, b.pool, "B1", 10)
	for i := range 250 {
		_, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("a", i), Items: []inventory.Item{{SKU: "A1", Quantity: 2}}})
		require.NoError(t, err)
	}
	_, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "b", Items: []inventory.Item{{SKU: "B1", Quantity: 1}}})
	require.NoError(t, err)

	dry := insertRawRollback(t, b, `{"operator": "carol", "reason": "what if", "sku": "A1", "dry_run": true}`)
	var status string
	var matched, units int64
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := b.pool.QueryRow(ctx, `SELECT status, coalesce(matched_count, -1), coalesce(matched_units, -1) FROM rollback_requests WHERE job_id = $1`, dry).Scan(&status, &matched, &units)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", status)
	}, 10*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 250, matched)
	require.EqualValues(t, 500, units)
	var reserved int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT reserved FROM stock WHERE sku = 'A1'`).Scan(&reserved))
	require.EqualValues(t, 500, reserved, "a dry run changes nothing")

	real := insertRawRollback(t, b, `{"operator": "carol", "reason": "clear A1", "sku": "A1", "pool": "main"}`)
	var released, batches int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := b.pool.QueryRow(ctx, `SELECT status, released_count, batches FROM rollback_requests WHERE job_id = $1`, real).Scan(&status, &released, &batches)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", status)
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, 250, released)
	require.Equal(t, 3, batches, "100 + 100 + 50")
	requireBatchesAtMost(t, b, 100)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT reserved FROM stock WHERE sku = 'B1'`).Scan(&reserved))
	require.EqualValues(t, 1, reserved, "another SKU's hold is out of scope")
}

// requireBatchesAtMost checks, from the ledger itself, that no transaction
// rolled back more than n holds: rows of one transaction share its at.
func requireBatchesAtMost(t *testing.T, b *bundle, n int) {
	t.Helper()
	var most int
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT coalesce(max(c), 0) FROM (
			SELECT count(DISTINCT reservation_id) AS c FROM ledger WHERE kind = 'rollback' GROUP BY at
		) per_tx`).Scan(&most))
	require.LessOrEqual(t, most, n)
	require.Positive(t, most)
}
