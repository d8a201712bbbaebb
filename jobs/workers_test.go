package jobs

// Unit tests of the workers that decide something of their own (snooze,
// cancel, give up, record output), each worked once through
// rivertest.Worker: the job row lives in a transaction the test rolls back,
// and the worker's services act on the test's own database as they would
// in production. The end-to-end tests (jobs_test package) run the same
// workers on a started client.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/enqueue"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
)

var quietLog = slog.New(slog.DiscardHandler)

type workerBundle struct {
	pool      *pgxpool.Pool
	inv       *inventory.Service
	alerts    *alerts.Service
	rollbacks *rollbacks.Service
	campaigns *campaigns.Service
	reconcile *reconcile.Service
}

func workerSetup(t *testing.T) *workerBundle {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := NewInserter(pool)
	require.NoError(t, err)
	al := alerts.New(pool, inserter, false)
	inv := inventory.New(pool, quietLog, inventory.Config{})
	rb := rollbacks.New(pool, inserter, inv, 0)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return &workerBundle{
		pool: pool, inv: inv, alerts: al, rollbacks: rb,
		campaigns: campaigns.New(pool, inserter, inv, rb, al),
		reconcile: reconcile.New(pool, inserter, al, inv, reconcile.Config{RepairLimit: 100, Log: quietLog}),
	}
}

// tx is the transaction the test's job rows live in, rolled back at the end.
func (b *workerBundle) tx(t *testing.T) pgx.Tx {
	t.Helper()
	tx, err := b.pool.Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(context.Background())) })
	return tx
}

func testWorker[T river.JobArgs](t *testing.T, w river.Worker[T]) *rivertest.Worker[T, pgx.Tx] {
	t.Helper()
	return rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{MaxAttempts: enqueue.MaxAttempts, Logger: quietLog}, w)
}

// lastError is the error the job's last attempt recorded (a cancelled or
// snoozed job's is not returned by rivertest's Work).
func lastError(t *testing.T, job *rivertype.JobRow) string {
	t.Helper()
	require.NotEmpty(t, job.Errors, "the attempt recorded an error")
	return job.Errors[len(job.Errors)-1].Error
}

// requireRetried checks that an attempt failed and the job will run again.
func requireRetried(t *testing.T, res *rivertest.WorkResult) {
	t.Helper()
	require.Equal(t, river.EventKindJobFailed, res.EventKind)
	require.Contains(t, []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateRetryable}, res.Job.State)
}

func (b *workerBundle) hold(t *testing.T, sku string, n int64, ttl int64) inventory.Reservation {
	t.Helper()
	r, _, err := b.inv.Hold(context.Background(), inventory.HoldRequest{
		Client: "shop", IdempotencyKey: uuid.NewString(), TTLSeconds: ttl, Items: []inventory.Item{{SKU: sku, Quantity: n}},
	})
	require.NoError(t, err)
	return r
}

// TestExpireHoldsWorkerRecordsItsRun: a run picked up after its span has
// passed makes one pass and records what it released as the job's output,
// where DBAs see it in river_job.
func TestExpireHoldsWorkerRecordsItsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	var due []uuid.UUID
	for range 3 {
		due = append(due, b.hold(t, "A1", 1, 600).ID)
	}
	later := b.hold(t, "A1", 1, 600)
	_, err := b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = ANY($1)`, due)
	require.NoError(t, err)

	w := testWorker(t, &expireHoldsWorker{inv: b.inv, span: time.Second})
	start := time.Now()
	res, err := w.Work(ctx, t, b.tx(t), ExpireHoldsArgs{}, &river.InsertOpts{ScheduledAt: time.Now().Add(-time.Minute)})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second, "a late run does not wait out a span")
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	var out inventory.ExpiryRun
	require.NoError(t, json.Unmarshal(res.Job.Output(), &out), "output: %s", res.Job.Output())
	out.Waited = "" // how long taking the expiry lock took: more than 10 ms is recorded, which a busy machine can take
	require.Equal(t, inventory.ExpiryRun{Released: 3, Passes: 1}, out)
	require.Equal(t, 3, dbtest.Count(t, b.pool, `SELECT count(*) FROM reservations WHERE id = ANY($1) AND status = 'expired'`, due))
	got, err := b.inv.Get(ctx, later.ID, inventory.Caller{Ops: true})
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, got.Status, "not due yet")
}

// TestRollbackBatchWorkerGivesUpOnItsLastAttempt: a batch that fails is
// retried, with the request left running; on its last attempt the worker
// marks the request failed with the error, for reconciliation to retry.
func TestRollbackBatchWorkerGivesUpOnItsLastAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	b.hold(t, "A1", 1, 600)
	var created rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		created, err = b.rollbacks.StartTx(ctx, tx, rollbacks.Request{
			Operator: "alice", Reason: "x", Scope: rollbacks.Scope{SKU: "A1"}, Source: rollbacks.SourceCLI,
		})
		return err
	}))
	// A request its batch cannot read: every attempt fails.
	_, err := b.pool.Exec(ctx, `UPDATE rollback_requests SET scope = '{"reservation_ids": 5}' WHERE id = $1`, created.RollbackID)
	require.NoError(t, err)
	request := func() (status string, why *string) {
		t.Helper()
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT status, error FROM rollback_requests WHERE id = $1`, created.RollbackID).Scan(&status, &why))
		return status, why
	}

	w := testWorker(t, &rollbackBatchWorker{campaigns: b.campaigns, rollbacks: b.rollbacks})
	tx := b.tx(t)
	job, err := w.Work(ctx, t, tx, rollbacks.RollbackBatchArgs{RollbackID: created.RollbackID}, nil)
	require.Error(t, err)
	requireRetried(t, job)
	status, why := request()
	require.Equal(t, rollbacks.StatusPending, status, "an attempt that fails changes nothing")
	require.Nil(t, why)

	last := *job.Job
	last.Attempt = last.MaxAttempts - 1 // the next attempt is the last
	res, err := w.WorkJob(ctx, t, tx, &last)
	require.Error(t, err)
	require.Equal(t, rivertype.JobStateDiscarded, res.Job.State)
	status, why = request()
	require.Equal(t, rollbacks.StatusFailed, status)
	require.NotNil(t, why)
	require.Contains(t, *why, "scope", "the request says why")
}

// TestReconcileWorkerCancelsWhatNoRetryMends: a run the job names that
// does not exist cancels the job rather than retry it; a periodic run
// completes.
func TestReconcileWorkerCancelsWhatNoRetryMends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	w := testWorker(t, &reconcileWorker{svc: b.reconcile})
	tx := b.tx(t)

	res, err := w.Work(ctx, t, tx, reconcile.ReconcileArgs{RunID: 424242}, nil)
	require.NoError(t, err, "a cancel is not an error of the worker's")
	require.Equal(t, river.EventKindJobCancelled, res.EventKind)
	require.Contains(t, lastError(t, res.Job), "424242")

	res, err = w.Work(ctx, t, tx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerPeriodic}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	latest, err := b.reconcile.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.StatusSucceeded, latest.Status)
	require.EqualValues(t, 1, latest.RowsChecked)
}

// TestCampaignWorkers: a start that main lacks stock for fails (to be
// retried) with its alert; the end job closes an active campaign as the
// system, and leaves one an operator ended early as the operator ended it.
func TestCampaignWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	dbtest.StockIn(t, b.pool, "A1", 3)
	create := func(id string) {
		t.Helper()
		_, _, err := b.campaigns.CreateOnce(ctx, idempotency.NewKey("alice", id), campaigns.Request{
			ID: id, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60,
			Allotments: []campaigns.Allotment{{SKU: "A1", Quantity: 2}}, Actor: "alice",
		})
		require.NoError(t, err)
	}
	status := func(id string) campaigns.Campaign {
		t.Helper()
		c, err := b.campaigns.Get(ctx, id)
		require.NoError(t, err)
		return c
	}
	start := testWorker(t, &campaignStartWorker{campaigns: b.campaigns})
	end := testWorker(t, &campaignEndWorker{campaigns: b.campaigns})
	tx := b.tx(t)

	create("c1")
	create("c2")
	res, err := start.Work(ctx, t, tx, campaigns.CampaignStartArgs{Campaign: "c1"}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	require.Equal(t, campaigns.StatusActive, status("c1").Status)
	res, err = start.Work(ctx, t, tx, campaigns.CampaignStartArgs{Campaign: "c2"}, nil)
	require.ErrorContains(t, err, "main lacks stock")
	requireRetried(t, res)
	require.Equal(t, campaigns.StatusScheduled, status("c2").Status)
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM alerts WHERE kind = 'campaign_start_failed' AND subject = 'campaign:c2'`))

	res, err = end.Work(ctx, t, tx, campaigns.CampaignEndArgs{Campaign: "c1"}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	c1 := status("c1")
	require.Equal(t, campaigns.StatusEnded, c1.Status)
	require.Equal(t, "system:campaign_end", *c1.EndedBy)

	early, err := b.campaigns.End(ctx, "c2", "bob", "called off")
	require.NoError(t, err)
	res, err = end.Work(ctx, t, tx, campaigns.CampaignEndArgs{Campaign: "c2"}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	c2 := status("c2")
	require.Equal(t, "bob", *c2.EndedBy, "ended early: left as the operator ended it")
	require.Equal(t, "called off", *c2.EndReason)
	require.Equal(t, early.RollbackID, c2.Rollback.ID)
}

// TestDeliverAlertWorkerWithoutWebhook: with no webhook configured a
// delivery job is cancelled, not retried.
func TestDeliverAlertWorkerWithoutWebhook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	a, err := b.alerts.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "k", Subject: "s", Action: "a"})
	require.NoError(t, err)
	w := testWorker(t, &deliverAlertWorker{alerts: b.alerts})
	res, err := w.Work(ctx, t, b.tx(t), alerts.DeliverAlertArgs{AlertID: a.ID}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind)
	require.Contains(t, lastError(t, res.Job), "STOCKHOLD_ALERT_WEBHOOK")
}

// TestManualRollbackWorkerRefuses: a manual rollback without a reason is
// cancelled with a critical alert naming the job, and records nothing.
func TestManualRollbackWorkerRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	w := testWorker(t, &manualRollbackWorker{rollbacks: b.rollbacks, alerts: b.alerts})
	res, err := w.Work(ctx, t, b.tx(t), rollbacks.ManualRollbackArgs{Operator: "bob", Scope: rollbacks.Scope{SKU: "A1"}}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCancelled, res.EventKind)
	require.Contains(t, lastError(t, res.Job), "reason is required")
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM alerts WHERE kind = $1 AND subject = 'job:' || $2::bigint AND level = 'critical'`,
		AlertManualRollbackRefused, res.Job.ID))
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM rollback_requests`))
}

// TestWebhookDeliverWorkerSnoozesOnAFailingReceiver: a receiver that
// fails is the subscription's business, so the delivery job snoozes until
// its retry (not an attempt of its own) rather than fail; once the
// receiver takes the batch the job completes with what it delivered as its
// output.
func TestWebhookDeliverWorkerSnoozesOnAFailingReceiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := workerSetup(t)
	var failing atomic.Bool
	failing.Store(true)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	inserter, err := NewInserter(b.pool)
	require.NoError(t, err)
	svc := webhooks.New(b.pool, inserter, b.alerts, webhooks.Config{AllowPrivate: true, RetryBase: time.Minute, Log: quietLog})
	var hook webhooks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		hook, err = svc.CreateTx(ctx, tx, webhooks.Register{URL: receiver.URL, Events: []string{"*"}, Actor: "alice"})
		return err
	}))
	dbtest.StockIn(t, b.pool, "A1", 5)
	eventstest.WaitServed(t, b.pool)
	w := testWorker(t, &webhookDeliverWorker{svc: svc})
	tx := b.tx(t)

	res, err := w.Work(ctx, t, tx, webhooks.DeliverArgs{WebhookID: hook.ID}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobSnoozed, res.EventKind)
	require.WithinDuration(t, time.Now().Add(time.Minute), res.Job.ScheduledAt, 10*time.Second, "due when the retry is")
	require.Zero(t, res.Job.Attempt, "a snooze gives its attempt back")
	got, err := svc.Get(ctx, hook.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Failures)

	failing.Store(false)
	res, err = w.Work(ctx, t, tx, webhooks.DeliverArgs{WebhookID: hook.ID}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, res.EventKind)
	var out webhooks.Result
	require.NoError(t, json.Unmarshal(res.Job.Output(), &out), "output: %s", res.Job.Output())
	require.Equal(t, 1, out.Delivered, "the restock's stock.changed")
	require.Equal(t, 1, out.Batches)
	got, err = svc.Get(ctx, hook.ID)
	require.NoError(t, err)
	require.Zero(t, got.Failures)
}
