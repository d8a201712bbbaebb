package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/jobs"
)

// instance is a `stockhold serve` child process.
type instance struct {
	cmd  *exec.Cmd
	logs string
}

// startInstance starts `stockhold serve` (this test binary, re-executed)
// on the test's database, with stockhold's production job settings, plus
// env. Its log goes to a file shown when the test fails.
func startInstance(t *testing.T, pool *pgxpool.Pool, name string, env ...string) *instance {
	t.Helper()
	logs := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logs)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=serve", "DATABASE_URL="+smallPoolURL(t, pool),
		"STOCKHOLD_ADDR=127.0.0.1:0", "STOCKHOLD_LOG_LEVEL=info", "STOCKHOLD_WORKERS=4")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	inst := &instance{cmd: cmd, logs: logs}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs)
			t.Logf("%s's log:\n%s", name, b)
		}
	})
	return inst
}

// kill ends the instance with SIGKILL: no shutdown, no deferred code, its
// connections dropped mid-transaction.
func (i *instance) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, i.cmd.Process.Kill())
	_ = i.cmd.Wait()
}

// smallPoolURL is the test database's URL with a small pool, so that
// instances and parallel tests fit in the server's connections.
func smallPoolURL(t *testing.T, pool *pgxpool.Pool) string {
	s := dbtest.URL(t, pool)
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return s + " pool_max_conns=10"
	}
	q := u.Query()
	q.Set("pool_max_conns", "10")
	u.RawQuery = q.Encode()
	return u.String()
}

// lockStockRow holds the stock row (sku, main) locked, as a DBA's open
// SELECT ... FOR UPDATE does, until unlock is called. A job that needs the
// row waits, mid-transaction, for it.
func lockStockRow(t *testing.T, pool *pgxpool.Pool, sku string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM stock WHERE sku = $1 AND pool = 'main' FOR UPDATE`, sku)
	require.NoError(t, err)
	done := false
	unlock = func() {
		if !done {
			done = true
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// waitForLockWaiter waits until another session waits for a lock in the
// test's database: the job is inside its transaction.
func waitForLockWaiter(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		assert.NoError(c, pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		assert.Positive(c, n)
	}, 30*time.Second, 20*time.Millisecond)
}

func services(t *testing.T, pool *pgxpool.Pool) *app.Services {
	t.Helper()
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return app.NewServices(config.Defaults(), pool, inserter, nil)
}

// TestKilledRollbackFinishesOnAnotherInstance kills -9 the instance running
// a rollback while a batch is inside its transaction (it waits for a row
// lock), then starts another instance: it must finish the rollback within
// 60 s, each hold released once.
func TestKilledRollbackFinishesOnAnotherInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	deps := services(t, pool)
	_, err := deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 400, Actor: "test"})
	require.NoError(t, err)
	ids := make([]uuid.UUID, 300)
	for i := range ids {
		r, _, err := deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("k", i), Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
		require.NoError(t, err)
		ids[i] = r.ID
	}
	var created rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		created, err = deps.Rollbacks.CreateTx(ctx, tx, rollbacks.Request{
			Operator: "alice", Reason: "crash test", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{SKU: "A1"},
		})
		return err
	}))

	first := startInstance(t, pool, "first", "STOCKHOLD_ROLLBACK_PAUSE=1s")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := deps.Rollbacks.Get(ctx, created.RollbackID)
		assert.NoError(c, err)
		assert.GreaterOrEqual(c, r.Batches, int32(1))
	}, 30*time.Second, 10*time.Millisecond)
	unlock := lockStockRow(t, pool, "A1") // during the pause
	waitForLockWaiter(t, pool)            // the second batch is inside its transaction
	var running int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = 'rollback_batch' AND state = 'running'`).Scan(&running))
	first.kill(t)
	killed := time.Now()
	unlock()
	mid, err := deps.Rollbacks.Get(ctx, created.RollbackID)
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusRunning, mid.Status)
	require.EqualValues(t, 100, mid.ReleasedCount, "killed midway")

	startInstance(t, pool, "second", "STOCKHOLD_ROLLBACK_PAUSE=100ms")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := deps.Rollbacks.Get(ctx, created.RollbackID)
		assert.NoError(c, err)
		assert.Equal(c, rollbacks.StatusSucceeded, r.Status)
	}, 60*time.Second-time.Since(killed), 50*time.Millisecond, "finished within 60 s of the kill")
	t.Logf("rollback finished %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	r, err := deps.Rollbacks.Get(ctx, created.RollbackID)
	require.NoError(t, err)
	require.EqualValues(t, 300, r.ReleasedCount)
	var once, rescued int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE n = 1) FROM (
			SELECT r.id, count(l.id) AS n FROM reservations r
			LEFT JOIN ledger l ON l.reservation_id = r.id AND l.kind IN ('release', 'expire', 'rollback')
			WHERE r.id = ANY($1) GROUP BY r.id) x`, ids).Scan(&once))
	require.Equal(t, 300, once, "every hold released exactly once, by the ledger")
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM river_job, unnest(errors) e WHERE id = $1 AND e->>'error' LIKE '%rescued%'`, running).Scan(&rescued))
	require.Equal(t, 1, rescued, "the batch the first instance was running was rescued and run again")
	dbtest.RequireInvariants(t, pool)
}

// TestKilledCampaignStartFinishesOnAnotherInstance kills -9 the instance
// starting a campaign while the start is inside its transaction, then
// starts another: the campaign must open within 60 s, each allotment
// moved once.
func TestKilledCampaignStartFinishesOnAnotherInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	deps := services(t, pool)
	for _, sku := range []string{"FLASH", "GIFT"} {
		_, err := deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 100, Actor: "test"})
		require.NoError(t, err)
	}
	unlock := lockStockRow(t, pool, "GIFT") // the start moves FLASH, then waits for GIFT
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := deps.Campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: "bf", StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60, Actor: "alice",
			Allotments: []campaigns.Allotment{{SKU: "FLASH", Quantity: 30}, {SKU: "GIFT", Quantity: 20}},
		})
		return err
	}))

	first := startInstance(t, pool, "first")
	waitForLockWaiter(t, pool)
	first.kill(t)
	killed := time.Now()
	unlock()
	c, err := deps.Campaigns.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusScheduled, c.Status, "killed before it opened")

	startInstance(t, pool, "second")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := deps.Campaigns.Get(ctx, "bf")
		assert.NoError(c, err)
		assert.Equal(c, campaigns.StatusActive, got.Status)
	}, 60*time.Second-time.Since(killed), 50*time.Millisecond, "opened within 60 s of the kill")
	t.Logf("campaign opened %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	rows, err := pool.Query(ctx, `
		SELECT sku, count(*), sum(delta_total) FILTER (WHERE pool = 'bf') FROM ledger
		WHERE kind = 'transfer' AND ref = 'bf' GROUP BY sku ORDER BY sku`)
	require.NoError(t, err)
	type moved struct {
		sku      string
		rows     int
		intoPool int64
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (moved, error) {
		var m moved
		return m, r.Scan(&m.sku, &m.rows, &m.intoPool)
	})
	require.NoError(t, err)
	require.Equal(t, []moved{{"FLASH", 2, 30}, {"GIFT", 2, 20}}, got, "each allotment moved exactly once, by the ledger")
	dbtest.RequireInvariants(t, pool)
}
