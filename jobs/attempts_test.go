package jobs_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
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
// every job kind has, never River's default of 25.
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
	expected := make([]rivertest.ExpectedJob, len(kinds))
	for i, args := range kinds {
		expected[i] = rivertest.ExpectedJob{Args: args, Opts: &rivertest.RequireInsertedOpts{MaxAttempts: 3}}
	}
	rivertest.RequireManyInserted(ctx, t, riverpgxv5.New(pool), expected)
}
