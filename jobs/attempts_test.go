package jobs_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
	"github.com/stockhold/stockhold/jobs"
)

// TestInserterGivesEveryKindThreeAttempts inserts one job of every kind the
// domain enqueues through the inserter the services use, as they do
// (InsertTx, no options of their own): each gets three attempts, as
// DESIGN.md promises, never River's default of 25.
func TestInserterGivesEveryKindThreeAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	kinds := []river.JobArgs{
		rollbacks.ManualRollbackArgs{Operator: "alice", Reason: "test", Scope: rollbacks.Scope{SKU: "A1"}},
		rollbacks.RollbackBatchArgs{RollbackID: 1},
		campaigns.CampaignStartArgs{Campaign: "bf"},
		campaigns.CampaignEndArgs{Campaign: "bf"},
		reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI},
		alerts.DeliverAlertArgs{AlertID: 1},
		webhooks.DeliverArgs{WebhookID: 1},
		webhooks.DispatchArgs{},
	}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, args := range kinds {
			if _, err := inserter.InsertTx(ctx, tx, args, nil); err != nil {
				return err
			}
		}
		return nil
	}))
	rows, err := pool.Query(ctx, `SELECT kind, max_attempts FROM river_job ORDER BY id`)
	require.NoError(t, err)
	got := map[string]int{}
	for rows.Next() {
		var (
			kind     string
			attempts int
		)
		require.NoError(t, rows.Scan(&kind, &attempts))
		got[kind] = attempts
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, len(kinds))
	for kind, attempts := range got {
		require.Equal(t, 3, attempts, kind)
	}
}
