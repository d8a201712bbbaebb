-- name: MetricsJobBacklog :many
-- MetricsJobBacklog counts the River jobs waiting to run, by kind and state
-- (available: due now; scheduled and retryable: due later), with how long
-- the oldest due job has been due.
SELECT kind, state::text AS state, count(*)::bigint AS jobs,
       coalesce(extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE scheduled_at <= now())), 0)::float8 AS oldest_due_seconds
FROM river_job
WHERE state IN ('available', 'scheduled', 'retryable')
GROUP BY kind, state;

-- name: MetricsAlertsOpen :many
SELECT kind, level, count(*)::bigint AS alerts
FROM alerts
WHERE status = 'open'
GROUP BY kind, level;

-- name: MetricsReconcileLatest :many
-- MetricsReconcileLatest counts the findings of the latest finished
-- reconciliation run by class, with the run's finish time. A run without
-- findings still answers one row, with a null class.
SELECT extract(epoch FROM r.finished_at)::float8 AS finished_at, r.status, f.class, count(f.id)::bigint AS findings
FROM (SELECT * FROM reconcile_runs WHERE finished_at IS NOT NULL ORDER BY id DESC LIMIT 1) r
LEFT JOIN reconcile_findings f ON f.run_id = r.id
GROUP BY r.finished_at, r.status, f.class;

-- name: MetricsHoldsOpen :one
-- MetricsHoldsOpen counts the holds held now, and those of them more than
-- stuck_after_seconds past their expiry.
SELECT count(*)::bigint AS held,
       count(*) FILTER (WHERE expires_at < now() - interval '1 second' * @stuck_after_seconds::float8)::bigint AS stuck
FROM reservations
WHERE status = 'held';

-- name: MetricsLockWaits :many
-- MetricsLockWaits samples the sessions of this database waiting for a
-- lock now, by lock type (row locks show as transactionid or tuple), with
-- the longest wait so far.
SELECT l.locktype, count(*)::bigint AS waiting,
       coalesce(max(extract(epoch FROM now() - l.waitstart)), 0)::float8 AS longest_seconds
FROM pg_catalog.pg_locks l
JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND a.datname = current_database()
GROUP BY l.locktype;
