package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/reconcile"
)

// TestFinishedCampaignHoldingStockIsGivenBack: a pool of a finished
// campaign holds nothing on hand (its finish gave it all back to main, and
// nothing is written there after its end). Stock written there around the
// service, with its ledger rows so that the books balance, is found by a
// full run, which gives it back to main (a chain_resumed finding and
// alert); an incremental run does not read every pool for it.
func TestFinishedCampaignHoldingStockIsGivenBack(t *testing.T) {
	t.Parallel()
	_, b := setup(t, nil)
	ctx := context.Background()
	deps := app.NewServices(config.Defaults(), b.pool, b.inserter, quiet)
	dbtest.Location(t, b.pool, "paris", 2)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	_, _, err := deps.Campaigns.CreateOnce(ctx, idempotency.NewKey("ops", "bf"), campaigns.Request{ID: "bf", StartsAt: time.Now(),
		EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60, Location: "paris", Allotments: []campaigns.Allotment{{SKU: "A1", Quantity: 4}}, Actor: "ops"})
	require.NoError(t, err)
	require.NoError(t, deps.Campaigns.Start(ctx, "bf"))
	created, err := deps.Campaigns.End(ctx, "bf", "alice", "over")
	require.NoError(t, err)
	batch, err := deps.Campaigns.RollbackBatch(ctx, created.RollbackID, created.JobID)
	require.NoError(t, err)
	require.True(t, batch.Finished)
	svc := deps.Reconcile
	require.Empty(t, run(t, svc).Findings.All(), "finished, its pool holds nothing")

	// 2 damaged units written into its pool by hand, with their ledger row.
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		if _, err := q.StockMove(ctx, db.StockMoveParams{Sku: "A1", Location: "paris", Pool: "bf", DeltaTotal: 2, DeltaDamaged: 2}); err != nil {
			return err
		}
		_, err := q.LedgerAppend(ctx, db.LedgerAppendParams{Sku: "A1", Location: "paris", Pool: "bf", Kind: "adjust", DeltaTotal: 2, DeltaDamaged: 2, Actor: "by hand"})
		return err
	}))
	inc, err := svc.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, Scope: reconcile.ScopeIncremental})
	require.NoError(t, err)
	require.Empty(t, inc.Findings.All(), "an incremental run reads no pool for it")

	r := run(t, svc)
	require.Len(t, r.Findings.Retry, 1)
	f := r.Findings.Retry[0]
	require.Equal(t, reconcile.KindChainResumed, f.Kind)
	d := details(t, f)
	require.Equal(t, "give_back", d["next_step"])
	require.Contains(t, f.Action, "A1 at paris: total +2, available +0, reserved +0, sold +0, damaged +2")
	_, ok := b.openAlert(t, "chain_resumed", "campaign:bf")
	require.True(t, ok)
	main, err := db.New(b.pool).StockGet(ctx, "A1", "paris", "main")
	require.NoError(t, err)
	require.Equal(t, [3]int64{12, 10, 2}, [3]int64{main.Total, main.Available, main.Damaged}, "given back to main, damaged")
	require.Empty(t, run(t, svc).Findings.All(), "nothing left to find")
}
