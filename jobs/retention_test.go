package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
)

// TestRetentionJob lets the periodic retention job (registered like every
// kind, with strict args and a timeout) find a released hold and an
// expired one older than the retention period: both go, with their lines;
// a confirmed hold as old stays, and reconciliation then raises no alarm.
func TestRetentionJob(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{retention: 24 * time.Hour, retentionInterval: 100 * time.Millisecond, reconcile: true, reconcileInterval: time.Hour})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	var ids []string
	for _, end := range []inventory.HoldStatus{inventory.StatusConfirmed, inventory.StatusReleased, inventory.StatusExpired} {
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: string(end), Items: []inventory.Item{{SKU: "A1", Quantity: 2}}})
		require.NoError(t, err)
		switch end {
		case inventory.StatusConfirmed:
			_, err = b.inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
		case inventory.StatusReleased:
			_, err = b.inv.Release(ctx, r.ID, inventory.Caller{Name: "shop"}, "cancelled")
		case inventory.StatusExpired:
			_, err = b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() WHERE id = $1`, r.ID)
			require.NoError(t, err)
			_, err = b.inv.SweepExpired(ctx, 0)
		}
		require.NoError(t, err)
		ids = append(ids, r.ID.String())
	}
	_, err := b.pool.Exec(ctx, `
		UPDATE reservations SET expires_at = expires_at - interval '2 days', released_at = released_at - interval '2 days',
		       confirmed_at = confirmed_at - interval '2 days'`)
	require.NoError(t, err)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var holds, lines int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reservations), (SELECT count(*) FROM reservation_lines)`).Scan(&holds, &lines))
		assert.Equal(c, 1, holds)
		assert.Equal(c, 1, lines)
	}, 20*time.Second, 50*time.Millisecond)
	var left string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id::text FROM reservations`).Scan(&left))
	require.Equal(t, ids[0], left, "the confirmed hold stays")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var completed int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'retention' AND state = 'completed'`).Scan(&completed))
		assert.Positive(c, completed)
	}, 10*time.Second, 20*time.Millisecond, "the retention job did it")

	run, err := b.reconcile.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.NoError(t, err)
	require.Zero(t, run.HighRisk, "%+v", run.Findings)
}
