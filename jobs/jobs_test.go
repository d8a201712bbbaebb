package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/jobs"
)

var quiet = slog.New(slog.DiscardHandler)

type bundle struct {
	pool      *pgxpool.Pool
	inv       *inventory.Service
	alerts    *alerts.Service
	rollbacks *rollbacks.Service
	campaigns *campaigns.Service
	reconcile *reconcile.Service
	inserter  *river.Client[pgx.Tx]
	client    *river.Client[pgx.Tx]
}

type setupOpts struct {
	sweepInterval time.Duration
	sweepGrace    time.Duration
	webhook       string
	rollbackPause time.Duration
	// reconcile works reconcile jobs, periodic ones every reconcileInterval.
	reconcile         bool
	reconcileInterval time.Duration
	// workers adds test-only workers to the client's bundle.
	workers func(*river.Workers)
	// stopped leaves the client unstarted: the test starts it (b.start).
	stopped bool
	// retention turns on the retention job, run every retentionInterval.
	retention         time.Duration
	retentionInterval time.Duration
}

// setup returns a started River client working every stockhold job kind
// on a fresh database.
func setup(t *testing.T, opts *setupOpts) *bundle {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{}
	}
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.Services(config.Config{
		AlertWebhook: opts.webhook, RollbackPause: opts.rollbackPause, ReconcileRepairLimit: 100, Retention: opts.retention,
	}, pool, inserter, quiet)
	reconciler := deps.Reconcile
	if !opts.reconcile {
		deps.Reconcile = nil // leaves the reconcile worker and its schedule out
	}
	client, err := jobs.NewClient(pool, deps, jobs.Config{
		Workers: 10, SweepInterval: opts.sweepInterval, SweepGrace: opts.sweepGrace,
		WatchInterval: 200 * time.Millisecond, ReconcileInterval: opts.reconcileInterval, AlertWebhook: opts.webhook,
		RetentionInterval: opts.retentionInterval,
		RetryBase:         10 * time.Millisecond, Test: true, Log: quiet, ExtraWorkers: opts.workers,
	})
	require.NoError(t, err)
	b := &bundle{pool: pool, inv: deps.Inventory, alerts: deps.Alerts, rollbacks: deps.Rollbacks, campaigns: deps.Campaigns,
		reconcile: reconciler, inserter: inserter, client: client}
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	if !opts.stopped {
		b.start(t)
	}
	return b
}

// jobsConfig is what newClient's clients may differ in.
type jobsConfig struct {
	notLeader   bool
	rescueAfter time.Duration
}

// newClient returns another client on the bundle's database and services,
// as a second instance of stockhold would have.
func (b *bundle) newClient(t *testing.T, workers func(*river.Workers), c jobsConfig) *river.Client[pgx.Tx] {
	t.Helper()
	client, err := jobs.NewClient(b.pool, jobs.Deps{
		Inventory: b.inv, Alerts: b.alerts, Rollbacks: b.rollbacks, Campaigns: b.campaigns, Reconcile: b.reconcile,
	}, jobs.Config{
		Workers: 10, WatchInterval: time.Hour, ReconcileInterval: time.Hour, RetryBase: 10 * time.Millisecond,
		Test: true, Log: quiet, ExtraWorkers: workers, NotLeader: c.notLeader, RescueAfter: c.rescueAfter,
	})
	require.NoError(t, err)
	return client
}

// startClient starts client, stopped when the test ends.
func startClient(t *testing.T, client *river.Client[pgx.Tx]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		require.NoError(t, client.Stop(stopCtx))
		cancel()
	})
}

// start starts the bundle's client, stopped when the test ends.
func (b *bundle) start(t *testing.T) {
	t.Helper()
	startClient(t, b.client)
}

func (b *bundle) stockIn(t *testing.T, sku string, n int64) {
	t.Helper()
	_, err := b.inv.Adjust(context.Background(), inventory.Adjustment{SKU: sku, Delta: n, Actor: "test"})
	require.NoError(t, err)
}

func (b *bundle) status(t *testing.T, id uuid.UUID) string {
	t.Helper()
	r, err := b.inv.Get(context.Background(), id, inventory.Caller{Ops: true})
	require.NoError(t, err)
	return r.Status
}

// releases counts the ledger rows that handed the hold's stock back.
func (b *bundle) releases(t *testing.T, id uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ledger WHERE reservation_id = $1 AND kind IN ('release', 'expire', 'rollback')`, id).Scan(&n))
	return n
}

func TestHoldExpiresByItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{sweepInterval: time.Hour, sweepGrace: time.Hour})
	b.stockIn(t, "A1", 10)
	r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{
		Client: "shop", IdempotencyKey: "k", TTLSeconds: 1, Items: []inventory.Item{{SKU: "A1", Quantity: 3}},
	})
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool { return b.status(t, r.ID) == inventory.StatusExpired }, 20*time.Second, 100*time.Millisecond)
	t.Logf("expired %s after the hold was made (TTL 1 s)", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 1, b.releases(t, r.ID))

	var actor string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT actor FROM ledger WHERE reservation_id = $1 AND kind = 'expire'`, r.ID).Scan(&actor))
	require.Equal(t, "system:release_hold", actor)
}

func TestSweeperCatchesLostJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{sweepInterval: 500 * time.Millisecond, sweepGrace: time.Millisecond})
	b.stockIn(t, "A1", 10)
	ctx := context.Background()
	r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{
		Client: "shop", IdempotencyKey: "lost", TTLSeconds: 1, Items: []inventory.Item{{SKU: "A1", Quantity: 2}},
	})
	require.NoError(t, err)
	// The job is gone (a DBA deleted it, a restore lost it...).
	tag, err := b.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'release_hold' AND args->>'reservation_id' = $1`, r.ID.String())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	require.Eventually(t, func() bool { return b.status(t, r.ID) == inventory.StatusExpired }, 20*time.Second, 100*time.Millisecond)
	var actor string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT actor FROM ledger WHERE reservation_id = $1 AND kind = 'expire'`, r.ID).Scan(&actor))
	require.Equal(t, "system:sweep_expired", actor)

	// Job and sweeper both had their chance at a second hold: one release.
	r2, _, err := b.inv.Hold(ctx, inventory.HoldRequest{
		Client: "shop", IdempotencyKey: "both", TTLSeconds: 1, Items: []inventory.Item{{SKU: "A1", Quantity: 1}},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.status(t, r2.ID) == inventory.StatusExpired }, 20*time.Second, 100*time.Millisecond)
	// Whichever of job and sweeper came second must have found nothing to do.
	require.Eventually(t, func() bool {
		var jobState string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE kind = 'release_hold' AND args->>'reservation_id' = $1`, r2.ID.String()).Scan(&jobState))
		return jobState == "completed"
	}, 30*time.Second, 100*time.Millisecond, "the hold's own job runs too")
	time.Sleep(time.Second) // and the sweeper runs again meanwhile
	require.Equal(t, 1, b.releases(t, r2.ID))
}
