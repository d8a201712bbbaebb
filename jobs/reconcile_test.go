package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// TestReconcileJobRetriesDiscardedRollback has a requested reconcile job
// find a rollback whose batch job was discarded, retry it, and the retried
// batch finish the rollback.
func TestReconcileJobRetriesDiscardedRollback(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{reconcile: true, reconcileInterval: time.Hour, sweepInterval: time.Hour, sweepGrace: time.Hour})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	var ids []uuid.UUID
	for i := range 3 {
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("k", i), Items: []inventory.Item{{SKU: "A1", Quantity: 2}}})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}

	// A rollback whose batch job failed its last attempt, as the batch
	// worker leaves it; one transaction, so no worker ever sees the job.
	var created rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		created, err = b.rollbacks.StartTx(ctx, tx, rollbacks.Request{
			Operator: "alice", Reason: "test", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{ReservationIDs: ids},
		})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE river_job SET state = 'discarded', attempt = max_attempts, attempted_at = now(), finalized_at = now()
			WHERE id = $1`, created.JobID); err != nil {
			return err
		}
		return rollbacks.FailTx(ctx, tx, created.RollbackID, "database restarted")
	}))

	var req reconcile.Requested
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		req, err = b.reconcile.RequestTx(ctx, tx, reconcile.TriggerHTTP, nil)
		return err
	}))
	var run reconcile.Run
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		run, err = b.reconcile.Get(ctx, req.RunID)
		assert.NoError(c, err)
		assert.Equal(c, reconcile.StatusSucceeded, run.Status)
	}, 20*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 1, run.Retried)
	require.Equal(t, created.JobID, *run.Findings.Retry[0].JobID)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rb, err := b.rollbacks.Get(ctx, created.RollbackID)
		assert.NoError(c, err)
		assert.Equal(c, rollbacks.StatusSucceeded, rb.Status)
	}, 20*time.Second, 50*time.Millisecond)
	for _, id := range ids {
		require.Equal(t, string(inventory.StatusReleased), b.status(t, id))
	}
}

func TestReconcileRunsPeriodically(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{reconcile: true, reconcileInterval: 300 * time.Millisecond})
	dbtest.StockIn(t, b.pool, "A1", 10)
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := b.reconcile.Latest(ctx)
		assert.NoError(c, err)
		assert.Equal(c, reconcile.TriggerPeriodic, r.Trigger)
		assert.Equal(c, reconcile.StatusSucceeded, r.Status)
	}, 20*time.Second, 50*time.Millisecond)
	r, err := b.reconcile.Latest(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, r.RowsChecked)
	require.Empty(t, r.Findings.All())
}
