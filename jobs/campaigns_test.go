package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/jobs"
)

// createCampaign creates a campaign that starts now and waits until its
// start job has opened it.
func createCampaign(t *testing.T, b *bundle, id string, allot ...campaigns.Allotment) campaigns.Campaign {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: id, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 600, Allotments: allot, Actor: "alice",
		})
		return err
	})
	require.NoError(t, err)
	var c campaigns.Campaign
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		c, err = b.campaigns.Get(ctx, id)
		assert.NoError(ct, err)
		assert.Equal(ct, campaigns.StatusActive, c.Status)
	}, 15*time.Second, 50*time.Millisecond)
	return c
}

func (b *bundle) waitRolledBack(t *testing.T, id string) campaigns.Campaign {
	t.Helper()
	var c campaigns.Campaign
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var err error
		c, err = b.campaigns.Get(context.Background(), id)
		assert.NoError(ct, err)
		assert.Equal(ct, campaigns.StatusRolledBack, c.Status)
	}, 60*time.Second, 100*time.Millisecond)
	return c
}

func (b *bundle) campaignHolds(t *testing.T, campaign string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{
				Client: "shop", IdempotencyKey: fmt.Sprintf("%s-%d", campaign, i), Campaign: campaign,
				Items: []inventory.Item{{SKU: "FLASH", Quantity: 1}},
			})
			ids[i], errs[i] = r.ID, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return ids
}

// requireReleasedOnce checks, from the ledger, that every hold of ids that
// is not confirmed was handed back exactly once, and confirmed ones never.
func requireReleasedOnce(t *testing.T, b *bundle, ids []uuid.UUID) (confirmed, released int) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT r.status, count(l.id) FILTER (WHERE l.kind IN ('release', 'expire', 'rollback'))
		FROM reservations r LEFT JOIN ledger l ON l.reservation_id = r.id
		WHERE r.id = ANY($1) GROUP BY r.id, r.status`, ids)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		require.NoError(t, rows.Scan(&status, &n))
		switch inventory.HoldStatus(status) {
		case inventory.StatusConfirmed:
			require.Zero(t, n)
			confirmed++
		case inventory.StatusReleased:
			require.Equal(t, 1, n, "released exactly once")
			released++
		default:
			t.Fatalf("hold left %s", status)
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(ids), confirmed+released)
	return confirmed, released
}

func TestCampaignEndRacingConfirms(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{rollbackPause: 20 * time.Millisecond})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "FLASH", 1500)
	createCampaign(t, b, "bf", campaigns.Allotment{SKU: "FLASH", Quantity: 1200})
	ids := b.campaignHolds(t, "bf", 1000)

	// A regular hold of the same SKU is untouched by the campaign's end.
	regular, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "regular", Items: []inventory.Item{{SKU: "FLASH", Quantity: 5}}})
	require.NoError(t, err)

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		confirmed = map[uuid.UUID]bool{}
		refused   = map[uuid.UUID]error{}
	)
	confirm := func(ids []uuid.UUID) {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.inv.Confirm(ctx, id, inventory.Caller{Name: "shop"})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					confirmed[id] = true
				} else {
					refused[id] = err
				}
			}()
		}
	}
	// A third of the holds get a confirm, in four waves spread over the
	// campaign's end: before it, as it ends, once the rollback has released
	// its first holds, and once it has released 300.
	var picked []uuid.UUID
	for _, id := range ids {
		if rand.IntN(3) == 0 {
			picked = append(picked, id)
		}
	}
	wave := func(i int) []uuid.UUID { return picked[i*len(picked)/4 : (i+1)*len(picked)/4] }
	released := func(atLeast int32) {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			c, err := b.campaigns.Get(ctx, "bf")
			if assert.NoError(ct, err) && assert.NotNil(ct, c.Rollback) {
				assert.GreaterOrEqual(ct, c.Rollback.ReleasedCount, atLeast)
			}
		}, 60*time.Second, 5*time.Millisecond)
	}
	confirm(wave(0))
	created, err := b.campaigns.End(ctx, "bf", "alice", "sold out early")
	require.NoError(t, err)
	require.Positive(t, created.RollbackID)
	confirm(wave(1))
	_, _, err = b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "late", Campaign: "bf", Items: []inventory.Item{{SKU: "FLASH", Quantity: 1}}})
	requireCode(t, err, domain.CodeCampaignNotActive)
	released(1)
	confirm(wave(2))
	released(300)
	confirm(wave(3))
	wg.Wait()
	for _, err := range refused {
		requireCode(t, err, domain.CodeNotHeld) // a confirm loses only to the rollback
	}
	t.Logf("%d confirms won, %d lost to the rollback", len(confirmed), len(refused))

	c := b.waitRolledBack(t, "bf")
	nConfirmed, nReleased := requireReleasedOnce(t, b, ids)
	require.Equal(t, len(confirmed), nConfirmed, "every confirmed hold stays confirmed")
	for _, id := range ids {
		if confirmed[id] {
			require.Equal(t, string(inventory.StatusConfirmed), b.status(t, id))
		}
	}
	require.Equal(t, string(inventory.StatusHeld), b.status(t, regular.ID))
	require.NotNil(t, c.Rollback)
	require.Equal(t, "succeeded", c.Rollback.Status)
	require.EqualValues(t, nReleased, c.Rollback.ReleasedCount)
	require.Zero(t, c.Rollback.HeldRemaining)
	require.Len(t, c.Pools, 1)
	pool := c.Pools[0]
	require.EqualValues(t, nConfirmed, pool.Sold)
	require.Zero(t, pool.Available, "the remainder went back to main")
	require.Zero(t, pool.Reserved)
	require.Equal(t, "paused", pool.Status)
	st, err := b.inv.GetStock(ctx, "FLASH")
	require.NoError(t, err)
	main := st.Pools[0]
	require.Equal(t, "main", main.Pool)
	require.EqualValues(t, 1500-nConfirmed, main.Total)
	require.EqualValues(t, 5, main.Reserved)
	requireBatchesAtMost(t, b, 100)
	t.Logf("1000 holds: %d confirmed during the end, %d rolled back in %d batches", nConfirmed, nReleased, c.Rollback.Batches)
}

func TestCampaignEndResumesAfterCrash(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{rollbackPause: 150 * time.Millisecond})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "FLASH", 1000)
	createCampaign(t, b, "crash", campaigns.Allotment{SKU: "FLASH", Quantity: 1000})
	ids := b.campaignHolds(t, "crash", 1000)

	created, err := b.campaigns.End(ctx, "crash", "alice", "test crash")
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := b.rollbacks.Get(ctx, created.RollbackID)
		assert.NoError(c, err)
		assert.GreaterOrEqual(c, r.Batches, int32(3))
	}, 30*time.Second, 10*time.Millisecond)

	// Kill the worker mid-rollback: running jobs are cancelled mid-pause or
	// mid-batch, and their transactions roll back.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	require.NoError(t, b.client.StopAndCancel(stopCtx))
	cancel()
	mid, err := b.rollbacks.Get(ctx, created.RollbackID)
	require.NoError(t, err)
	require.Equal(t, "running", mid.Status)
	require.Less(t, int(mid.ReleasedCount), 1000, "stopped midway")

	// A new process starts.
	client, err := jobs.NewClient(b.pool, jobs.Deps{Inventory: b.inv, Alerts: b.alerts, Rollbacks: b.rollbacks, Campaigns: b.campaigns}, jobs.Config{
		Workers: 10, WatchInterval: 200 * time.Millisecond, RetryBase: 10 * time.Millisecond, Test: true, Log: quiet,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
	})
	b.client = client

	c := b.waitRolledBack(t, "crash")
	_, released := requireReleasedOnce(t, b, ids)
	require.Equal(t, 1000, released)
	require.EqualValues(t, 1000, c.Rollback.ReleasedCount)
	requireBatchesAtMost(t, b, 100)
	st, err := b.inv.GetStock(ctx, "FLASH")
	require.NoError(t, err)
	require.EqualValues(t, 1000, st.Pools[0].Available, "all stock back in main")
}

func TestCampaignWindowAndShortStart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "FLASH", 10)
	hold := func(campaign string) error {
		_, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: uuid.NewString(), Campaign: campaign, Items: []inventory.Item{{SKU: "FLASH", Quantity: 1}}})
		return err
	}

	// Scheduled in the future: no holds yet.
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: "later", StartsAt: time.Now().Add(time.Hour), EndsAt: time.Now().Add(2 * time.Hour), HoldTTLSeconds: 60,
			Allotments: []campaigns.Allotment{{SKU: "FLASH", Quantity: 5}}, Actor: "alice",
		})
		return err
	})
	require.NoError(t, err)
	requireCode(t, hold("later"), domain.CodeCampaignNotActive)

	// Main lacks the stock: the start fails loudly and moves nothing.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: "greedy", StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60,
			Allotments: []campaigns.Allotment{{SKU: "FLASH", Quantity: 50}}, Actor: "alice",
		})
		return err
	})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, b.count(c, `SELECT count(*) FROM alerts WHERE kind = 'campaign_start_failed' AND subject = 'campaign:greedy' AND level = 'critical'`))
	}, 15*time.Second, 50*time.Millisecond)
	c, err := b.campaigns.Get(ctx, "greedy")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusScheduled, c.Status)
	requireCode(t, hold("greedy"), domain.CodeCampaignNotActive)
	st, err := b.inv.GetStock(ctx, "FLASH")
	require.NoError(t, err)
	require.Len(t, st.Pools, 1)
	require.EqualValues(t, 10, st.Pools[0].Available)

	// Ending a campaign that never started rolls it back at once.
	_, err = b.campaigns.End(ctx, "later", "alice", "cancelled")
	require.NoError(t, err)
	b.waitRolledBack(t, "later")
	requireCode(t, hold("later"), domain.CodeCampaignNotActive)
	again, err := b.campaigns.End(ctx, "later", "bob", "twice")
	require.NoError(t, err, "ending again answers the same rollback")
	c, err = b.campaigns.Get(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, c.Rollback.ID, again.RollbackID)
}

func requireCode(t *testing.T, err error, code domain.Code) {
	t.Helper()
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, code, de.Code, de.Detail)
}
