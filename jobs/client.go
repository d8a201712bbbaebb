// Package jobs runs stockhold's background work on River, in the same
// database as the data it changes: the workers, their periodic schedules,
// the retry policy and the River client that ties them together. Workers
// are thin: each decodes its args and calls into the domain packages.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/enqueue"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/partitions"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/retention"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
)

// The queues. Each kind of work has its own queue and its own workers, so
// that a backlog of one kind never starves another: a campaign start due
// while thousands of holds expire, or while a reconciliation checks a
// million rows, starts on time. Jobs are routed by kind when inserted (see
// routeQueues), wherever they are inserted from.
const (
	// QueueDefault keeps manual_rollback, which operators insert with plain
	// SQL into River's default queue (sql/manual_rollback.sql), and the
	// alert jobs.
	QueueDefault = river.QueueDefault
	// QueueExpiry: expire_holds and sweep_expired.
	QueueExpiry = "expiry"
	// QueueCampaigns: campaign_start and campaign_end, polled often so
	// that a campaign opens and closes on time.
	QueueCampaigns = "campaigns"
	// QueueRollbacks: rollback_batch chains, polled often so that a batch
	// starts when its pause is over.
	QueueRollbacks = "rollbacks"
	// QueueReconcile: reconcile.
	QueueReconcile = "reconcile"
	// QueueWebhooks: webhook_dispatch and webhook_deliver, polled often so
	// that events reach receivers soon after they happen.
	QueueWebhooks = "webhooks"
)

// queueOfKind is where each kind goes; kinds not listed stay in default.
var queueOfKind = map[string]string{
	"expire_holds":     QueueExpiry,
	"sweep_expired":    QueueExpiry,
	"campaign_start":   QueueCampaigns,
	"campaign_end":     QueueCampaigns,
	"rollback_batch":   QueueRollbacks,
	"reconcile":        QueueReconcile,
	"webhook_dispatch": QueueWebhooks,
	"webhook_deliver":  QueueWebhooks,
}

// schedulerTick is how often River's scheduler makes scheduled jobs
// available (an internal constant of River, 5 s), looking that far ahead.
const schedulerTick = 5 * time.Second

// routeQueues moves every job inserted into the default queue to its
// kind's queue (a job whose inserter chose a queue keeps it). A job
// scheduled less than a scheduler tick ahead is inserted available rather
// than scheduled: producers take an available job only once its
// scheduled_at has passed, at their next poll, whereas a scheduled one
// waits for the scheduler's tick and could start up to 5 s late (a campaign
// created a few seconds before its start, a rollback batch after its
// pause). River does the same for short snoozes and retries.
var routeQueues = river.JobInsertMiddlewareFunc(func(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range params {
		if q, ok := queueOfKind[p.Kind]; ok && (p.Queue == "" || p.Queue == QueueDefault) {
			p.Queue = q
		}
		if p.State == rivertype.JobStateScheduled && p.ScheduledAt != nil && time.Until(*p.ScheduledAt) < schedulerTick {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
})

// RescueAfter is how long a job may run before River's rescuer (on the
// leader, every 30 s) presumes its instance died and schedules it again,
// unless its kind's timeout is longer: the rescuer leaves a running job
// alone until its own timeout has passed too. Every job is idempotent, so a
// rescued job that was merely slow changes nothing the second time.
//
// With 10 s, a rollback or campaign start whose instance was killed runs
// again within about 50 s at worst (10 s, the rescuer's next pass, the
// retry's wait and River's scheduler), and within about 20 s when the
// instance restarts (its lease as leader runs out first).
const RescueAfter = 10 * time.Second

// Timeouts bound one attempt of each kind. A job past its timeout is
// cancelled (and retried); one whose instance died is rescued after its
// timeout or RescueAfter, whichever is longer.
const (
	// TimeoutChain is the kinds that move a rollback or campaign along
	// (manual_rollback, rollback_batch, campaign_start, campaign_end): each
	// job is one short transaction, and a crash must not stall them.
	TimeoutChain = RescueAfter
	// TimeoutSweepExpired is one sweep of expired holds.
	TimeoutSweepExpired = 2 * time.Minute
	// TimeoutDeliverAlert is one webhook delivery.
	TimeoutDeliverAlert = 30 * time.Second
	// TimeoutWatchDiscarded is one pass over discarded jobs.
	TimeoutWatchDiscarded = time.Minute
	// TimeoutReconcile gives a run over every SKU time to finish (a second
	// run waits for the first, which counts against its own timeout); a
	// reconciliation is never rescued while it is running within it.
	TimeoutReconcile = 10 * time.Minute
	// TimeoutRetention bounds one retention run, which stops deleting at
	// RetentionBudget and leaves the rest to the next.
	TimeoutRetention = 2 * time.Minute
	// TimeoutLedgerPartitions bounds one run of ledger_partitions: a few
	// catalog changes, and, when it archives, passes over a month of the
	// ledger (a run cut short is taken up by the next).
	TimeoutLedgerPartitions = 6 * time.Hour
)

// LedgerPartitionsInterval is how often ledger_partitions runs (and once at
// every start): the partitions it makes are months ahead, so a run that
// fails has many more behind it before writes would.
const LedgerPartitionsInterval = 6 * time.Hour

// RetentionBudget is how long one retention run deletes before it leaves
// the rest to the next run.
const RetentionBudget = time.Minute

// Deps are the domain services the workers call.
type Deps struct {
	Inventory *inventory.Service
	Alerts    *alerts.Service
	Rollbacks *rollbacks.Service
	Campaigns *campaigns.Service
	// Reconcile runs reconciliations; nil leaves the reconcile worker and
	// its periodic job out.
	Reconcile *reconcile.Service
	// Retention deletes old rows; nil (STOCKHOLD_RETENTION=0) leaves the
	// retention worker and its periodic job out.
	Retention *retention.Service
	// Webhooks delivers the event feed; nil leaves its workers and the
	// dispatcher out.
	Webhooks *webhooks.Service
	// Partitions makes the ledger's partitions ahead; nil leaves its
	// periodic job out.
	Partitions *partitions.Service
}

// Config tunes the client and the periodic jobs.
type Config struct {
	Workers       int
	SweepInterval time.Duration
	SweepGrace    time.Duration
	// WatchInterval is how often discarded jobs become alerts.
	WatchInterval time.Duration
	// ReconcileInterval is how often reconciliation runs.
	ReconcileInterval time.Duration
	// RetentionInterval is how often the retention job runs; 0 means hourly.
	RetentionInterval time.Duration
	// AlertWebhook receives new alerts; empty cancels deliveries.
	AlertWebhook string
	// RetryBase is the wait before the second attempt; the third waits four
	// times as long.
	RetryBase time.Duration
	// Test shortens River's own intervals for tests.
	Test bool
	// RescueAfter is when a job still running is presumed lost (its
	// worker died) and run again, unless its kind's timeout is longer;
	// every job is idempotent. 0 means RescueAfter.
	RescueAfter time.Duration
	// NotLeader keeps the client out of leader election: it works jobs but
	// never runs River's maintenance (rescuer, scheduler, periodic jobs).
	// Tests use it to choose which client rescues.
	NotLeader bool
	// ExpirySpan is how long one expire_holds run loops before the next
	// takes over; 0 means 5 s. Negative leaves the expiry loop out (tests
	// of the sweeper).
	ExpirySpan time.Duration
	// ExtraWorkers registers more workers (tests use it for failing ones).
	ExtraWorkers func(*river.Workers)
	// Middleware wraps every job's work (the app uses it to put the job's
	// id and kind in its log context).
	Middleware []rivertype.Middleware
	Log        *slog.Logger
}

// NewInserter returns an insert-only River client: the domain packages use
// it to enqueue jobs inside their own transactions, independent of whether
// this process works jobs.
func NewInserter(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{MaxAttempts: enqueue.MaxAttempts, Middleware: []rivertype.Middleware{routeQueues}})
}

// NewClient returns the River client that works every stockhold job kind
// and schedules the periodic ones. Start it to begin working.
func NewClient(pool *pgxpool.Pool, deps Deps, cfg Config) (*river.Client[pgx.Tx], error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	driver := riverpgxv5.New(pool)
	workers, periodic := schedule(driver, deps, cfg)
	if cfg.NotLeader {
		periodic = nil // only a leader enqueues them
	}
	rescueAfter := orDefault(cfg.RescueAfter, RescueAfter)
	return river.NewClient(driver, &river.Config{
		Queues: map[string]river.QueueConfig{
			QueueDefault:   {MaxWorkers: max(cfg.Workers, 1)},
			QueueExpiry:    {MaxWorkers: 3},
			QueueCampaigns: {MaxWorkers: 2, FetchPollInterval: 100 * time.Millisecond},
			QueueRollbacks: {MaxWorkers: 4, FetchPollInterval: 100 * time.Millisecond},
			QueueReconcile: {MaxWorkers: 1},
			// The dispatcher and up to 9 deliveries at once.
			QueueWebhooks: {MaxWorkers: 10, FetchPollInterval: 100 * time.Millisecond},
		},
		Workers:      workers,
		PeriodicJobs: periodic,
		MaxAttempts:  enqueue.MaxAttempts,
		RetryPolicy:  &retryPolicy{base: orDefault(cfg.RetryBase, config.Defaults().RetryBase)},
		ErrorHandler: &errorHandler{log: cfg.Log},
		// Only for kinds registered without register (ExtraWorkers); River
		// wants it no longer than RescueStuckJobsAfter.
		JobTimeout:             rescueAfter,
		RescueStuckJobsAfter:   rescueAfter,
		Logger:                 riverLogger(cfg.Log),
		Middleware:             append([]rivertype.Middleware{routeQueues, snoozeLostDatabase(cfg.Log)}, cfg.Middleware...),
		TestOnly:               cfg.Test,
		LeaderElectionDisabled: cfg.NotLeader,
	})
}

// schedule registers the workers of every job kind deps can serve, and
// returns them with the periodic jobs that enqueue the recurring ones
// (the sweeper, expiry, reconciliation, retention, webhook dispatch).
func schedule(driver *riverpgxv5.Driver, deps Deps, cfg Config) (*river.Workers, []*river.PeriodicJob) {
	al := deps.Alerts
	workers := river.NewWorkers()
	register(workers, &sweepExpiredWorker{inv: deps.Inventory, grace: cfg.SweepGrace}, TimeoutSweepExpired, al)
	register(workers, &deliverAlertWorker{alerts: deps.Alerts, webhook: cfg.AlertWebhook, client: &http.Client{Timeout: 20 * time.Second}}, TimeoutDeliverAlert, al)
	register(workers, &watchDiscardedWorker{alerts: deps.Alerts}, TimeoutWatchDiscarded, al)
	register(workers, &manualRollbackWorker{rollbacks: deps.Rollbacks, alerts: deps.Alerts}, TimeoutChain, al)
	register(workers, &rollbackBatchWorker{
		campaigns: deps.Campaigns, rollbacks: deps.Rollbacks, wake: &waker{exec: driver.GetExecutor(), log: cfg.Log},
	}, TimeoutChain, al)
	register(workers, &campaignStartWorker{campaigns: deps.Campaigns}, TimeoutChain, al)
	register(workers, &campaignEndWorker{campaigns: deps.Campaigns}, TimeoutChain, al)
	if cfg.ExtraWorkers != nil {
		cfg.ExtraWorkers(workers)
	}

	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(orDefault(cfg.SweepInterval, config.Defaults().SweepInterval)),
			func() (river.JobArgs, *river.InsertOpts) { return SweepExpiredArgs{}, nil },
			&river.PeriodicJobOpts{ID: "sweep_expired", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(orDefault(cfg.WatchInterval, config.Defaults().WatchInterval)),
			func() (river.JobArgs, *river.InsertOpts) { return WatchDiscardedArgs{}, nil },
			&river.PeriodicJobOpts{ID: "watch_discarded", RunOnStart: true}),
	}
	if cfg.ExpirySpan >= 0 {
		span := orDefault(cfg.ExpirySpan, 5*time.Second)
		// A run may outlast its span, waiting for the previous run to hand over.
		register(workers, &expireHoldsWorker{inv: deps.Inventory, span: span}, 2*span+time.Minute, al)
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(span),
			func() (river.JobArgs, *river.InsertOpts) { return ExpireHoldsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "expire_holds", RunOnStart: true}))
	}
	if deps.Reconcile != nil {
		register(workers, &reconcileWorker{svc: deps.Reconcile}, TimeoutReconcile, al)
		// Not on start: a restart (or a deploy of several instances) need
		// not check the books at once.
		periodic = append(periodic, river.NewPeriodicJob(
			river.PeriodicInterval(orDefault(cfg.ReconcileInterval, config.Defaults().ReconcileInterval)), periodicReconcile,
			&river.PeriodicJobOpts{ID: "reconcile"}))
	}

	if deps.Retention != nil {
		register(workers, &retentionWorker{svc: deps.Retention}, TimeoutRetention, al)
		periodic = append(periodic, river.NewPeriodicJob(
			river.PeriodicInterval(orDefault(cfg.RetentionInterval, time.Hour)),
			func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil },
			&river.PeriodicJobOpts{ID: "retention"}))
	}

	if deps.Partitions != nil {
		register(workers, &ledgerPartitionsWorker{svc: deps.Partitions}, TimeoutLedgerPartitions, al)
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(LedgerPartitionsInterval),
			func() (river.JobArgs, *river.InsertOpts) { return LedgerPartitionsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "ledger_partitions", RunOnStart: true}))
	}

	if deps.Webhooks != nil {
		register(workers, &webhookDeliverWorker{svc: deps.Webhooks}, TimeoutDeliverWebhook, al)
		// A run may outlast its span, waiting for the previous run to hand over.
		register(workers, &webhookDispatchWorker{svc: deps.Webhooks, span: dispatchSpan}, 2*dispatchSpan+time.Minute, al)
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(dispatchSpan),
			func() (river.JobArgs, *river.InsertOpts) { return webhooks.DispatchArgs{}, nil },
			&river.PeriodicJobOpts{ID: "webhook_dispatch", RunOnStart: true}))
	}
	return workers, periodic
}

// lostDatabaseSnooze is how long a job whose attempt lost the database
// waits before it runs again.
const lostDatabaseSnooze = time.Second

// snoozeLostDatabase turns an attempt that failed because the database went
// away under it (a failover or a restart: dberr.DatabaseLost) into a
// snooze, which River does not count as an attempt, so that an outage does
// not use up the three attempts of the jobs it interrupts (the expiry loop,
// a webhook delivery, a rollback batch) and raise critical alerts for
// work that never failed. The job runs again once the database is back,
// on the new primary. A job's own timeout or a failure of its own is
// still a failed attempt.
func snoozeLostDatabase(log *slog.Logger) rivertype.Middleware {
	return river.WorkerMiddlewareFunc(func(ctx context.Context, job *rivertype.JobRow, work func(context.Context) error) error {
		err := work(ctx)
		if err != nil && ctx.Err() == nil && dberr.DatabaseLost(err) {
			log.InfoContext(ctx, "job interrupted by the loss of the database; it runs again without counting the attempt",
				"kind", job.Kind, "job_id", job.ID, "err", err)
			return river.JobSnooze(lostDatabaseSnooze)
		}
		return err
	})
}

// riverLogger passes River's warnings and errors on to log; its routine
// info lines (producer counts every few seconds) would drown stockhold's.
func riverLogger(log *slog.Logger) *slog.Logger {
	return slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// orDefault is d, or def when d is not set: a setting's default comes from
// app/config, the rest are this package's constants.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// retryPolicy waits base before the second attempt and base*4 before the
// third: short enough that a transient fault (a restart, a lock timeout)
// heals within seconds, long enough not to hammer a database in trouble.
type retryPolicy struct{ base time.Duration }

func (p *retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	wait := p.base
	for i := 1; i < job.Attempt; i++ {
		wait *= 4
	}
	return time.Now().Add(wait)
}

// errorHandler logs every failed attempt with its job. Discarded jobs are
// turned into alerts by the watch_discarded job, which reads river_job and
// so also sees jobs discarded by River's rescuer.
type errorHandler struct{ log *slog.Logger }

func (h *errorHandler) HandleError(ctx context.Context, job *rivertype.JobRow, err error) *river.ErrorHandlerResult {
	h.log.WarnContext(ctx, "job attempt failed", "kind", job.Kind, "job_id", job.ID,
		"attempt", job.Attempt, "max_attempts", job.MaxAttempts, "err", err)
	return nil
}

func (h *errorHandler) HandlePanic(ctx context.Context, job *rivertype.JobRow, panicVal any, trace string) *river.ErrorHandlerResult {
	h.log.ErrorContext(ctx, "job attempt panicked", "kind", job.Kind, "job_id", job.ID,
		"attempt", job.Attempt, "panic", fmt.Sprint(panicVal), "trace", trace)
	return nil
}

// hardStopTimeout is how long Stop waits for jobs after cancelling them.
const hardStopTimeout = 10 * time.Second

// Stop stops client softly, as on SIGTERM: it fetches no more jobs and
// gives running ones soft to finish, so a job near its end does not lose
// an attempt; then it cancels their contexts (River retries them later, as
// after a crash) and waits up to 10 more seconds. It returns nil once
// River has stopped, whichever way.
func Stop(ctx context.Context, client *river.Client[pgx.Tx], soft time.Duration, log *slog.Logger) error {
	softCtx, cancel := context.WithTimeout(ctx, soft)
	defer cancel()
	err := client.Stop(softCtx)
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	log.WarnContext(ctx, "jobs still running after the soft-stop window; cancelling them", "soft_stop", soft)
	hardCtx, cancel := context.WithTimeout(ctx, hardStopTimeout)
	defer cancel()
	if err := client.StopAndCancel(hardCtx); err != nil {
		return fmt.Errorf("stop River: %w", err)
	}
	return nil
}
