package campaigns_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
)

// The tests here drive campaigns without River's workers: jobs are only
// inserted, and a test plays the worker by calling the step a job would
// (Start, End, the rollback's batches, FinishTx).

type bundle struct {
	pool      *pgxpool.Pool
	inv       *inventory.Service
	rollbacks *rollbacks.Service
}

func setup(t *testing.T) (*campaigns.Service, *bundle) {
	t.Helper()
	return setupWith(t, inventory.Config{})
}

// setupWith is setup with the inventory service's settings cfg.
func setupWith(t *testing.T, cfg inventory.Config) (*campaigns.Service, *bundle) {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	inv := inventory.New(pool, slog.New(slog.DiscardHandler), cfg)
	rb := rollbacks.New(pool, inserter, inv, 0)
	svc := campaigns.New(pool, inserter, inv, rb, alerts.New(pool, inserter, false))
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return svc, &bundle{pool: pool, inv: inv, rollbacks: rb}
}

func (b *bundle) stock(t *testing.T, sku, pool string) stock.Pool {
	t.Helper()
	st, err := b.inv.GetStock(context.Background(), sku)
	require.NoError(t, err)
	for _, p := range st.Pools {
		if p.Pool == pool {
			return p
		}
	}
	t.Fatalf("no pool %s for %s", pool, sku)
	return stock.Pool{}
}

func (b *bundle) hold(campaign, sku string, n int64) (inventory.Reservation, error) {
	r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{
		Client: "shop", IdempotencyKey: uuid.NewString(), Campaign: campaign, Items: []inventory.Item{{SKU: sku, Quantity: n}},
	})
	return r, err
}

func spec(id string, allot ...campaigns.Allotment) campaigns.Request {
	return campaigns.Request{
		ID: id, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 600, Allotments: allot, Actor: "alice",
	}
}

func create(t *testing.T, svc *campaigns.Service, c campaigns.Request) campaigns.Campaign {
	t.Helper()
	out, replayed, err := svc.CreateOnce(context.Background(), idempotency.NewKey("alice", "create-"+c.ID), c)
	require.NoError(t, err)
	require.False(t, replayed)
	return out
}

func requireCode(t *testing.T, err error, code domain.Code) *domain.Error {
	t.Helper()
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, code, de.Code, de.Detail)
	return de
}

func TestCreateValidate(t *testing.T) {
	t.Parallel()
	ok := spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 5})
	require.NoError(t, ok.Validate())
	zero, big := int64(0), int64(inventory.MaxPerOrder+1)
	for _, c := range []struct {
		name     string
		change   func(*campaigns.Request)
		contains string
	}{
		{"no id", func(c *campaigns.Request) { c.ID = "" }, "id"},
		{"named main", func(c *campaigns.Request) { c.ID = stock.MainPool }, "regular pool"},
		{"no start", func(c *campaigns.Request) { c.StartsAt = time.Time{} }, "required"},
		{"ends before it starts", func(c *campaigns.Request) { c.EndsAt = c.StartsAt.Add(-time.Second) }, "after starts_at"},
		{"ended already", func(c *campaigns.Request) {
			c.StartsAt, c.EndsAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
		}, "in the past"},
		{"no TTL", func(c *campaigns.Request) { c.HoldTTLSeconds = 0 }, "hold_ttl_seconds"},
		{"TTL too long", func(c *campaigns.Request) { c.HoldTTLSeconds = inventory.MaxTTLSeconds + 1 }, "hold_ttl_seconds"},
		{"zero cap", func(c *campaigns.Request) { c.MaxPerOrder = &zero }, "max_per_order"},
		{"cap too big", func(c *campaigns.Request) { c.MaxPerOrder = &big }, "max_per_order"},
		{"no allotments", func(c *campaigns.Request) { c.Allotments = nil }, "allotments"},
		{"too many allotments", func(c *campaigns.Request) {
			c.Allotments = make([]campaigns.Allotment, campaigns.MaxAllotments+1)
		}, "allotments"},
		{"a SKU twice", func(c *campaigns.Request) {
			c.Allotments = []campaigns.Allotment{{SKU: "A1", Quantity: 1}, {SKU: "A1", Quantity: 2}}
		}, "twice"},
		{"zero quantity", func(c *campaigns.Request) { c.Allotments[0].Quantity = 0 }, "quantity"},
	} {
		c2 := ok
		c2.Allotments = append([]campaigns.Allotment(nil), ok.Allotments...)
		c.change(&c2)
		de := requireCode(t, c2.Validate(), domain.CodeInvalid)
		require.Contains(t, de.Detail, c.contains, c.name)
	}
}

// TestCreateSchedulesItsStartAndEnd: a campaign is recorded with its
// campaign_start and campaign_end jobs, due at its start and end, in one
// transaction; an id in use is a conflict; a replayed create answers the
// same campaign and records nothing more.
func TestCreateSchedulesItsStartAndEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	c := spec("bf", campaigns.Allotment{SKU: "B2", Quantity: 3}, campaigns.Allotment{SKU: "A1", Quantity: 5})
	c.StartsAt = time.Now().Add(time.Hour)
	c.EndsAt = c.StartsAt.Add(time.Hour)

	// The caller's transaction fails after the create: nothing is left.
	boom := errors.New("the caller's next step fails")
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := svc.CreateTx(ctx, tx, c)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM campaigns`))
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(b.pool), campaigns.CampaignStartArgs{}, nil)
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(b.pool), campaigns.CampaignEndArgs{}, nil)

	key := idempotency.NewKey("alice", "k1", []byte("bf"))
	got, replayed, err := svc.CreateOnce(ctx, key, c)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, campaigns.StatusScheduled, got.Status)
	require.Equal(t, []campaigns.Allotment{{SKU: "A1", Location: "default", Quantity: 5}, {SKU: "B2", Location: "default", Quantity: 3}}, got.Allotments, "by SKU")
	require.Empty(t, got.Pools, "no stock moves before the start")
	require.Equal(t, "alice", got.CreatedBy)
	require.EqualValues(t, 600, got.HoldTTLSeconds)

	scheduled := []rivertest.ExpectedJob{
		{Args: campaigns.CampaignStartArgs{}, Opts: &rivertest.RequireInsertedOpts{ScheduledAt: c.StartsAt}},
		{Args: campaigns.CampaignEndArgs{}, Opts: &rivertest.RequireInsertedOpts{ScheduledAt: c.EndsAt}},
	}
	jobs := rivertest.RequireManyInserted(ctx, t, riverpgxv5.New(b.pool), scheduled)
	require.JSONEq(t, `{"campaign": "bf"}`, string(jobs[0].EncodedArgs))
	require.JSONEq(t, `{"campaign": "bf"}`, string(jobs[1].EncodedArgs))

	again, replayed, err := svc.CreateOnce(ctx, key, c)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, got.ID, again.ID)
	require.True(t, got.CreatedAt.Equal(again.CreatedAt))

	_, _, err = svc.CreateOnce(ctx, idempotency.NewKey("alice", "k2", []byte("bf again")), c)
	requireCode(t, err, domain.CodeConflict)
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM campaigns`))
	rivertest.RequireManyInserted(ctx, t, riverpgxv5.New(b.pool), scheduled)

	_, err = svc.Get(ctx, "nope")
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeUnknownCampaign})
}

// TestStartIsAllOrNothing: a start that main lacks stock for moves
// nothing, takes no holds, and raises a critical alert; once main has the
// stock it moves every allotment and opens; starting again changes nothing.
func TestStartIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B2", 3)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 5}, campaigns.Allotment{SKU: "B2", Quantity: 4}))
	_, err := b.hold("bf", "A1", 1)
	requireCode(t, err, domain.CodeCampaignNotActive)

	err = svc.Start(ctx, "bf")
	de := requireCode(t, err, domain.CodeInsufficientAvailable)
	require.Contains(t, de.Detail, "B2 needs 4")
	require.NotContains(t, de.Detail, "A1", "only the short SKU is named")
	require.EqualValues(t, 10, b.stock(t, "A1", "main").Available, "nothing moved")
	c, err := svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusScheduled, c.Status)
	require.Empty(t, c.Pools)
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM alerts WHERE kind = 'campaign_start_failed' AND subject = 'campaign:bf' AND level = 'critical'`))
	_, err = b.hold("bf", "A1", 1)
	requireCode(t, err, domain.CodeCampaignNotActive)

	dbtest.StockIn(t, b.pool, "B2", 1)
	require.NoError(t, svc.Start(ctx, "bf"))
	require.NoError(t, svc.Start(ctx, "bf"), "a second start (a retried job) is a no-op")
	c, err = svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusActive, c.Status)
	require.NotNil(t, c.StartedAt)
	require.Equal(t, []campaigns.Pool{
		{SKU: "A1", Location: "default", Total: 5, Available: 5, Status: "on_sale"},
		{SKU: "B2", Location: "default", Total: 4, Available: 4, Status: "on_sale"},
	}, c.Pools)
	require.EqualValues(t, 5, b.stock(t, "A1", "main").Available)
	require.Zero(t, b.stock(t, "B2", "main").Available)
	r, err := b.hold("bf", "A1", 2)
	require.NoError(t, err)
	require.Equal(t, []inventory.HeldItem{{SKU: "A1", Pool: "bf", Quantity: 2, Location: "default"}}, r.Items, "held from the campaign's pool")
}

// TestEndRollsBackAndFinishes ends an active campaign: it takes no more
// holds, its unpaid holds are rolled back by a campaign_end rollback (run
// here batch by batch), and its finish moves the remainder back to main
// and enqueues a reconciliation of its SKUs, while what was sold stays.
func TestEndRollsBackAndFinishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 200)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 150}))
	require.NoError(t, svc.Start(ctx, "bf"))
	var held []uuid.UUID
	for range 120 {
		r, err := b.hold("bf", "A1", 1)
		require.NoError(t, err)
		held = append(held, r.ID)
	}
	for _, id := range held[:20] {
		_, err := b.inv.Confirm(ctx, id, inventory.Caller{Name: "shop"})
		require.NoError(t, err)
	}
	regular, err := b.hold("", "A1", 3)
	require.NoError(t, err)

	_, err = svc.End(ctx, "bf", "", strings.Repeat("x", domain.MaxTextLength+1))
	requireCode(t, err, domain.CodeInvalid)
	_, err = svc.End(ctx, "nope", "alice", "x")
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeUnknownCampaign})

	waiting := func(id string) int {
		return dbtest.Count(t, b.pool, `SELECT count(*) FROM river_job WHERE kind IN ('campaign_start', 'campaign_end')
			AND state IN ('available', 'scheduled', 'retryable') AND args->>'campaign' = $1`, id)
	}
	require.Positive(t, waiting("bf"), "its end (and, started by hand here, its start) wait in the backlog")
	created, err := svc.End(ctx, "bf", "alice", "sold out")
	require.NoError(t, err)
	require.Zero(t, waiting("bf"), "ended early: its scheduled end leaves the job backlog")
	_, err = b.hold("bf", "A1", 1)
	requireCode(t, err, domain.CodeCampaignNotActive)
	again, err := svc.End(ctx, "bf", "bob", "twice")
	require.NoError(t, err)
	require.Equal(t, created, again, "ending again answers the same rollback")

	c, err := svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusEnded, c.Status)
	require.Equal(t, "alice", *c.EndedBy)
	require.Equal(t, "sold out", *c.EndReason)
	require.Equal(t, "paused", c.Pools[0].Status)
	require.NotNil(t, c.Rollback)
	require.Equal(t, rollbacks.SourceCampaignEnd, c.Rollback.Source)
	require.Equal(t, rollbacks.Scope{Campaign: "bf"}, c.Rollback.Scope)
	require.EqualValues(t, 100, c.Rollback.HeldRemaining)

	// Play the rollback's chain: its last batch finishes the campaign.
	job := created.JobID
	for range 5 {
		batch, err := svc.RollbackBatch(ctx, created.RollbackID, job)
		require.NoError(t, err)
		if batch.Finished {
			break
		}
		require.NotNil(t, batch.Next)
		c, err := svc.Get(ctx, "bf")
		require.NoError(t, err)
		require.Equal(t, campaigns.StatusEnded, c.Status, "not finished while holds are left")
		job = batch.Next.ID
	}
	c, err = svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, c.Status)
	require.Equal(t, "succeeded", c.Rollback.Status)
	require.EqualValues(t, 100, c.Rollback.ReleasedCount)
	require.Zero(t, c.Rollback.HeldRemaining)
	require.Equal(t, []campaigns.Pool{{SKU: "A1", Location: "default", Total: 20, Available: 0, Sold: 20, Status: "paused"}}, c.Pools,
		"the sold units stay in the pool as the record of the sale")
	st, err := b.inv.GetStock(ctx, "A1")
	require.NoError(t, err)
	require.Len(t, st.Pools, 1, "the ended campaign's pool is history, on the campaign's page only")
	require.Equal(t, stock.MainPool, st.Pools[0].Pool)
	main := b.stock(t, "A1", "main")
	require.EqualValues(t, 180, main.Total)
	require.EqualValues(t, 3, main.Reserved, "the regular hold is untouched")
	require.EqualValues(t, 177, main.Available)
	r, err := b.inv.Get(ctx, regular.ID, inventory.Caller{Ops: true})
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, r.Status)
	rec := rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), reconcile.ReconcileArgs{}, nil)
	require.Equal(t, []string{"A1"}, rec.Args.SKUs)

	// Finishing again (a duplicated last batch) changes nothing.
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return svc.FinishTx(ctx, tx, "bf", "x") }))
	rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), reconcile.ReconcileArgs{}, nil) // still one
	require.EqualValues(t, 177, b.stock(t, "A1", "main").Available)
}

// TestEndBeforeStart: a campaign ended before it started has nothing to
// roll back; its start job, run afterwards, leaves it alone.
func TestEndBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	c := spec("later", campaigns.Allotment{SKU: "A1", Quantity: 5})
	c.StartsAt, c.EndsAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	create(t, svc, c)

	created, err := svc.End(ctx, "later", "alice", "cancelled")
	require.NoError(t, err)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM river_job WHERE kind IN ('campaign_start', 'campaign_end')
		AND state IN ('available', 'scheduled', 'retryable') AND args->>'campaign' = 'later'`), "neither step waits any more")
	require.NoError(t, svc.Start(ctx, "later"), "the start job finds it ended")
	got, err := svc.Get(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusEnded, got.Status)
	require.Empty(t, got.Pools)
	require.EqualValues(t, 10, b.stock(t, "A1", "main").Available, "nothing moved")

	batch, err := svc.RollbackBatch(ctx, created.RollbackID, created.JobID)
	require.NoError(t, err)
	require.True(t, batch.Finished, "nothing was held")
	require.Zero(t, batch.Released)
	got, err = svc.Get(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, got.Status)
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(b.pool), reconcile.ReconcileArgs{}, nil) // no SKU to reconcile
}

// TestResumeGivesEachStepAJob: a campaign whose next step lost its job
// gets one (its start, its end), once; a live job is left as it is.
func TestResumeGivesEachStepAJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	c := spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 5})
	c.StartsAt = time.Now().Add(time.Hour)
	c.EndsAt = c.StartsAt.Add(time.Hour)
	create(t, svc, c)
	resume := func() (string, *int64) {
		t.Helper()
		var did string
		var job *int64
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
			did, job, err = svc.ResumeTx(ctx, tx, "bf", "bob")
			return err
		}))
		return did, job
	}
	live := &rivertest.RequireInsertedOpts{State: rivertype.JobStateScheduled}

	did, job := resume()
	require.Empty(t, did, "its start job is live")
	require.Equal(t, rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), campaigns.CampaignStartArgs{}, live).ID, *job)

	_, err := b.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'campaign_start'`)
	require.NoError(t, err)
	did, job = resume()
	require.Contains(t, did, "campaign_start job")
	dueAtStart := &rivertest.RequireInsertedOpts{State: rivertype.JobStateScheduled, ScheduledAt: c.StartsAt}
	require.Equal(t, rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), campaigns.CampaignStartArgs{}, dueAtStart).ID, *job)
	did, _ = resume()
	require.Empty(t, did, "resuming again does nothing")
	rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), campaigns.CampaignStartArgs{}, nil) // still one

	// Started, with its end job gone.
	_, err = b.pool.Exec(ctx, `UPDATE campaigns SET starts_at = now() - interval '1 minute' WHERE id = 'bf'`)
	require.NoError(t, err)
	require.NoError(t, svc.Start(ctx, "bf"))
	_, err = b.pool.Exec(ctx, `DELETE FROM river_job`)
	require.NoError(t, err)
	did, job = resume()
	require.Contains(t, did, "campaign_end job")
	require.Equal(t, rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), campaigns.CampaignEndArgs{}, live).ID, *job)

	var missing error
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, _, missing = svc.ResumeTx(ctx, tx, "nope", "bob")
		return nil
	}))
	require.ErrorIs(t, missing, &domain.Error{Code: domain.CodeUnknownCampaign})
}

// TestRollbackBatchFinishesOnlyACampaignEnd: an operator's rollback scoped
// to an active campaign releases its holds through the same batches, but
// only a campaign's end finishes the campaign.
func TestRollbackBatchFinishesOnlyACampaignEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 5}))
	require.NoError(t, svc.Start(ctx, "bf"))
	_, err := b.hold("bf", "A1", 2)
	require.NoError(t, err)
	created, err := b.rollbacks.Create(ctx, rollbacks.Request{
		Operator: "alice", Reason: "bad batch of orders", Scope: rollbacks.Scope{Campaign: "bf"}, Source: rollbacks.SourceCLI,
	})
	require.NoError(t, err)
	accepted, err := b.rollbacks.Accept(ctx, created.JobID, time.Now(), rollbacks.ManualRollbackArgs{RollbackID: created.RollbackID})
	require.NoError(t, err)
	require.NotNil(t, accepted.JobID)
	job := rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.RollbackBatchArgs{}, nil)
	require.Equal(t, created.RollbackID, job.Args.RollbackID)

	batch, err := svc.RollbackBatch(ctx, created.RollbackID, job.ID)
	require.NoError(t, err)
	require.True(t, batch.Finished)
	require.Equal(t, 1, batch.Released)
	c, err := svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusActive, c.Status, "still on sale")
	require.Equal(t, []campaigns.Pool{{SKU: "A1", Location: "default", Total: 5, Available: 5, Status: "on_sale"}}, c.Pools)
	// The one reconciliation asked for is the manual rollback's own (of
	// the SKUs it covered), not a campaign end's.
	rj := rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), reconcile.ReconcileArgs{}, nil)
	var trigger string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT trigger FROM reconcile_runs WHERE id = $1`, rj.Args.RunID).Scan(&trigger))
	require.Equal(t, reconcile.TriggerRollback, trigger)
}

// TestAManualRollbackOfAnEndedCampaignDoesNotFinishIt: only the campaign
// end's own rollback finishes a campaign. A manual rollback of the same
// campaign with an earlier cut-off finishes first, while the end's
// rollback still has holds to release; had it finished the campaign, the
// remainder would have gone back to main and the holds released after
// would have left their units stranded in the campaign's pool.
func TestAManualRollbackOfAnEndedCampaignDoesNotFinishIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 5}))
	require.NoError(t, svc.Start(ctx, "bf"))
	_, err := b.hold("bf", "A1", 1)
	require.NoError(t, err)
	manual, err := b.rollbacks.Create(ctx, rollbacks.Request{
		Operator: "alice", Reason: "bad batch of orders", Scope: rollbacks.Scope{Campaign: "bf"}, Source: rollbacks.SourceCLI,
	})
	require.NoError(t, err)
	late, err := b.hold("bf", "A1", 2) // after the manual rollback's cut-off
	require.NoError(t, err)
	ended, err := svc.End(ctx, "bf", "bob", "sold out")
	require.NoError(t, err)

	_, err = b.rollbacks.Accept(ctx, manual.JobID, time.Now(), rollbacks.ManualRollbackArgs{RollbackID: manual.RollbackID})
	require.NoError(t, err)
	var job int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = 'rollback_batch' AND (args->>'rollback_id')::bigint = $1`,
		manual.RollbackID).Scan(&job))
	batch, err := svc.RollbackBatch(ctx, manual.RollbackID, job)
	require.NoError(t, err)
	require.True(t, batch.Finished)
	require.Equal(t, 1, batch.Released)
	c, err := svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusEnded, c.Status, "the manual rollback does not finish the campaign")
	require.Equal(t, []campaigns.Pool{{SKU: "A1", Location: "default", Total: 5, Available: 3, Reserved: 2, Status: "paused"}}, c.Pools)
	require.Equal(t, string(inventory.StatusHeld), mustStatus(t, b, late.ID))

	// The end's own rollback releases the late hold and finishes.
	batch, err = svc.RollbackBatch(ctx, ended.RollbackID, ended.JobID)
	require.NoError(t, err)
	require.True(t, batch.Finished)
	c, err = svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, c.Status)
	require.EqualValues(t, 10, b.stock(t, "A1", "main").Available, "every unit back in main")
}

func mustStatus(t *testing.T, b *bundle, id uuid.UUID) string {
	t.Helper()
	r, err := b.inv.Get(context.Background(), id, inventory.Caller{Ops: true})
	require.NoError(t, err)
	return string(r.Status)
}

// TestCampaignOfSeats: a campaign carves N units with an identity out of
// main; its holds take them by name or together; at its end the unsold
// units (held ones once the rollback hands them back) go back to main,
// each exactly once, and the sold ones stay as the record of the sale.
func TestCampaignOfSeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	var plan []stock.UnitSpec
	for p := int32(1); p <= 10; p++ {
		pos := p
		plan = append(plan, stock.UnitSpec{ID: fmt.Sprintf("A-%02d", p), Group: "A", Position: &pos})
	}
	_, _, err := b.inv.AddUnitsOnce(ctx, idempotency.NewKey("ops", "plan"), stock.UnitsChange{SKU: "GIG", Reason: "plan", Actor: "ops", Units: plan})
	require.NoError(t, err)
	create(t, svc, spec("presale", campaigns.Allotment{SKU: "GIG", Quantity: 6}))
	require.NoError(t, svc.Start(ctx, "presale"))
	require.EqualValues(t, 6, b.stock(t, "GIG", "presale").Available)
	require.EqualValues(t, 4, b.stock(t, "GIG", "main").Available)
	var inPresale []string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM units WHERE sku = 'GIG' AND pool = 'presale'`).Scan(&inPresale))
	require.Equal(t, []string{"A-01", "A-02", "A-03", "A-04", "A-05", "A-06"}, inPresale, "the first six in seat order")

	hold := func(item inventory.Item) (inventory.Reservation, error) {
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: uuid.NewString(), Campaign: "presale", Items: []inventory.Item{item}})
		return r, err
	}
	_, err = hold(inventory.Item{SKU: "GIG", Units: []string{"A-08"}})
	requireCode(t, err, domain.CodeUnitUnavailable) // a seat of main, not of the presale
	sold, err := hold(inventory.Item{SKU: "GIG", Units: []string{"A-02", "A-03"}})
	require.NoError(t, err)
	_, err = b.inv.Confirm(ctx, sold.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	together, err := hold(inventory.Item{SKU: "GIG", Quantity: 2, Adjacent: true})
	require.NoError(t, err)
	require.Equal(t, []string{"A-04", "A-05"}, together.Items[0].Units)

	created, err := svc.End(ctx, "presale", "alice", "presale over")
	require.NoError(t, err)
	for job := created.JobID; ; {
		batch, err := svc.RollbackBatch(ctx, created.RollbackID, job)
		require.NoError(t, err)
		if batch.Finished {
			break
		}
		job = batch.Next.ID
	}
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return svc.FinishTx(ctx, tx, "presale", "x") }))

	status := map[string]string{}
	rows, err := b.pool.Query(ctx, `SELECT id, pool || ':' || status FROM units WHERE sku = 'GIG'`)
	require.NoError(t, err)
	for rows.Next() {
		var id, st string
		require.NoError(t, rows.Scan(&id, &st))
		status[id] = st
	}
	require.NoError(t, rows.Err())
	for id, want := range map[string]string{"A-01": "main:available", "A-02": "presale:sold", "A-03": "presale:sold",
		"A-04": "main:available", "A-05": "main:available", "A-06": "main:available", "A-10": "main:available"} {
		require.Equal(t, want, status[id], id)
	}
	// The ended presale's pool, history now, on its campaign's page.
	ended, err := svc.Get(ctx, "presale")
	require.NoError(t, err)
	require.Len(t, ended.Pools, 1)
	p := ended.Pools[0]
	require.Equal(t, [3]int64{2, 0, 2}, [3]int64{p.Total, p.Available, p.Sold})
	require.EqualValues(t, 8, b.stock(t, "GIG", "main").Available)

	// A campaign may name the seats it carves out; one not available in
	// main keeps it from starting, and moves nothing.
	create(t, svc, spec("vip", campaigns.Allotment{SKU: "GIG", Quantity: 2, Units: []string{"A-10", "A-02"}}))
	err = svc.Start(ctx, "vip")
	requireCode(t, err, domain.CodeInsufficientAvailable)
	require.Contains(t, err.Error(), "A-02")
	create(t, svc, spec("vip2", campaigns.Allotment{SKU: "GIG", Quantity: 2, Units: []string{"A-10", "A-09"}}))
	require.NoError(t, svc.Start(ctx, "vip2"))
	c, err := svc.Get(ctx, "vip2")
	require.NoError(t, err)
	require.Equal(t, []string{"A-10", "A-09"}, c.Allotments[0].Units)
	var inVIP []string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM units WHERE sku = 'GIG' AND pool = 'vip2'`).Scan(&inVIP))
	require.Equal(t, []string{"A-09", "A-10"}, inVIP)
	_, _, err = svc.CreateOnce(ctx, idempotency.NewKey("ops", "bad"), spec("vip3", campaigns.Allotment{SKU: "GIG", Quantity: 3, Units: []string{"A-01"}}))
	requireCode(t, err, domain.CodeInvalid)
	// Each unit left the presale once: one transfer row back naming four.
	var back []string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT units FROM ledger WHERE sku = 'GIG' AND pool = 'main' AND kind = 'transfer' AND delta_total > 0`).Scan(&back))
	require.Equal(t, []string{"A-01", "A-04", "A-05", "A-06"}, back)
}

// finish plays a campaign end's rollback chain to its last batch, which
// finishes the campaign.
func finish(t *testing.T, svc *campaigns.Service, created rollbacks.Created) {
	t.Helper()
	for job := created.JobID; ; {
		batch, err := svc.RollbackBatch(context.Background(), created.RollbackID, job)
		require.NoError(t, err)
		if batch.Finished {
			return
		}
		require.NotNil(t, batch.Next)
		job = batch.Next.ID
	}
}

// stockAt is sku's row (location, pool), or zero counters when it is not
// listed.
func (b *bundle) stockAt(t *testing.T, sku, location, pool string) stock.Pool {
	t.Helper()
	st, err := b.inv.GetStock(context.Background(), sku)
	require.NoError(t, err)
	for _, p := range st.Pools {
		if p.Pool == pool && p.Location == location {
			return p
		}
	}
	return stock.Pool{}
}

// TestEndAtAnotherLocation: a campaign
// whose allotment is at paris (stock +10 there, 6 allotted, a hold) ends,
// which pauses its pool at paris (not a pool at default it does not have),
// rolls its unpaid hold back and gives the 6 back to main at paris. With
// allotments at default and paris together, the end pauses both, the
// finish gives both back, and until then each is paused and resumed on its
// own.
func TestEndAtAnotherLocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.Location(t, b.pool, "paris", 2)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	c := spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 6})
	c.Location = "paris"
	create(t, svc, c)
	require.NoError(t, svc.Start(ctx, "bf"))
	require.EqualValues(t, 4, b.stockAt(t, "A1", "paris", "main").Available)
	h, err := b.hold("bf", "A1", 2)
	require.NoError(t, err)
	require.Equal(t, "paris", h.Items[0].Location)

	created, err := svc.End(ctx, "bf", "alice", "over")
	require.NoError(t, err, "the end pauses the pool where it is")
	_, err = b.hold("bf", "A1", 1)
	requireCode(t, err, domain.CodeCampaignNotActive)
	got, err := svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, []campaigns.Pool{{SKU: "A1", Location: "paris", Total: 6, Available: 4, Reserved: 2, Status: "paused"}}, got.Pools)
	again, err := svc.End(ctx, "bf", "", "") // the campaign_end job, due at ends_at
	require.NoError(t, err)
	require.Equal(t, created, again)

	finish(t, svc, created)
	got, err = svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, got.Status)
	require.Equal(t, string(inventory.StatusReleased), mustStatus(t, b, h.ID), "its unpaid hold rolled back")
	main := b.stockAt(t, "A1", "paris", "main")
	require.EqualValues(t, 10, main.Total, "every unit back in main at paris")
	require.EqualValues(t, 10, main.Available)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM stock WHERE location = 'default'`), "nothing made at default")

	// Allotments at default and paris together.
	dbtest.StockIn(t, b.pool, "A1", 10)
	create(t, svc, spec("two", campaigns.Allotment{SKU: "A1", Quantity: 3}, campaigns.Allotment{SKU: "A1", Location: "paris", Quantity: 5}))
	require.NoError(t, svc.Start(ctx, "two"))
	require.EqualValues(t, 7, b.stockAt(t, "A1", "default", "main").Available)
	require.EqualValues(t, 5, b.stockAt(t, "A1", "paris", "main").Available)
	for _, loc := range []string{"default", "paris"} {
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: uuid.NewString(), Campaign: "two",
			Items: []inventory.Item{{SKU: "A1", Quantity: 1, Location: loc}}})
		require.NoError(t, err)
		require.Equal(t, loc, r.Items[0].Location)
		_, err = b.inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
		require.NoError(t, err)
	}
	// Paused and resumed per location: the campaign's switch flips both,
	// a resume of one row lifts that row alone.
	sw, err := b.inv.SwitchPool(ctx, stock.PoolSwitch{Pool: "two", Reason: "price check", Actor: "alice"})
	require.NoError(t, err)
	require.Equal(t, 2, sw.Changed)
	_, err = b.inv.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Location: "paris", Pool: "two", Reason: "ok", Actor: "alice"}})
	require.NoError(t, err)
	require.Equal(t, stock.StockPaused, b.stockAt(t, "A1", "default", "two").Status)
	require.Equal(t, stock.StockOnSale, b.stockAt(t, "A1", "paris", "two").Status)
	sw, err = b.inv.SwitchPool(ctx, stock.PoolSwitch{Pool: "two", On: true, Reason: "ok", Actor: "alice"})
	require.NoError(t, err)
	require.Equal(t, 1, sw.Changed)

	created, err = svc.End(ctx, "two", "alice", "over")
	require.NoError(t, err)
	got, err = svc.Get(ctx, "two")
	require.NoError(t, err)
	require.Equal(t, []campaigns.Pool{
		{SKU: "A1", Location: "default", Total: 3, Available: 2, Sold: 1, Status: "paused"},
		{SKU: "A1", Location: "paris", Total: 5, Available: 4, Sold: 1, Status: "paused"},
	}, got.Pools, "each pool paused where it is")
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE pool = 'two' AND kind = 'pause' AND location = 'paris' AND actor = 'alice' AND reason = 'campaign two ended'`))
	finish(t, svc, created)
	require.EqualValues(t, 9, b.stockAt(t, "A1", "default", "main").Available, "the 2 unsold back at default")
	require.EqualValues(t, 9, b.stockAt(t, "A1", "paris", "main").Available, "the 4 unsold back at paris")
	got, err = svc.Get(ctx, "two")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, got.Status)
}

// TestFinishGivesBackEveryState: a campaign at default and paris whose
// pools hold units in every state on hand when it ends (available,
// quality control, damaged, safety stock; one sold, one held) gives all of
// them back to main at the same location, each in its state, with a pair
// of transfer ledger rows per pool, in the finishing transaction; the sold
// unit stays as sold. From the end on, its pools take no move.
func TestFinishGivesBackEveryState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.Location(t, b.pool, "paris", 2)
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockInAt(t, b.pool, "A1", "paris", 10)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 10}, campaigns.Allotment{SKU: "A1", Location: "paris", Quantity: 10}))
	require.NoError(t, svc.Start(ctx, "bf"))
	move := func(loc, to string, n int64) error {
		_, _, err := b.inv.MoveOnce(ctx, idempotency.NewKey("ops", uuid.NewString()),
			stock.Move{SKU: "A1", Location: loc, Pool: "bf", From: stock.StateAvailable, To: to, Quantity: n, Reason: "x", Actor: "ops"})
		return err
	}
	for _, loc := range []string{"default", "paris"} {
		require.NoError(t, move(loc, stock.StateQualityControl, 1))
		require.NoError(t, move(loc, stock.StateDamaged, 2))
		require.NoError(t, move(loc, stock.StateSafetyStock, 3))
	}
	sold, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "sold", Campaign: "bf",
		Items: []inventory.Item{{SKU: "A1", Quantity: 1, Location: "paris"}}})
	require.NoError(t, err)
	_, err = b.inv.Confirm(ctx, sold.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	unpaid, err := b.hold("bf", "A1", 1)
	require.NoError(t, err)

	created, err := svc.End(ctx, "bf", "alice", "over")
	require.NoError(t, err)
	requireCode(t, move("paris", stock.StateDamaged, 1), domain.CodeCampaignEnded)
	finish(t, svc, created)
	require.Equal(t, string(inventory.StatusReleased), mustStatus(t, b, unpaid.ID))

	c, err := svc.Get(ctx, "bf")
	require.NoError(t, err)
	require.Equal(t, []campaigns.Pool{
		{SKU: "A1", Location: "default", Status: "paused"},
		{SKU: "A1", Location: "paris", Total: 1, Sold: 1, Status: "paused"},
	}, c.Pools, "nothing on hand is left, the sold unit stays")
	for _, loc := range []string{"default", "paris"} {
		m := b.stockAt(t, "A1", loc, "main")
		want := [5]int64{10, 4, 1, 2, 3} // total, available, quality control, damaged, safety stock
		if loc == "paris" {
			want = [5]int64{9, 3, 1, 2, 3}
		}
		require.Equal(t, want, [5]int64{m.Total, m.Available, m.QualityControl, m.Damaged, m.SafetyStock}, loc)
		require.Nil(t, func() *stock.Pool {
			if p := b.stockAt(t, "A1", loc, "bf"); p.Pool != "" {
				return &p
			}
			return nil
		}(), "the finished pool at %s holds only what it sold: history", loc)
	}
	// One pair of transfer rows per pool, naming every state.
	require.Equal(t, 2, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE pool = 'main' AND kind = 'transfer' AND ref = 'bf'
		AND delta_quality_control = 1 AND delta_damaged = 2 AND delta_safety_stock = 3 AND delta_total = delta_available + 6`))
	requireCode(t, move("paris", stock.StateDamaged, 1), domain.CodeCampaignEnded)
}

// TestEndRacesOperatorWrites races an end and its finish against
// operators' writes on the campaign's pool (moves between states,
// adjustments, transfers to berlin and their receipts and cancels): each
// write commits before the end and is given back, or after it and is
// refused (campaign_ended) or lands in main; nothing deadlocks, and once
// the transfers left in transit are received or cancelled the campaign's
// pools hold nothing but what it sold, with every unit accounted for.
func TestEndRacesOperatorWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.Location(t, b.pool, "berlin", 2)
	dbtest.StockIn(t, b.pool, "A1", 300)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 200}))
	require.NoError(t, svc.Start(ctx, "bf"))
	sold, err := b.hold("bf", "A1", 2)
	require.NoError(t, err)
	_, err = b.inv.Confirm(ctx, sold.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)

	const workers = 4
	var (
		wg        sync.WaitGroup
		stop      = make(chan struct{})
		refused   atomic.Int64                // writes refused as campaign_ended
		ops       = make(chan struct{}, 1024) // a write done, or refused as it may be
		adjusted  atomic.Int64                // units adjustments added
		mu        sync.Mutex
		transfers []uuid.UUID
		bad       = make(chan error, workers)
	)
	fine := func(err error) bool {
		var de *domain.Error
		if !errors.As(err, &de) {
			return err == nil
		}
		switch de.Code {
		case domain.CodeCampaignEnded:
			refused.Add(1)
			return true
		case domain.CodeInsufficientAvailable, domain.CodeInsufficientQualityControl, domain.CodeTransferNotInTransit, domain.CodeBusy:
			return true
		}
		return false
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := idempotency.NewKey("ops", fmt.Sprintf("w%d-%d", w, i))
				var err error
				switch i % 5 {
				case 0:
					_, _, err = b.inv.MoveOnce(ctx, key, stock.Move{SKU: "A1", Pool: "bf", From: stock.StateAvailable, To: stock.StateQualityControl, Quantity: 1, Reason: "x", Actor: "ops"})
				case 1:
					_, _, err = b.inv.MoveOnce(ctx, key, stock.Move{SKU: "A1", Pool: "bf", From: stock.StateQualityControl, To: stock.StateAvailable, Quantity: 1, Reason: "x", Actor: "ops"})
				case 2:
					if _, _, err = b.inv.AdjustOnce(ctx, key, stock.Adjustment{SKU: "A1", Pool: "bf", Delta: 1, Reason: "x", Actor: "ops"}); err == nil {
						adjusted.Add(1)
					}
				case 3:
					var tr stock.Transfer
					if tr, _, err = b.inv.CreateTransferOnce(ctx, key, stock.NewTransfer{SKU: "A1", Pool: "bf", From: "default", To: "berlin", Quantity: 2, Reason: "x", Actor: "ops"}); err == nil {
						mu.Lock()
						transfers = append(transfers, tr.ID)
						mu.Unlock()
					}
				case 4:
					mu.Lock()
					var id uuid.UUID
					if len(transfers) > 4 { // some stay in transit across the end
						id, transfers = transfers[0], transfers[1:]
					}
					mu.Unlock()
					if id == uuid.Nil {
						continue
					}
					if i%2 == 0 {
						_, err = b.inv.ReceiveTransfer(ctx, stock.TransferStep{ID: id, Quantity: 2, Actor: "ops"})
					} else {
						_, err = b.inv.CancelTransfer(ctx, stock.TransferStep{ID: id, Reason: "x", Actor: "ops"})
					}
				}
				if !fine(err) {
					bad <- fmt.Errorf("worker %d, step %d: %w", w, i, err)
					return
				}
				select {
				case ops <- struct{}{}:
				default:
				}
			}
		}()
	}
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-ops:
			case err := <-bad:
				close(stop)
				wg.Wait()
				require.NoError(t, err)
			}
		}
	}
	wait(40) // writes before the end
	created, err := svc.End(ctx, "bf", "alice", "over")
	require.NoError(t, err)
	finish(t, svc, created)
	wait(40) // and after it
	close(stop)
	wg.Wait()
	close(bad)
	for err := range bad {
		require.NoError(t, err)
	}
	require.Positive(t, refused.Load(), "writes after the end were refused")

	// What was left in transit lands in main: half received, half
	// cancelled.
	require.GreaterOrEqual(t, len(transfers), 4)
	for i, id := range transfers {
		if i%2 == 0 {
			_, err = b.inv.ReceiveTransfer(ctx, stock.TransferStep{ID: id, Quantity: 2, Actor: "ops"})
		} else {
			_, err = b.inv.CancelTransfer(ctx, stock.TransferStep{ID: id, Reason: "x", Actor: "ops"})
		}
		require.NoError(t, err)
	}
	var onHand, inTransit, soldUnits, total int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(sum(total - sold), 0), coalesce(sum(incoming), 0), coalesce(sum(sold), 0)
		FROM stock WHERE pool = 'bf'`).Scan(&onHand, &inTransit, &soldUnits))
	require.Equal(t, [3]int64{0, 0, 2}, [3]int64{onHand, inTransit, soldUnits}, "the finished campaign's pools hold only what it sold")
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT sum(total) FROM stock WHERE sku = 'A1'`).Scan(&total))
	require.Equal(t, 300+adjusted.Load(), total, "every unit accounted for")
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM transfers WHERE status = 'in_transit'`))
}

// TestEndRollsBackAHoldMadeAsItEnded: a hold of the campaign that
// committed after the end's transaction began but before it paused the
// pools (a hold batch that locked them first) is rolled back with the
// rest: no unpaid hold outlives its campaign, to be confirmed after the
// end or to expire into its finished pool.
func TestEndRollsBackAHoldMadeAsItEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	create(t, svc, spec("late", campaigns.Allotment{SKU: "A1", Quantity: 5}))
	require.NoError(t, svc.Start(ctx, "late"))

	tx, err := b.pool.Begin(ctx) // the end's transaction begins
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	late, err := b.hold("late", "A1", 2) // a hold commits meanwhile
	require.NoError(t, err)
	created, err := svc.EndTx(ctx, tx, "late", "alice", "over") // the end pauses the pools
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	finish(t, svc, created)

	c, err := svc.Get(ctx, "late")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, c.Status)
	require.Equal(t, string(inventory.StatusReleased), mustStatus(t, b, late.ID), "no unpaid hold outlives its campaign")
	require.EqualValues(t, 10, b.stock(t, "A1", "main").Available, "everything back in main")
}

// lockStock holds the stock row (sku, location, pool) locked from another
// session, as a DBA's `SELECT ... FOR UPDATE` left open would, until
// unlock is called.
func lockStock(t *testing.T, pool *pgxpool.Pool, sku, location, stockPool string) (unlock func()) {
	t.Helper()
	return lockFrom(t, pool, `SELECT count(*) FROM (SELECT 1 FROM stock WHERE sku = $1 AND location = $2 AND pool = $3 FOR UPDATE) x`,
		sku, location, stockPool)
}

// lockFrom runs sql (a count of the rows it locks, which must be one) in a
// transaction of its own, left open until unlock is called.
func lockFrom(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, sql, args...).Scan(&n))
	require.Equal(t, 1, n)
	var once sync.Once
	unlock = func() { once.Do(func() { require.NoError(t, tx.Commit(ctx)) }) }
	t.Cleanup(unlock)
	return unlock
}

// waitUntil waits until a step's answer arrived on one of answered, or as
// many sessions of pool's database as waiters wait for a lock.
func waitUntil(t *testing.T, pool *pgxpool.Pool, waiters int, answered ...chan error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, ch := range answered {
			if len(ch) > 0 {
				return
			}
		}
		var n int
		assert.NoError(c, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		assert.GreaterOrEqual(c, n, waiters)
	}, 10*time.Second, 5*time.Millisecond)
}

// TestFinishLocksInTheOneOrder replays the deadlock of a campaign whose
// name sorts after main: its end's last rollback batch released its holds
// (locking the campaign's rows), then gave its pools back to main (locking
// main's), while a transaction that locks main's rows first and then the
// campaign's (a transfer of its pool cancelled after the end, which lands
// in main; a bulk adjustment naming main and the pool) waited for the
// campaign's: PostgreSQL broke the cycle by failing one of them (40P01),
// costing the batch job an attempt or the operator an error. Here the
// batch is held up on main's row of its first SKU (another session has it)
// while the other transaction runs on the second SKU; both must answer as
// each would alone: the batch finishes the campaign, the cancel lands in
// main and the bulk adjustment is refused campaign_ended.
func TestFinishLocksInTheOneOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		other func(b *bundle, tr uuid.UUID) error
	}{
		{"transfer cancelled", func(b *bundle, tr uuid.UUID) error {
			_, err := b.inv.CancelTransfer(context.Background(), stock.TransferStep{ID: tr, Reason: "not needed", Actor: "ops"})
			return err
		}},
		{"bulk adjustment", func(b *bundle, _ uuid.UUID) error {
			_, err := b.inv.AdjustMany(context.Background(), stock.BulkAdjustment{Reason: "found", Actor: "ops", Lines: []stock.BulkLine{
				{SKU: "B1", Pool: stock.MainPool, Delta: 1}, {SKU: "B1", Pool: "zz", Delta: 1}}})
			var de *domain.Error
			if errors.As(err, &de) && de.Code == domain.CodeCampaignEnded {
				return nil // as it would be alone
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc, b := setup(t)
			dbtest.Location(t, b.pool, "berlin", 2)
			dbtest.StockIn(t, b.pool, "A1", 10)
			dbtest.StockIn(t, b.pool, "B1", 10)
			create(t, svc, spec("zz", campaigns.Allotment{SKU: "A1", Quantity: 5}, campaigns.Allotment{SKU: "B1", Quantity: 5}))
			require.NoError(t, svc.Start(ctx, "zz"))
			for _, sku := range []string{"A1", "B1"} {
				_, err := b.hold("zz", sku, 1)
				require.NoError(t, err)
			}
			tr, _, err := b.inv.CreateTransferOnce(ctx, idempotency.NewKey("ops", "tr"),
				stock.NewTransfer{SKU: "B1", Pool: "zz", From: "default", To: "berlin", Quantity: 2, Reason: "x", Actor: "ops"})
			require.NoError(t, err)
			created, err := svc.End(ctx, "zz", "alice", "over")
			require.NoError(t, err)

			unlock := lockStock(t, b.pool, "A1", "default", stock.MainPool)
			batch := make(chan error, 1)
			go func() {
				b, err := svc.RollbackBatch(ctx, created.RollbackID, created.JobID)
				if err == nil && !b.Finished {
					err = errors.New("the only batch did not finish the campaign")
				}
				batch <- err
			}()
			waitUntil(t, b.pool, 1, batch) // the batch waits for main's row of A1
			other := make(chan error, 1)
			go func() { other <- tc.other(b, tr.ID) }()
			waitUntil(t, b.pool, 2, other, batch)
			unlock()
			require.NoError(t, <-batch)
			require.NoError(t, <-other)

			c, err := svc.Get(ctx, "zz")
			require.NoError(t, err)
			require.Equal(t, campaigns.StatusRolledBack, c.Status)
			var onHand int64
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(sum(total - sold), 0) FROM stock WHERE pool = 'zz'`).Scan(&onHand))
			require.Zero(t, onHand, "nothing on hand stays in the finished campaign's pools")
			require.EqualValues(t, 10, b.stockAt(t, "A1", "default", "main").Available)
		})
	}
}

// TestEndAgainWhileTheLastBatchRuns: ending a campaign again (an
// operator's second POST, a retried campaign_end job) while its last
// rollback batch runs locks the campaign and then its rollback, to carry
// the rollback on; the batch must not lock them the other way round (its
// rollback, then the campaign to finish it), or the two deadlock. The
// batch is held up on the campaign's stock row (another session has it)
// while the second end runs; both answer as each would alone.
func TestEndAgainWhileTheLastBatchRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	create(t, svc, spec("zz", campaigns.Allotment{SKU: "A1", Quantity: 5}))
	require.NoError(t, svc.Start(ctx, "zz"))
	_, err := b.hold("zz", "A1", 1)
	require.NoError(t, err)
	created, err := svc.End(ctx, "zz", "alice", "over")
	require.NoError(t, err)

	unlock := lockStock(t, b.pool, "A1", "default", "zz")
	batch := make(chan error, 1)
	go func() {
		_, err := svc.RollbackBatch(ctx, created.RollbackID, created.JobID)
		batch <- err
	}()
	waitUntil(t, b.pool, 1, batch)
	again := make(chan error, 1)
	var answer rollbacks.Created
	go func() {
		var err error
		answer, err = svc.End(ctx, "zz", "bob", "again")
		again <- err
	}()
	waitUntil(t, b.pool, 2, again, batch)
	unlock()
	require.NoError(t, <-batch)
	require.NoError(t, <-again)
	require.Equal(t, created, answer, "ending again answers the same rollback")
	c, err := svc.Get(ctx, "zz")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, c.Status)
}

// TestAnUnexpectedLastBatchLeavesTheFinishToTheNext: a batch that took
// fewer holds than are held (one was locked by a cancel in flight, which
// it skipped) does not lock main's rows before it releases; when the
// cancel commits meanwhile and the batch leaves nothing held, it does not
// finish the campaign (its finish would lock main's rows after the
// campaign's): the next batch, which releases nothing, does.
func TestAnUnexpectedLastBatchLeavesTheFinishToTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setupWith(t, inventory.Config{LockTimeout: 10 * time.Second})
	dbtest.StockIn(t, b.pool, "A1", 200)
	create(t, svc, spec("zz", campaigns.Allotment{SKU: "A1", Quantity: 150}))
	require.NoError(t, svc.Start(ctx, "zz"))
	var held []uuid.UUID
	for range rollbacks.BatchSize + 1 {
		r, err := b.hold("zz", "A1", 1)
		require.NoError(t, err)
		held = append(held, r.ID)
	}
	created, err := svc.End(ctx, "zz", "alice", "over")
	require.NoError(t, err)

	unlock := lockStock(t, b.pool, "A1", "default", "zz")
	cancel := make(chan error, 1)
	go func() {
		_, err := b.inv.Release(ctx, held[0], inventory.Caller{Name: "shop"}, "changed my mind")
		cancel <- err
	}()
	waitUntil(t, b.pool, 1, cancel) // the cancel has its hold, and waits for the row
	batch := make(chan error, 1)
	var first rollbacks.Batch
	go func() {
		var err error
		first, err = svc.RollbackBatch(ctx, created.RollbackID, created.JobID)
		batch <- err
	}()
	waitUntil(t, b.pool, 2, batch, cancel)
	unlock()
	require.NoError(t, <-cancel)
	require.NoError(t, <-batch)
	require.Equal(t, rollbacks.BatchSize, first.Released, "the batch skipped the hold the cancel had")
	require.False(t, first.Finished, "it left nothing held, but did not lock for the finish")
	require.NotNil(t, first.Next)
	c, err := svc.Get(ctx, "zz")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusEnded, c.Status)
	require.Zero(t, c.Rollback.HeldRemaining)

	last, err := svc.RollbackBatch(ctx, created.RollbackID, first.Next.ID)
	require.NoError(t, err)
	require.True(t, last.Finished)
	require.Zero(t, last.Released)
	c, err = svc.Get(ctx, "zz")
	require.NoError(t, err)
	require.Equal(t, campaigns.StatusRolledBack, c.Status)
	require.EqualValues(t, 200, b.stockAt(t, "A1", "default", "main").Available)
}

// memoryCount is a holdstats.Recorder that counts the holds an instance
// refused from its sold-out memory, and nothing else.
type memoryCount struct{ n atomic.Int64 }

func (m *memoryCount) SoldOutInMemory()                     { m.n.Add(1) }
func (m *memoryCount) HoldAnswered(string)                  {}
func (m *memoryCount) HoldBatch(int)                        {}
func (m *memoryCount) HoldAsked(string)                     {}
func (m *memoryCount) BatchTook(string, time.Duration)      {}
func (m *memoryCount) Released(string, string, string, int) {}

// TestFinishMakesMainHoldableHereAtOnce: a campaign that took all of
// main's stock ends; a hold on main refused out_of_stock is refused from
// the instance's memory from then on. The finish (the last rollback
// batch, run by this instance's worker) gives the campaign's stock back
// to main: the very next hold on main is granted, as after any write of
// this instance that puts stock back, not refused from memory until the
// recheck bound (ten seconds here) lapses.
func TestFinishMakesMainHoldableHereAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := &memoryCount{}
	svc, b := setupWith(t, inventory.Config{SoldOutRecheck: 10 * time.Second, Recorder: mem})
	dbtest.StockIn(t, b.pool, "A1", 5)
	create(t, svc, spec("zz", campaigns.Allotment{SKU: "A1", Quantity: 5}))
	require.NoError(t, svc.Start(ctx, "zz"))
	_, err := b.hold("zz", "A1", 1)
	require.NoError(t, err)
	fromMemory := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			before := mem.n.Load()
			_, err := b.hold("", "A1", 1)
			return mem.n.Load() > before && errors.Is(err, &domain.Error{Code: domain.CodeOutOfStock})
		}, 10*time.Second, time.Millisecond, "main's sold out is answered from memory")
	}
	fromMemory()
	created, err := svc.End(ctx, "zz", "alice", "over")
	require.NoError(t, err)
	fromMemory() // still, after the end
	finish(t, svc, created)
	before := mem.n.Load()
	h, err := b.hold("", "A1", 5)
	require.NoError(t, err, "the campaign's 5 are back in main")
	require.Equal(t, before, mem.n.Load())
	require.Equal(t, inventory.StatusHeld, h.Status)
}

// TestMainRowsMadeBeforeAnyLock: where a campaign's pool holds stock at a
// location main has no row (its units were sent there), giving it back
// makes main's row. Made after the pool's row was locked, the insert would
// wait for a bulk adjustment making the same row, which waits for the
// pool's row: a deadlock. Both the finish and a transfer of the pool
// landing in main there make main's row before they lock any. The finish
// (or the cancel) is held up on a later row (another session has it)
// while the bulk adjustment runs; both answer as each would alone.
func TestMainRowsMadeBeforeAnyLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// gate is the row the step waits for, after the pool's at berlin.
		gate string
		// landed is what main has at berlin after the step: the pool's 2
		// given back, or the 1 cancelled.
		landed int64
		step   func(svc *campaigns.Service, b *bundle, created rollbacks.Created, back uuid.UUID) error
	}{
		{"finish", stock.MainPool, 2, func(svc *campaigns.Service, _ *bundle, created rollbacks.Created, _ uuid.UUID) error {
			batch, err := svc.RollbackBatch(context.Background(), created.RollbackID, created.JobID)
			if err == nil && !batch.Finished {
				err = errors.New("the only batch did not finish the campaign")
			}
			return err
		}},
		{"transfer cancelled", "zz", 1, func(_ *campaigns.Service, b *bundle, _ rollbacks.Created, back uuid.UUID) error {
			_, err := b.inv.CancelTransfer(context.Background(), stock.TransferStep{ID: back, Reason: "stays", Actor: "ops"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc, b := setup(t)
			dbtest.Location(t, b.pool, "berlin", 2)
			dbtest.StockIn(t, b.pool, "B1", 10)
			create(t, svc, spec("zz", campaigns.Allotment{SKU: "B1", Quantity: 5}))
			require.NoError(t, svc.Start(ctx, "zz"))
			send := func(from, to string, n int64) uuid.UUID {
				t.Helper()
				tr, _, err := b.inv.CreateTransferOnce(ctx, idempotency.NewKey("ops", from+to),
					stock.NewTransfer{SKU: "B1", Pool: "zz", From: from, To: to, Quantity: n, Reason: "x", Actor: "ops"})
				require.NoError(t, err)
				return tr.ID
			}
			_, err := b.inv.ReceiveTransfer(ctx, stock.TransferStep{ID: send("default", "berlin", 3), Quantity: 3, Actor: "ops"})
			require.NoError(t, err)
			back := send("berlin", "default", 1)
			require.Empty(t, b.stockAt(t, "B1", "berlin", "main").Pool, "main has no row at berlin")
			created, err := svc.End(ctx, "zz", "alice", "over")
			require.NoError(t, err)

			unlock := lockStock(t, b.pool, "B1", "default", tc.gate)
			step := make(chan error, 1)
			go func() { step <- tc.step(svc, b, created, back) }()
			waitUntil(t, b.pool, 1, step)
			bulk := make(chan error, 1)
			go func() {
				_, err := b.inv.AdjustMany(ctx, stock.BulkAdjustment{Reason: "found", Actor: "ops", Lines: []stock.BulkLine{
					{SKU: "B1", Location: "berlin", Pool: stock.MainPool, Delta: 1}, {SKU: "B1", Location: "berlin", Pool: "zz", Delta: 1}}})
				var de *domain.Error
				if errors.As(err, &de) && de.Code == domain.CodeCampaignEnded {
					err = nil // as it would be alone
				}
				bulk <- err
			}()
			waitUntil(t, b.pool, 2, bulk, step)
			unlock()
			require.NoError(t, <-step)
			require.NoError(t, <-bulk)
			require.Equal(t, tc.landed, b.stockAt(t, "B1", "berlin", "main").Available)
		})
	}
}

// TestResumeRacingTheEndLeavesThePoolPaused: a resume of a campaign's pool
// that begins while the campaign's end is uncommitted waits for it and is
// refused; it never reads the campaign as active and then resumes the
// rows the end paused, which would let holds into an ended campaign's
// pool after its rollback took its holds (units then stranded there as
// those holds end).
func TestResumeRacingTheEndLeavesThePoolPaused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B1", 10)
	create(t, svc, spec("rs", campaigns.Allotment{SKU: "A1", Quantity: 4}, campaigns.Allotment{SKU: "B1", Quantity: 4}))
	require.NoError(t, svc.Start(ctx, "rs"))

	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = svc.EndTx(ctx, tx, "rs", "alice", "sold out")
	require.NoError(t, err)

	resumed := make(chan error, 1)
	go func() {
		_, err := b.inv.SwitchPool(ctx, stock.PoolSwitch{Pool: "rs", On: true, Reason: "back on", Actor: "bob"})
		resumed <- err
	}()
	// The resume is under way once it waits on a lock the end holds.
	require.Eventually(t, func() bool {
		var waiting int
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&waiting)
		return err == nil && waiting > 0
	}, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, tx.Commit(ctx))

	err = <-resumed
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeCampaignNotActive, de.Code)
	require.Equal(t, stock.StockPaused, b.stock(t, "A1", "rs").Status)
	require.Equal(t, stock.StockPaused, b.stock(t, "B1", "rs").Status)
}

// TestEndCommitsUnderAReceipt: an end that commits while a receipt of the
// campaign's transfer waits for the landing's row, with the finish making
// main's row beside it, never deadlocks the receipt: it does not make
// main's row while it holds the pool's (the finish, holding main's new
// row, waits for the pool's), but starts again, and lands its units in
// main.
func TestEndCommitsUnderAReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.Location(t, b.pool, "berlin", 2)
	dbtest.StockIn(t, b.pool, "A1", 300)
	create(t, svc, spec("bf", campaigns.Allotment{SKU: "A1", Quantity: 200}))
	require.NoError(t, svc.Start(ctx, "bf"))
	tr, _, err := b.inv.CreateTransferOnce(ctx, idempotency.NewKey("ops", "tr"),
		stock.NewTransfer{SKU: "A1", Pool: "bf", From: "default", To: "berlin", Quantity: 2, Reason: "x", Actor: "ops"})
	require.NoError(t, err)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM stock WHERE sku = 'A1' AND location = 'berlin' AND pool = 'main'`))

	waiting := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			return dbtest.Count(t, b.pool, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= n
		}, 10*time.Second, 5*time.Millisecond)
	}
	end, err := b.pool.Begin(ctx) // the end pauses the pool's rows, berlin's among them
	require.NoError(t, err)
	defer func() { _ = end.Rollback(ctx) }()
	created, err := svc.EndTx(ctx, end, "bf", "alice", "over")
	require.NoError(t, err)

	received := make(chan error, 1)
	go func() { // reads the campaign running, then waits for berlin's row
		_, err := b.inv.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 2, Actor: "ops"})
		received <- err
	}()
	waiting(1)

	// A finish that made main's row at berlin and waits for the pool's
	// row. Its deadlock check comes late, so that a deadlock, if any,
	// fails the receipt.
	fin, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = fin.Rollback(ctx) }()
	_, err = fin.Exec(ctx, `SET LOCAL deadlock_timeout = '30s'`)
	require.NoError(t, err)
	_, err = fin.Exec(ctx, `INSERT INTO stock (sku, location, pool) VALUES ('A1', 'berlin', 'main')`)
	require.NoError(t, err)
	locked := make(chan error, 1)
	go func() {
		_, err := fin.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'A1' AND location = 'berlin' AND pool = 'bf' FOR UPDATE`)
		locked <- err
	}()
	waiting(2)

	require.NoError(t, end.Commit(ctx)) // the receipt takes berlin's row, and reads the end
	require.NoError(t, <-locked, "the finish gets the pool's row: the receipt let it go")
	require.NoError(t, fin.Commit(ctx))
	require.NoError(t, <-received, "the receipt starts again once the finish is through")

	finish(t, svc, created)
	var inMain, inPool int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT
		coalesce(sum(total) FILTER (WHERE pool = 'main'), 0), coalesce(sum(total - sold) FILTER (WHERE pool = 'bf'), 0)
		FROM stock WHERE sku = 'A1' AND location = 'berlin'`).Scan(&inMain, &inPool))
	require.Equal(t, [2]int64{2, 0}, [2]int64{inMain, inPool}, "the units received after the end are main's")
}
