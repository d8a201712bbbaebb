package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// holds places n single-unit holds on sku (main pool, or campaign's).
func (b *bundle) holds(t *testing.T, prefix, sku, campaign string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{
			Client: "shop", IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i), Campaign: campaign,
			Items: []inventory.Item{{SKU: sku, Quantity: 1}},
		})
		require.NoError(t, err)
		ids[i] = r.ID
	}
	return ids
}

// openCampaign creates campaign id starting now and opens it directly (no
// worker needs to run), with allot units of sku.
func (b *bundle) openCampaign(t *testing.T, id, sku string, allot int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: id, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 600,
			Allotments: []campaigns.Allotment{{SKU: sku, Quantity: allot}}, Actor: "alice",
		})
		return err
	}))
	require.NoError(t, b.campaigns.Start(ctx, id))
}

func (b *bundle) createRollback(t *testing.T, req rollbacks.Request) rollbacks.Created {
	t.Helper()
	ctx := context.Background()
	var c rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		c, err = b.rollbacks.CreateTx(ctx, tx, req)
		return err
	}))
	return c
}

// waitRollback waits until rollback id has status.
func (b *bundle) waitRollback(t *testing.T, id int64, status string) rollbacks.Rollback {
	t.Helper()
	var r rollbacks.Rollback
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		r, err = b.rollbacks.Get(context.Background(), id)
		assert.NoError(c, err)
		assert.Equal(c, status, r.Status)
	}, 30*time.Second, 20*time.Millisecond, "rollback %d", id)
	return r
}

func (b *bundle) statuses(t *testing.T, ids []uuid.UUID) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, id := range ids {
		out[b.status(t, id)]++
	}
	return out
}

// liveJobs counts the jobs of rollback id's chain still to run or running.
// t may be an Eventually condition's CollectT.
func (b *bundle) liveJobs(t assert.TestingT, id int64) int {
	return b.count(t, `
		SELECT count(*) FROM river_job
		WHERE kind IN ('rollback_batch', 'manual_rollback') AND args @> jsonb_build_object('rollback_id', $1::bigint)
		  AND state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`, id)
}

func (b *bundle) reconcileNow(t *testing.T) reconcile.Run {
	t.Helper()
	r, err := b.reconcile.Run(context.Background(), reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, reconcile.StatusSucceeded, r.Status)
	return r
}

func requireOpenAlert(t *testing.T, b *bundle, kind, subject string) alerts.Alert {
	t.Helper()
	list, err := b.alerts.List(context.Background(), alerts.StatusOpen, alerts.MaxList)
	require.NoError(t, err)
	for _, a := range list {
		if a.Kind == kind && a.Subject == subject {
			return a
		}
	}
	t.Fatalf("no open %s alert for %s", kind, subject)
	return alerts.Alert{}
}

// TestRollbackNeverTouchesLaterHolds: no rollback, of any scope, releases
// a hold made after it was requested. Holds made after each request (by the API, the CLI or a
// plain SQL job) must stay held, and the chains must end.
func TestRollbackNeverTouchesLaterHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{stopped: true, rollbackPause: 10 * time.Millisecond})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "C1", 100)
	dbtest.StockIn(t, b.pool, "S1", 100)
	dbtest.StockIn(t, b.pool, "Q1", 100)
	b.openCampaign(t, "bf", "C1", 50)
	early := map[string][]uuid.UUID{
		"bf": b.holds(t, "bf-early", "C1", "bf", 5),
		"S1": b.holds(t, "s1-early", "S1", "", 5),
		"Q1": b.holds(t, "q1-early", "Q1", "", 5),
	}

	byCampaign := b.createRollback(t, rollbacks.Request{Operator: "alice", Reason: "sale over", Source: rollbacks.SourceHTTP, Scope: rollbacks.Scope{Campaign: "bf"}})
	bySKU := b.createRollback(t, rollbacks.Request{Operator: "alice", Reason: "clear S1", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{SKU: "S1"}})
	bySQL := insertRawRollback(t, b, `{"operator": "alice", "reason": "clear Q1", "sku": "Q1"}`)

	late := map[string][]uuid.UUID{
		"bf": b.holds(t, "bf-late", "C1", "bf", 3),
		"S1": b.holds(t, "s1-late", "S1", "", 3),
		"Q1": b.holds(t, "q1-late", "Q1", "", 3),
	}
	b.start(t)

	for _, id := range []int64{byCampaign.RollbackID, bySKU.RollbackID} {
		r := b.waitRollback(t, id, rollbacks.StatusSucceeded)
		require.EqualValues(t, 5, r.ReleasedCount)
	}
	var sqlID int64
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var status string
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT id, status FROM rollback_requests WHERE job_id = $1`, bySQL).Scan(&sqlID, &status))
		assert.Equal(c, rollbacks.StatusSucceeded, status)
	}, 30*time.Second, 20*time.Millisecond)
	r, err := b.rollbacks.Get(ctx, sqlID)
	require.NoError(t, err)
	require.EqualValues(t, 5, r.ReleasedCount)
	var enqueued time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT created_at FROM river_job WHERE id = $1`, bySQL).Scan(&enqueued))
	require.True(t, r.RequestedAt.Equal(enqueued), "a plain SQL rollback is requested when its job is inserted")

	for scope, ids := range early {
		require.Equal(t, map[string]int{string(inventory.StatusReleased): 5}, b.statuses(t, ids), scope)
	}
	for scope, ids := range late {
		require.Equal(t, map[string]int{string(inventory.StatusHeld): 3}, b.statuses(t, ids), "%s: made after the request", scope)
	}
}

// TestRollbackBatchIsItsOwnDueJob checks that no batch sleeps through the
// pause: the next batch is a job of its own, inserted available (so River's
// 5 s scheduler is not in its way) with its scheduled_at one pause ahead.
func TestRollbackBatchIsItsOwnDueJob(t *testing.T) {
	t.Parallel()
	const pause = 2 * time.Second
	b := setup(t, &setupOpts{rollbackPause: pause})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 200)
	ids := b.holds(t, "a", "A1", "", 150)
	created := b.createRollback(t, rollbacks.Request{Operator: "alice", Reason: "r", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{ReservationIDs: ids}})

	// Between the batches: the second waits, available, for its time.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var state string
		var due bool
		err := b.pool.QueryRow(ctx, `
			SELECT state, scheduled_at > now() FROM river_job
			WHERE kind = 'rollback_batch' AND args @> jsonb_build_object('rollback_id', $1::bigint)
			ORDER BY id DESC LIMIT 1`, created.RollbackID).Scan(&state, &due)
		assert.NoError(c, err)
		assert.Equal(c, "available", state)
		assert.True(c, due)
	}, 15*time.Second, 10*time.Millisecond)

	b.waitRollback(t, created.RollbackID, rollbacks.StatusSucceeded)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var open int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'rollback_batch' AND finalized_at IS NULL`).Scan(&open))
		assert.Zero(c, open)
	}, 15*time.Second, 10*time.Millisecond)
	rows, err := b.pool.Query(ctx, `
		SELECT scheduled_at - created_at, finalized_at - attempted_at, attempted_at >= scheduled_at
		FROM river_job WHERE kind = 'rollback_batch' AND args @> jsonb_build_object('rollback_id', $1::bigint)
		ORDER BY id`, created.RollbackID)
	require.NoError(t, err)
	var ahead, ran []time.Duration
	for rows.Next() {
		var a, r time.Duration
		var onTime bool
		require.NoError(t, rows.Scan(&a, &r, &onTime))
		require.True(t, onTime, "no batch runs before it is due")
		ahead, ran = append(ahead, a), append(ran, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ahead, 2, "100 + 50")
	require.Less(t, ahead[0], pause, "the first batch is due at once")
	require.GreaterOrEqual(t, ahead[1], pause-50*time.Millisecond, "the second is due one pause after it was enqueued")
	for i, d := range ran {
		require.Less(t, d, pause, "batch %d ran %s: it did not sleep through the pause", i+1, d)
	}
	require.Equal(t, map[string]int{string(inventory.StatusReleased): 150}, b.statuses(t, ids))
}

// TestCancelledChainIsResumedByReconciliation: a rollback whose jobs were
// cancelled by hand must not stay running forever with its holds held. The next
// reconciliation must resume it, with an alert, and it must finish, each
// hold released once.
func TestCancelledChainIsResumedByReconciliation(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{rollbackPause: 100 * time.Millisecond, reconcile: true, reconcileInterval: time.Hour})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 400)
	ids := b.holds(t, "a", "A1", "", 350)
	created := b.createRollback(t, rollbacks.Request{Operator: "alice", Reason: "r", Source: rollbacks.SourceHTTP, Scope: rollbacks.Scope{SKU: "A1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := b.rollbacks.Get(ctx, created.RollbackID)
		assert.NoError(c, err)
		assert.GreaterOrEqual(c, r.Batches, int32(1))
	}, 15*time.Second, 10*time.Millisecond)

	// Cancel every job of the chain from the dashboard (River's JobCancel),
	// until none is left to run; a batch running meanwhile enqueues one
	// more, which is cancelled in turn.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows, err := b.pool.Query(ctx, `
			SELECT id FROM river_job WHERE kind = 'rollback_batch' AND args @> jsonb_build_object('rollback_id', $1::bigint)
			AND state IN ('available', 'scheduled', 'retryable')`, created.RollbackID)
		if !assert.NoError(c, err) {
			return
		}
		jobIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		assert.NoError(c, err)
		for _, id := range jobIDs {
			_, err := b.client.JobCancel(ctx, id)
			assert.NoError(c, err)
		}
		assert.Zero(c, b.liveJobs(c, created.RollbackID))
	}, 15*time.Second, 5*time.Millisecond)
	stranded, err := b.rollbacks.Get(ctx, created.RollbackID)
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusRunning, stranded.Status)
	require.Less(t, int(stranded.ReleasedCount), 350, "stranded midway")

	run := b.reconcileNow(t)
	require.EqualValues(t, 1, run.Retried)
	require.Len(t, run.Findings.Retry, 1)
	f := run.Findings.Retry[0]
	require.Equal(t, reconcile.KindChainResumed, f.Kind)
	require.NotNil(t, f.JobID)
	a := requireOpenAlert(t, b, "chain_resumed", fmt.Sprintf("rollback:%d", created.RollbackID))
	require.Equal(t, alerts.Warning, a.Level)
	require.Contains(t, a.SuggestedAction, "resumed")

	r := b.waitRollback(t, created.RollbackID, rollbacks.StatusSucceeded)
	require.EqualValues(t, 350, r.ReleasedCount)
	require.EqualValues(t, 1, r.Resumes)
	require.Equal(t, reconcile.Actor, *r.ResumedBy)
	for _, id := range ids {
		require.Equal(t, 1, b.releases(t, id), "released exactly once")
	}

	// A second run finds nothing more to resume.
	run = b.reconcileNow(t)
	require.Zero(t, run.Retried)
}

// TestStrandedCampaignEndIsResumed: a campaign whose end chain was
// cancelled must not stay ended forever, its pool paused and its
// remainder never back in main. Reconciliation must resume it to
// rolled_back. The second campaign's rollback succeeded but it was never
// finished; reconciliation finishes it.
func TestStrandedCampaignEndIsResumed(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{stopped: true, rollbackPause: 10 * time.Millisecond})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "FLASH", 500)
	b.openCampaign(t, "bf", "FLASH", 300)
	ids := b.holds(t, "bf", "FLASH", "bf", 150)
	b.openCampaign(t, "quiet", "FLASH", 100)

	ends := map[string]rollbacks.Created{}
	for _, id := range []string{"bf", "quiet"} {
		created, err := b.campaigns.End(ctx, id, "alice", "ended early")
		require.NoError(t, err)
		ends[id] = created
		// Its first batch is cancelled from the dashboard before it runs.
		_, err = b.client.JobCancel(ctx, created.JobID)
		require.NoError(t, err)
	}
	_, err := b.pool.Exec(ctx, `UPDATE rollback_requests SET status = 'succeeded', finished_at = now() WHERE id = $1`, ends["quiet"].RollbackID)
	require.NoError(t, err)
	b.start(t)

	run := b.reconcileNow(t)
	require.EqualValues(t, 2, run.Retried)
	requireOpenAlert(t, b, "chain_resumed", fmt.Sprintf("rollback:%d", ends["bf"].RollbackID))
	requireOpenAlert(t, b, "chain_resumed", "campaign:quiet")

	c := b.waitRolledBack(t, "bf")
	require.Equal(t, rollbacks.StatusSucceeded, c.Rollback.Status)
	require.EqualValues(t, 150, c.Rollback.ReleasedCount)
	require.Zero(t, c.Pools[0].Available, "the remainder went back to main")
	_, released := requireReleasedOnce(t, b, ids)
	require.Equal(t, 150, released)
	c = b.waitRolledBack(t, "quiet")
	require.Zero(t, c.Pools[0].Available)
	st, err := b.inv.GetStock(ctx, "FLASH")
	require.NoError(t, err)
	require.EqualValues(t, 500, st.Pools[0].Available, "all stock back in main")
}

// TestStrandedCampaignStepsAreResumed deletes a scheduled campaign's start
// job and an active campaign's end job: reconciliation enqueues them again
// (the end one due at the campaign's end), and the start one opens it.
func TestStrandedCampaignStepsAreResumed(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{stopped: true})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "FLASH", 100)
	b.openCampaign(t, "open", "FLASH", 10)
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
			ID: "soon", StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60,
			Allotments: []campaigns.Allotment{{SKU: "FLASH", Quantity: 10}}, Actor: "alice",
		})
		return err
	}))
	tag, err := b.pool.Exec(ctx, `DELETE FROM river_job WHERE (kind = 'campaign_start' AND args->>'campaign' = 'soon')
		OR (kind = 'campaign_end' AND args->>'campaign' = 'open')`)
	require.NoError(t, err)
	require.EqualValues(t, 2, tag.RowsAffected())

	run := b.reconcileNow(t)
	require.EqualValues(t, 2, run.Retried)
	requireOpenAlert(t, b, "chain_resumed", "campaign:soon")
	requireOpenAlert(t, b, "chain_resumed", "campaign:open")
	var state string
	var due time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, scheduled_at FROM river_job WHERE kind = 'campaign_end' AND args->>'campaign' = 'open'`).Scan(&state, &due))
	require.Equal(t, "scheduled", state)
	open, err := b.campaigns.Get(ctx, "open")
	require.NoError(t, err)
	require.WithinDuration(t, open.EndsAt, due, time.Millisecond, "due at the campaign's end")

	b.start(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		soon, err := b.campaigns.Get(ctx, "soon")
		assert.NoError(c, err)
		assert.Equal(c, campaigns.StatusActive, soon.Status)
	}, 20*time.Second, 20*time.Millisecond)
	require.Zero(t, b.reconcileNow(t).Retried, "nothing stranded any more")
}

// TestDashboardRetryResumesRequest: retrying a discarded rollback_batch
// from the dashboard must not complete the job and leave its request
// failed, with the holds held. A retried batch, discarded or cancelled,
// must carry its request to the end.
func TestDashboardRetryResumesRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{rollbackPause: 10 * time.Millisecond})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 300)
	for _, state := range []string{"discarded", "cancelled"} {
		ids := b.holds(t, state, "A1", "", 120)
		var created rollbacks.Created
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
			created, err = b.rollbacks.StartTx(ctx, tx, rollbacks.Request{
				Operator: "alice", Reason: "r", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{ReservationIDs: ids},
			})
			if err != nil {
				return err
			}
			// As the batch worker leaves it after its last attempt, or as
			// the dashboard leaves a cancelled job; no worker saw it.
			if _, err := tx.Exec(ctx, `UPDATE river_job SET state = $2, attempt = max_attempts, attempted_at = now(), finalized_at = now()
				WHERE id = $1`, created.JobID, state); err != nil {
				return err
			}
			if state == "discarded" {
				return rollbacks.FailTx(ctx, tx, created.RollbackID, "database restarted")
			}
			return nil
		}))

		_, err := b.client.JobRetry(ctx, created.JobID)
		require.NoError(t, err)
		r := b.waitRollback(t, created.RollbackID, rollbacks.StatusSucceeded)
		require.EqualValues(t, 120, r.ReleasedCount, state)
		require.Nil(t, r.Error, "the failure is forgotten once it runs again")
		require.Equal(t, map[string]int{string(inventory.StatusReleased): 120}, b.statuses(t, ids), state)
	}
}

// TestRescueSparesLongJobs checks the rescue settings: a job whose instance
// stopped answering is rescued once its kind's timeout and RescueAfter have
// passed, but a reconciliation still running within its own (longer)
// timeout is left alone. The worker instance never leads; a second one,
// started later, leads and rescues.
func TestRescueSparesLongJobs(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	workers := func(w *river.Workers) { river.AddWorker(w, &hangWorker{release: stuck}) }
	b := setup(t, &setupOpts{stopped: true, reconcile: true, reconcileInterval: time.Hour, workers: workers})
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 1)

	worker := b.newClient(t, workers, jobsConfig{notLeader: true, rescueAfter: time.Second})
	startClient(t, worker)

	// The reconciliation waits for a lock the test holds: a long run.
	lock, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
	_, err = lock.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('stockhold.reconcile'))`)
	require.NoError(t, err)
	var req reconcile.Requested
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		req, err = b.reconcile.RequestTx(ctx, tx, reconcile.TriggerHTTP, nil)
		return err
	}))
	hung, err := b.inserter.Insert(ctx, hangArgs{}, nil)
	require.NoError(t, err)
	for _, id := range []int64{req.JobID, hung.Job.ID} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var state string
			var long bool
			assert.NoError(c, b.pool.QueryRow(ctx, `SELECT state, attempted_at < now() - interval '2 seconds' FROM river_job WHERE id = $1`, id).Scan(&state, &long))
			assert.Equal(c, "running", state)
			assert.True(c, long, "running for longer than RescueAfter")
		}, 20*time.Second, 50*time.Millisecond)
	}

	leader := b.newClient(t, workers, jobsConfig{rescueAfter: time.Second})
	startClient(t, leader)
	t.Cleanup(func() { close(stuck) }) // before the clients stop
	// The rescuer's first pass, at once, rescues the hung job ...
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var state string
		var errs int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT state, coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, hung.Job.ID).Scan(&state, &errs))
		assert.Positive(c, errs, "rescued")
	}, 20*time.Second, 50*time.Millisecond)
	// ... and in that same pass left the reconciliation running.
	var state string
	var errs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, req.JobID).Scan(&state, &errs))
	require.Equal(t, "running", state)
	require.Zero(t, errs, "a reconciliation within its timeout is not rescued")

	require.NoError(t, lock.Rollback(ctx))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		run, err := b.reconcile.Get(ctx, req.RunID)
		assert.NoError(c, err)
		assert.Equal(c, reconcile.StatusSucceeded, run.Status)
	}, 20*time.Second, 50*time.Millisecond)
}

// hangArgs is a job that hangs and ignores its context, as a worker whose
// instance is wedged does.
type hangArgs struct{}

func (hangArgs) Kind() string { return "test_hang" }

type hangWorker struct {
	river.WorkerDefaults[hangArgs]
	release chan struct{}
}

func (w *hangWorker) Work(context.Context, *river.Job[hangArgs]) error {
	<-w.release
	return nil
}

func (w *hangWorker) Timeout(*river.Job[hangArgs]) time.Duration { return time.Second }
