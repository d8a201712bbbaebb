-- job_health.sql: are stockhold's background jobs (River) being worked?
--
--   psql "$DATABASE_URL" -X -f sql/job_health.sql
--   psql "$DATABASE_URL" -X -v errors_per_kind=20 -f sql/job_health.sql
--
-- Read only; cheap (river_job holds finished jobs for a day or a week at most,
-- River's cleaner deletes older ones).
--
-- Answers, in five result sets:
--   1. Jobs by kind and state. A healthy system has mostly `completed`;
--      `discarded` jobs failed all 3 attempts (each raised a critical alert,
--      see open_alerts.sql); `last_completed` is the newest completed job of
--      the kind still in the table: for the periodic kinds (expire_holds
--      every 5 s, sweep_expired every 30 s, watch_discarded every 15 s) it
--      should be recent.
--   2. Lag: for jobs that are due (scheduled_at <= now()), how long the oldest
--      has been waiting. `available_lag` above a few seconds means no worker
--      takes jobs (no `stockhold serve` running, the queue paused, or workers
--      all busy); `due_scheduled_lag` above ~10 s means no leader moves
--      scheduled and retryable jobs to available (section 4).
--      `longest_running` beyond the 5 minute job timeout means a worker died
--      mid-job; River's rescuer retries it after an hour.
--   3. The last errors of failing jobs per kind (retryable, discarded and
--      cancelled with errors, newest first, `errors_per_kind` per kind,
--      default 5), straight from river_job.errors. `alerted` says whether
--      the watch_discarded job has turned a discarded job into an alert yet.
--   4. River's leader (it runs the periodic jobs and the scheduler): an
--      empty result or an `expires_at` in the past means no leader.
--   5. Paused queues: a paused queue works nothing. Each kind of work has
--      its own queue: `expiry` (expire_holds, sweep_expired),
--      `campaigns`, `rollbacks`, `reconcile`, and `default` (manual_rollback
--      and the alert jobs).
--
-- What to do next:
--   - Lag growing: check that `stockhold serve` runs and can reach the
--     database; resume a paused queue from the dashboard (/ops/jobs/).
--   - Discarded expire_holds or sweep_expired: nothing to do for the stock,
--     the next run, the sweeper or reconciliation releases the holds
--     (stuck_holds.sql shows them); read the error.
--   - Discarded manual_rollback / rollback_batch: see rollback_requests.sql;
--     fix the cause, then retry the job from the dashboard (/ops/jobs/) or
--     enqueue the rollback again (it skips holds already released).
--   - A cancelled manual_rollback was refused (operator, reason or scope
--     missing or invalid): the last_error says which; enqueue it again.

\if :{?errors_per_kind} \else \set errors_per_kind 5 \endif

\echo '== 1. Jobs by kind and state =='
SELECT kind,
       count(*) FILTER (WHERE state = 'available')  AS available,
       count(*) FILTER (WHERE state = 'scheduled')  AS scheduled,
       count(*) FILTER (WHERE state = 'pending')    AS pending,
       count(*) FILTER (WHERE state = 'running')    AS running,
       count(*) FILTER (WHERE state = 'retryable')  AS retryable,
       count(*) FILTER (WHERE state = 'completed')  AS completed,
       count(*) FILTER (WHERE state = 'cancelled')  AS cancelled,
       count(*) FILTER (WHERE state = 'discarded')  AS discarded,
       count(*)                                     AS total,
       date_trunc('second', max(finalized_at) FILTER (WHERE state = 'completed')) AS last_completed
FROM river_job
GROUP BY kind
ORDER BY count(*) FILTER (WHERE state = 'discarded') DESC, kind;

\echo '== 2. Lag of due jobs (oldest first) =='
SELECT queue, kind,
       count(*) FILTER (WHERE state = 'available') AS available,
       date_trunc('second', now() - min(scheduled_at) FILTER (WHERE state = 'available')) AS available_lag,
       count(*) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now()) AS due_scheduled,
       date_trunc('second', now() - min(scheduled_at) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now())) AS due_scheduled_lag,
       count(*) FILTER (WHERE state = 'running') AS running,
       date_trunc('second', now() - min(attempted_at) FILTER (WHERE state = 'running')) AS longest_running,
       count(*) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at > now()) AS later,
       date_trunc('second', min(scheduled_at) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at > now())) AS next_at
FROM river_job
WHERE state IN ('available', 'scheduled', 'retryable', 'running')
GROUP BY queue, kind
ORDER BY least(min(scheduled_at) FILTER (WHERE state = 'available'),
               min(scheduled_at) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now())) NULLS LAST,
         queue, kind;

\echo '== 3. Last errors of failing jobs, per kind (newest first) =='
SELECT kind, id, state, attempt || '/' || max_attempts AS attempts,
       date_trunc('second', (errors[array_upper(errors, 1)] ->> 'at')::timestamptz) AS failed_at,
       left(errors[array_upper(errors, 1)] ->> 'error', 300) AS last_error,
       CASE WHEN state = 'discarded'
            THEN EXISTS (SELECT 1 FROM discarded_jobs d WHERE d.job_id = j.id AND d.finalized_at = j.finalized_at)
       END AS alerted,
       args
FROM (
    SELECT r.*, row_number() OVER (PARTITION BY r.kind ORDER BY coalesce(r.finalized_at, r.attempted_at) DESC NULLS LAST, r.id DESC) AS nth
    FROM river_job r
    WHERE r.state IN ('retryable', 'discarded', 'cancelled') AND cardinality(r.errors) > 0
) j
WHERE nth <= :errors_per_kind
ORDER BY kind, nth;

\echo '== 4. River leader =='
SELECT leader_id, date_trunc('second', elected_at) AS elected_at, date_trunc('second', expires_at) AS expires_at,
       expires_at > now() AS current
FROM river_leader;

\echo '== 5. Paused queues =='
SELECT name, paused_at FROM river_queue WHERE paused_at IS NOT NULL ORDER BY name;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset errors_per_kind
