package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/jobs"
)

// TestExpiryBurst makes a few thousand holds with a one-second TTL; a DBA
// keeps the stock row of some of them locked. Every other hold expires
// meanwhile (expiry works around the locked row instead of waiting on it),
// a campaign whose start falls inside the burst opens while the locked
// row's holds are still waiting (expiry work never holds up operator work),
// and once the lock goes every hold has expired, each exactly once, with no
// job per hold in river_job.
func TestExpiryBurst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &setupOpts{sweepInterval: time.Hour, sweepGrace: time.Hour, expirySpan: time.Second})
	const skus, perSKU, stuck = 10, 300, 200
	for i := range skus {
		dbtest.StockIn(t, b.pool, fmt.Sprint("BURST", i), perSKU)
	}
	dbtest.StockIn(t, b.pool, "STUCK", stuck)
	dbtest.StockIn(t, b.pool, "CAMP", 10)

	hold := func(key, sku string, ttl int64) (uuid.UUID, error) {
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{
			Client: "shop", IdempotencyKey: key, TTLSeconds: ttl, Items: []inventory.Item{{SKU: sku, Quantity: 1}},
		})
		return r.ID, err
	}
	// The holds of the row that is about to be locked come first, due once
	// the row is locked (made with a long TTL and moved due in SQL, so that
	// none can expire before the lock is taken however slow the machine).
	var stuckIDs []uuid.UUID
	for i := range stuck {
		id, err := hold(fmt.Sprint("s", i), "STUCK", 3600)
		require.NoError(t, err)
		stuckIDs = append(stuckIDs, id)
	}
	unlock := lockStock(t, b, "STUCK")
	_, err := b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() + interval '1 second' WHERE id = ANY($1)`, stuckIDs)
	require.NoError(t, err)

	type made struct {
		id  uuid.UUID
		err error
	}
	out := make(chan made, skus*perSKU)
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < skus*perSKU; i += 64 {
				id, err := hold(fmt.Sprint("h", i), fmt.Sprint("BURST", i%skus), 1)
				out <- made{id, err}
			}
		}()
	}
	wg.Wait()
	close(out)
	all := slices.Clone(stuckIDs)
	for m := range out {
		require.NoError(t, m.err)
		all = append(all, m.id)
	}

	// A campaign due to start while the burst expires.
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: "c1", StartsAt: time.Now().Add(500 * time.Millisecond), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60,
			Allotments: []campaigns.Allotment{{SKU: "CAMP", Quantity: 10}}, Actor: "alice",
		})
		return err
	}))
	held := func(t assert.TestingT, ids []uuid.UUID) int {
		return b.count(t, `SELECT count(*) FROM reservations WHERE id = ANY($1) AND status = 'held'`, ids)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cp, err := b.campaigns.Get(ctx, "c1")
		assert.NoError(c, err)
		assert.Equal(c, campaigns.StatusActive, cp.Status)
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, stuck, held(t, stuckIDs), "the campaign opened while the locked row's holds still waited")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, stuck, held(c, all), "every hold not on the locked row expired meanwhile")
	}, 60*time.Second, 50*time.Millisecond)

	unlock()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Zero(c, held(c, all)) }, 60*time.Second, 50*time.Millisecond)
	var once int
	var lag float64
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE n = 1), max(lag)
		FROM (SELECT r.id, count(l.id) AS n, extract(epoch FROM r.released_at - r.expires_at)::float8 AS lag
		      FROM reservations r
		      LEFT JOIN ledger l ON l.reservation_id = r.id AND l.kind = 'expire' AND l.actor = 'system:expire_holds'
		      WHERE r.id = ANY($1) AND r.status = 'expired'
		      GROUP BY r.id) x`, all).Scan(&once, &lag))
	require.Equal(t, len(all), once, "each hold expired exactly once, by the expiry loop")
	t.Logf("%d holds expired; the latest %.2f s late (the locked row's, after its lock went)", len(all), lag)
}

// lockStock keeps sku's main stock row locked from another session until
// unlock is called, as a DBA's open `SELECT ... FOR UPDATE` would.
func lockStock(t *testing.T, b *bundle, sku string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM stock WHERE sku = $1 FOR UPDATE`, sku)
	require.NoError(t, err)
	var once sync.Once
	unlock = func() { once.Do(func() { require.NoError(t, tx.Commit(ctx)) }) }
	t.Cleanup(unlock)
	return unlock
}

// TestQueueLayout: each kind lands in its own queue wherever it is inserted
// from, and a job due in less than River's scheduler tick is inserted
// available (taken at the first poll after it is due) instead of waiting
// for the scheduler.
func TestQueueLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	soon, later := time.Now().Add(2*time.Second), time.Now().Add(time.Hour)
	for _, p := range []struct {
		args river.JobArgs
		at   time.Time
	}{
		{campaigns.CampaignStartArgs{Campaign: "soon"}, soon},
		{campaigns.CampaignStartArgs{Campaign: "later"}, later},
		{reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI}, time.Time{}},
		{rollbacks.ManualRollbackArgs{Operator: "alice", Reason: "test", Scope: rollbacks.Scope{SKU: "A1"}}, time.Time{}},
		{jobs.ExpireHoldsArgs{}, time.Time{}},
	} {
		_, err := inserter.Insert(ctx, p.args, &river.InsertOpts{ScheduledAt: p.at})
		require.NoError(t, err)
	}
	rows, err := pool.Query(ctx, `SELECT kind || ':' || coalesce(args->>'campaign', '') || ':' || queue || ':' || state FROM river_job ORDER BY id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"campaign_start:soon:campaigns:available",
		"campaign_start:later:campaigns:scheduled",
		"reconcile::reconcile:available",
		"manual_rollback::default:available",
		"expire_holds::expiry:available",
	}, got)
}
