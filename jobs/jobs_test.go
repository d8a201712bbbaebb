package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
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
	webhooks  *webhooks.Service
	inserter  *river.Client[pgx.Tx]
	client    *river.Client[pgx.Tx]
}

type setupOpts struct {
	sweepInterval time.Duration
	sweepGrace    time.Duration
	webhook       string
	rollbackPause time.Duration
	// expirySpan is jobs.Config.ExpirySpan: negative leaves the expiry
	// loop out.
	expirySpan time.Duration
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
	// allowPrivate lets webhooks reach the tests' receivers on loopback.
	allowPrivate bool
	// archiveAfter and archiveDir are STOCKHOLD_LEDGER_ARCHIVE_AFTER and
	// STOCKHOLD_LEDGER_ARCHIVE_DIR.
	archiveAfter int
	archiveDir   string
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
	services := app.NewServices(config.DefaultsWith(func(c *config.Config) {
		c.AlertWebhook, c.RollbackPause, c.Retention = opts.webhook, opts.rollbackPause, opts.retention
		c.WebhookAllowPrivate, c.RetryBase = opts.allowPrivate, 20*time.Millisecond
		c.LedgerArchiveAfter, c.LedgerArchiveDir = opts.archiveAfter, opts.archiveDir
	}), pool, inserter, quiet)
	deps := services.Workers()
	reconciler := deps.Reconcile
	if !opts.reconcile {
		deps.Reconcile = nil // leaves the reconcile worker and its schedule out
	}
	client, err := jobs.NewClient(pool, deps, jobs.Config{
		Workers: 10, SweepInterval: opts.sweepInterval, SweepGrace: opts.sweepGrace,
		WatchInterval: 200 * time.Millisecond, ReconcileInterval: opts.reconcileInterval, AlertWebhook: opts.webhook,
		RetentionInterval: opts.retentionInterval,
		RetryBase:         10 * time.Millisecond, Test: true, Log: quiet, ExtraWorkers: opts.workers, ExpirySpan: opts.expirySpan,
	})
	require.NoError(t, err)
	b := &bundle{pool: pool, inv: deps.Inventory, alerts: deps.Alerts, rollbacks: deps.Rollbacks, campaigns: deps.Campaigns,
		reconcile: reconciler, webhooks: deps.Webhooks, inserter: inserter, client: client}
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

func (b *bundle) status(t *testing.T, id uuid.UUID) string {
	t.Helper()
	r, err := b.inv.Get(context.Background(), id, inventory.Caller{Ops: true})
	require.NoError(t, err)
	return string(r.Status)
}

// pastExpiry moves the holds' expiry a second into the past, as if their
// time had run out.
func (b *bundle) pastExpiry(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	tag, err := b.pool.Exec(context.Background(), `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = ANY($1)`, ids)
	require.NoError(t, err)
	require.EqualValues(t, len(ids), tag.RowsAffected())
}

// waitStatus waits until the hold has the status want.
func (b *bundle) waitStatus(t *testing.T, id uuid.UUID, want inventory.HoldStatus, within time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := b.inv.Get(context.Background(), id, inventory.Caller{Ops: true})
		assert.NoError(c, err)
		assert.Equal(c, want, r.Status)
	}, within, 50*time.Millisecond)
}

// count runs a query answering one integer, reporting an error to t, which
// may be an Eventually condition's CollectT.
func (b *bundle) count(t assert.TestingT, sql string, args ...any) int {
	var n int
	assert.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// releases counts the ledger rows that handed the hold's stock back.
func (b *bundle) releases(t *testing.T, id uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ledger WHERE reservation_id = $1 AND kind IN ('release', 'expire', 'rollback')`, id).Scan(&n))
	return n
}

func TestHoldExpiresOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{sweepInterval: time.Hour, sweepGrace: time.Hour})
	dbtest.StockIn(t, b.pool, "A1", 10)
	r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{
		Client: "shop", IdempotencyKey: "k", TTLSeconds: 1, Items: []inventory.Item{{SKU: "A1", Quantity: 3}},
	})
	require.NoError(t, err)
	start := time.Now()
	b.waitStatus(t, r.ID, inventory.StatusExpired, 20*time.Second)
	t.Logf("expired %s after the hold was made (TTL 1 s)", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 1, b.releases(t, r.ID))

	var actor string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT actor FROM ledger WHERE reservation_id = $1 AND kind = 'expire'`, r.ID).Scan(&actor))
	require.Equal(t, "system:expire_holds", actor)

	// DBAs see the expiry work in river_job: one expire_holds row per
	// span, on the expiry queue, its output saying what it released.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var released int
		err := b.pool.QueryRow(context.Background(), `SELECT coalesce(sum((metadata->'output'->>'released')::int), 0)
			FROM river_job WHERE kind = 'expire_holds' AND queue = 'expiry' AND state = 'completed'`).Scan(&released)
		assert.NoError(c, err)
		assert.Equal(c, 1, released)
	}, 30*time.Second, 100*time.Millisecond)
}

func TestSweeperIsTheBackstop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("without the expiry loop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &setupOpts{sweepInterval: 500 * time.Millisecond, sweepGrace: time.Millisecond, expirySpan: -1})
		dbtest.StockIn(t, b.pool, "A1", 10)
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{
			Client: "shop", IdempotencyKey: "lost", TTLSeconds: 600, Items: []inventory.Item{{SKU: "A1", Quantity: 2}},
		})
		require.NoError(t, err)
		b.pastExpiry(t, r.ID)
		b.waitStatus(t, r.ID, inventory.StatusExpired, 20*time.Second)
		var actor string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT actor FROM ledger WHERE reservation_id = $1 AND kind = 'expire'`, r.ID).Scan(&actor))
		require.Equal(t, "system:sweep_expired", actor)
		require.Equal(t, 1, b.releases(t, r.ID))
	})
	t.Run("with it", func(t *testing.T) {
		t.Parallel()
		// Loop and sweeper both have their chance at every hold: one
		// release each.
		b := setup(t, &setupOpts{sweepInterval: 200 * time.Millisecond, sweepGrace: time.Millisecond})
		dbtest.StockIn(t, b.pool, "A1", 100)
		var ids []uuid.UUID
		for i := range 50 {
			r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{
				Client: "shop", IdempotencyKey: fmt.Sprint("both-", i), TTLSeconds: 600, Items: []inventory.Item{{SKU: "A1", Quantity: 1}},
			})
			require.NoError(t, err)
			ids = append(ids, r.ID)
		}
		b.pastExpiry(t, ids...)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var held int
			assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'held'`).Scan(&held))
			assert.Zero(c, held)
		}, 20*time.Second, 100*time.Millisecond)
		// Sweeps run again meanwhile, and find nothing left to do.
		const sweeps = `SELECT count(*) FROM river_job WHERE kind = 'sweep_expired' AND state = 'completed'`
		after := b.count(t, sweeps)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.GreaterOrEqual(c, b.count(c, sweeps), after+2)
		}, 20*time.Second, 50*time.Millisecond)
		for _, id := range ids {
			require.Equal(t, 1, b.releases(t, id))
		}
	})
}
