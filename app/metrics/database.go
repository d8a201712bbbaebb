package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/stockhold/stockhold/app/db"
)

// DatabaseInterval is how often the gauges that need the database are
// read: often enough for an alert to fire within a scrape or two, rare
// enough that several instances scraped every few seconds cost the
// database nothing to speak of.
const DatabaseInterval = 5 * time.Second

// Snapshot is what one refresh read from the database.
type Snapshot struct {
	// At is when it was read; zero before the first refresh.
	At        time.Time
	Backlog   []db.MetricsJobBacklogRow
	Alerts    []db.MetricsAlertsOpenRow
	Reconcile []db.MetricsReconcileLatestRow
	Holds     db.MetricsHoldsOpenRow
	LockWaits []db.MetricsLockWaitsRow
}

// Database exports the gauges that need the database (River's backlog,
// open alerts, the latest reconciliation's findings, open and stuck holds,
// sessions waiting for locks) from a snapshot that Run refreshes every
// DatabaseInterval, so a scrape never queries the database however often it
// comes; and the connection pool's statistics, read from memory at each
// scrape. One per process is exported: the last one made.
type Database struct {
	pool       *pgxpool.Pool
	stuckAfter time.Duration

	mu   sync.Mutex
	snap Snapshot
}

// DBRefreshErrors counts failed refreshes of the database gauges; the
// gauges keep their last values meanwhile.
var DBRefreshErrors = promauto.NewCounter(prometheus.CounterOpts{
	Name: "stockhold_db_metrics_refresh_errors_total",
	Help: "Failed refreshes of the gauges read from the database (they keep their last values).",
})

var current atomic.Pointer[Database]

func init() { prometheus.MustRegister(collector{}) }

// NewDatabase returns the exporter of pool's gauges and makes it the one
// /metrics serves. A hold counts as stuck once it is stuckAfter past its
// expiry.
func NewDatabase(pool *pgxpool.Pool, stuckAfter time.Duration) *Database {
	d := &Database{pool: pool, stuckAfter: stuckAfter}
	current.Store(d)
	return d
}

// Run refreshes the snapshot now and then every DatabaseInterval until ctx
// is done, logging failures to log.
func (d *Database) Run(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(DatabaseInterval)
	defer t.Stop()
	for {
		if err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
			DBRefreshErrors.Inc()
			log.WarnContext(ctx, "refresh database metrics", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads a new snapshot in one read-only transaction.
func (d *Database) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, DatabaseInterval)
	defer cancel()
	var s Snapshot
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		if s.Backlog, err = q.MetricsJobBacklog(ctx); err != nil {
			return fmt.Errorf("job backlog: %w", err)
		}
		if s.Alerts, err = q.MetricsAlertsOpen(ctx); err != nil {
			return fmt.Errorf("open alerts: %w", err)
		}
		if s.Reconcile, err = q.MetricsReconcileLatest(ctx); err != nil {
			return fmt.Errorf("latest reconciliation: %w", err)
		}
		if s.Holds, err = q.MetricsHoldsOpen(ctx, d.stuckAfter.Seconds()); err != nil {
			return fmt.Errorf("open holds: %w", err)
		}
		if s.LockWaits, err = q.MetricsLockWaits(ctx); err != nil {
			return fmt.Errorf("lock waits: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.At = time.Now()
	d.mu.Lock()
	d.snap = s
	d.mu.Unlock()
	return nil
}

// Snapshot returns the latest snapshot.
func (d *Database) Snapshot() Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descJobsWaiting   = desc("stockhold_river_jobs_waiting", "River jobs waiting to run, by kind and state (available, scheduled, retryable).", "kind", "state")
	descOldestDue     = desc("stockhold_river_oldest_due_seconds", "Seconds the oldest job of a kind has been due (scheduled_at passed) without being worked.", "kind")
	descAlertsOpen    = desc("stockhold_alerts_open", "Open alerts by kind and level.", "kind", "level")
	descFindings      = desc("stockhold_reconcile_findings", "Findings of the latest finished reconciliation run, by class (auto_fix, retry, high_risk).", "class")
	descReconciledAt  = desc("stockhold_reconcile_last_finished_timestamp_seconds", "When the latest reconciliation run finished (Unix time).")
	descReconcileFail = desc("stockhold_reconcile_last_failed", "1 when the latest finished reconciliation run failed, else 0.")
	descHoldsOpen     = desc("stockhold_holds_open", "Holds held now.")
	descHoldsStuck    = desc("stockhold_holds_stuck", "Holds held more than a minute past their expiry now.")
	descLockWaiting   = desc("stockhold_db_lock_waiting", "Sessions of this database waiting for a lock when sampled, by lock type (row locks: transactionid, tuple).", "locktype")
	descLockLongest   = desc("stockhold_db_lock_wait_longest_seconds", "The longest current wait for a lock in this database when sampled.")
	descRefreshedAt   = desc("stockhold_db_metrics_refreshed_timestamp_seconds", "When the gauges read from the database were last refreshed (Unix time).")

	descPoolConns        = desc("stockhold_pgx_pool_conns", "Connections of the pool by state (acquired, idle, constructing).", "state")
	descPoolMax          = desc("stockhold_pgx_pool_max_conns", "The pool's maximum size.")
	descPoolAcquires     = desc("stockhold_pgx_pool_acquires_total", "Connections acquired from the pool.")
	descPoolAcquireTime  = desc("stockhold_pgx_pool_acquire_seconds_total", "Time spent acquiring connections.")
	descPoolEmpty        = desc("stockhold_pgx_pool_empty_acquires_total", "Acquires that had to wait for a connection (none idle).")
	descPoolEmptyWait    = desc("stockhold_pgx_pool_empty_acquire_wait_seconds_total", "Time spent waiting for a connection when none was idle.")
	descPoolCanceled     = desc("stockhold_pgx_pool_canceled_acquires_total", "Acquires given up by their context (a request timed out waiting for a connection).")
	descPoolNewConns     = desc("stockhold_pgx_pool_new_conns_total", "Connections opened.")
	reconcileClasses     = []string{"auto_fix", "retry", "high_risk"}
	dbCollectorDescs     = []*prometheus.Desc{descJobsWaiting, descOldestDue, descAlertsOpen, descFindings, descReconciledAt, descReconcileFail, descHoldsOpen, descHoldsStuck, descLockWaiting, descLockLongest, descRefreshedAt}
	poolCollectorDescs   = []*prometheus.Desc{descPoolConns, descPoolMax, descPoolAcquires, descPoolAcquireTime, descPoolEmpty, descPoolEmptyWait, descPoolCanceled, descPoolNewConns}
	gauge, counterMetric = prometheus.GaugeValue, prometheus.CounterValue
)

// collector serves the current Database's snapshot and pool statistics.
type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range dbCollectorDescs {
		ch <- d
	}
	for _, d := range poolCollectorDescs {
		ch <- d
	}
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	d := current.Load()
	if d == nil {
		return
	}
	collectPool(ch, d.pool.Stat())
	s := d.Snapshot()
	if s.At.IsZero() {
		return // nothing read yet: no gauge rather than a false zero
	}
	m := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, t, v, labels...)
	}
	m(descRefreshedAt, gauge, float64(s.At.UnixNano())/1e9)
	oldest := map[string]float64{}
	for _, b := range s.Backlog {
		m(descJobsWaiting, gauge, float64(b.Jobs), b.Kind, b.State)
		oldest[b.Kind] = max(oldest[b.Kind], b.OldestDueSeconds)
	}
	for kind, secs := range oldest {
		m(descOldestDue, gauge, secs, kind)
	}
	for _, a := range s.Alerts {
		m(descAlertsOpen, gauge, float64(a.Alerts), a.Kind, a.Level)
	}
	if len(s.Reconcile) > 0 {
		byClass := map[string]float64{}
		for _, r := range s.Reconcile {
			if r.Class != nil {
				byClass[*r.Class] += float64(r.Findings)
			}
		}
		for _, class := range reconcileClasses {
			m(descFindings, gauge, byClass[class], class)
		}
		failed := 0.0
		if s.Reconcile[0].Status == "failed" {
			failed = 1
		}
		m(descReconciledAt, gauge, s.Reconcile[0].FinishedAt)
		m(descReconcileFail, gauge, failed)
	}
	m(descHoldsOpen, gauge, float64(s.Holds.Held))
	m(descHoldsStuck, gauge, float64(s.Holds.Stuck))
	longest := 0.0
	for _, w := range s.LockWaits {
		locktype := "unknown"
		if w.Locktype != nil {
			locktype = *w.Locktype
		}
		m(descLockWaiting, gauge, float64(w.Waiting), locktype)
		longest = max(longest, w.LongestSeconds)
	}
	m(descLockLongest, gauge, longest)
}

func collectPool(ch chan<- prometheus.Metric, st *pgxpool.Stat) {
	m := func(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, t, v, labels...)
	}
	m(descPoolConns, gauge, float64(st.AcquiredConns()), "acquired")
	m(descPoolConns, gauge, float64(st.IdleConns()), "idle")
	m(descPoolConns, gauge, float64(st.ConstructingConns()), "constructing")
	m(descPoolMax, gauge, float64(st.MaxConns()))
	m(descPoolAcquires, counterMetric, float64(st.AcquireCount()))
	m(descPoolAcquireTime, counterMetric, st.AcquireDuration().Seconds())
	m(descPoolEmpty, counterMetric, float64(st.EmptyAcquireCount()))
	m(descPoolEmptyWait, counterMetric, st.EmptyAcquireWaitTime().Seconds())
	m(descPoolCanceled, counterMetric, float64(st.CanceledAcquireCount()))
	m(descPoolNewConns, counterMetric, float64(st.NewConnsCount()))
}
