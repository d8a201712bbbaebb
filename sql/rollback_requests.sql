-- rollback_requests.sql: who rolled back which holds, why, and how far has
-- each rollback got?
--
--   psql "$DATABASE_URL" -X -f sql/rollback_requests.sql
--   psql "$DATABASE_URL" -X -v limit=100 -f sql/rollback_requests.sql
--   psql "$DATABASE_URL" -X -v job_id=1234 -f sql/rollback_requests.sql   (one request, by its River job)
--
-- Read only.
--
-- How to read it:
--   1. The newest rollback requests (`limit`, default 50), manual (source
--      http, cli or sql) and campaign ends (campaign_end):
--      operator, reason      who asked and why (also the ledger's actor and
--                            reason on every `rollback` row it wrote).
--      operator_key          the API key that asked (any ops key may claim
--                            any operator), db:<user> from the CLI, empty
--                            for a plain SQL job or a campaign's end on time.
--      scope                 reservation_ids, campaign, or sku + pool +
--                            held_before, and any cutoff, as stored.
--      requested_at          the cut-off: holds created at or after it are
--                            never touched, whatever the scope (a
--                            held_before or cutoff moves it earlier).
--      resumes, resumed_by,  how often its stranded chain of jobs was
--      resumed_key           resumed, last by whom, with which key.
--      status                pending (its job has not run yet), running,
--                            succeeded, failed (see error).
--      released_*, batches   progress so far: holds and units handed back,
--                            in batches of at most 100 holds.
--      matched_*             a dry run's answer: what it would release.
--      job_state             the manual_rollback or campaign_end job that
--                            started it; batch_job_* the newest of its chain
--                            of rollback_batch jobs, with its last error.
--   2. manual_rollback jobs that have no request row: a plain SQL insert
--      (manual_rollback.sql) that no worker has picked up yet (available:
--      are workers running? job_health.sql), or one the worker refused
--      (cancelled: operator, reason or scope missing or invalid; last_error
--      says which, and a critical alert was raised).
--
-- What to do next:
--   - running for long with a batch job `scheduled`/`available`: the
--     workers are behind or down (job_health.sql).
--   - failed, or a batch job discarded or cancelled: read error /
--     batch_last_error, fix the cause, then resume it:
--     `stockhold rollback resume ID` or POST /v1/rollbacks/{id}/resume (or
--     retry its job from the dashboard). Holds already released are skipped,
--     and holds made after the request (requested_at) are never touched.
--     Reconciliation resumes a running request whose jobs were all cancelled
--     or deleted on its own, with a chain_resumed alert.
--   - A dry run succeeded and the matched holds are the right ones: enqueue
--     the same scope again with dry_run false.

\if :{?limit} \else \set limit 50 \endif
\if :{?job_id} \else \set job_id '' \endif

\echo '== 1. Rollback requests, newest first =='
SELECT r.id, date_trunc('second', r.created_at) AS created_at, r.operator, r.operator_key, r.reason, r.source,
       r.scope::text AS scope, r.dry_run, r.status,
       date_trunc('second', r.requested_at) AS requested_at, r.resumes, r.resumed_by, r.resumed_key,
       r.released_count, r.released_units, r.batches, r.matched_count, r.matched_units,
       date_trunc('second', coalesce(r.finished_at, now()) - r.started_at) AS took,
       r.error,
       r.job_id, j.kind AS job_kind, j.state AS job_state,
       b.id AS batch_job_id, b.state AS batch_job_state, b.attempt || '/' || b.max_attempts AS batch_attempts,
       left(b.errors[array_upper(b.errors, 1)] ->> 'error', 200) AS batch_last_error
FROM rollback_requests r
LEFT JOIN river_job j ON j.id = r.job_id
LEFT JOIN LATERAL (
    SELECT * FROM river_job x
    WHERE x.kind = 'rollback_batch' AND x.args ->> 'rollback_id' = r.id::text
    ORDER BY x.id DESC
    LIMIT 1
) b ON true
WHERE :'job_id' = '' OR r.job_id = nullif(:'job_id', '')::bigint
ORDER BY r.id DESC
LIMIT :limit;

\echo '== 2. manual_rollback jobs without a request (not picked up yet, or refused) =='
SELECT j.id AS job_id, j.state, j.attempt || '/' || j.max_attempts AS attempts,
       date_trunc('second', j.created_at) AS created_at,
       j.args ->> 'operator' AS operator, j.args ->> 'reason' AS reason,
       j.args::text AS args,
       left(j.errors[array_upper(j.errors, 1)] ->> 'error', 300) AS last_error
FROM river_job j
WHERE j.kind = 'manual_rollback'
  AND NOT EXISTS (SELECT 1 FROM rollback_requests r WHERE r.job_id = j.id)
  AND (:'job_id' = '' OR j.id = nullif(:'job_id', '')::bigint)
ORDER BY j.id DESC
LIMIT :limit;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset limit
\unset job_id
