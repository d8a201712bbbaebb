-- stuck_holds.sql: which holds are still `held` although their expiry has
-- passed, and why were they not expired?
--
--   psql "$DATABASE_URL" -X -f sql/stuck_holds.sql
--   psql "$DATABASE_URL" -X -v limit=1000 -f sql/stuck_holds.sql
--
-- Read only. Uses the partial index on held holds, so it stays cheap however
-- many holds have ended.
--
-- How to read it:
--   1. Summary: how many held holds are past expires_at, how many by more
--      than the sweeper's grace (STOCKHOLD_SWEEP_GRACE, default 1 minute),
--      and the units they keep reserved.
--   2. The holds (most overdue first, `limit` rows, default 200): who holds
--      them, how long past expiry, their SKU lines (sku/pool x quantity), and
--      their release_hold job: its state, attempts and last error.
--      A hold a few seconds overdue is normal (its job runs at expires_at,
--      River's scheduler polls every few seconds). Past the grace, the
--      sweep_expired job (every 30 s) should release it.
--      `release_job_state` empty: no job row. River deletes completed jobs
--      after a day, so an old hold whose job completed has none; a young
--      one without a job lost it (the sweeper is the backstop).
--      `discarded`: the job failed three times (see its last_error and
--      job_health.sql); `scheduled` long past its time: no River leader.
--
-- What to do next:
--   - Many overdue by more than the grace: the workers or the sweeper are
--     not running; run job_health.sql (lag, leader, sweep_expired's last run).
--   - The sweep runs but these stay: its errors are in job_health.sql
--     section 3, and a reconciliation (`stockhold reconcile`) lists them as
--     auto-fix findings and releases them through the normal path.
--   - To hand the stock back now, by hand: manual_rollback.sql with the
--     reservation_ids from this list (it marks them `released`, audited).

\if :{?limit} \else \set limit 200 \endif

\echo '== 1. Held holds past their expiry =='
SELECT count(*)                                                     AS past_expiry,
       count(*) FILTER (WHERE r.expires_at < now() - interval '1 minute') AS past_grace,
       coalesce(sum(l.units), 0)                                    AS units_reserved,
       date_trunc('second', now() - min(r.expires_at))              AS most_overdue
FROM reservations r
LEFT JOIN LATERAL (SELECT sum(quantity) AS units FROM reservation_lines WHERE reservation_id = r.id) l ON true
WHERE r.status = 'held' AND r.expires_at < now();

\echo '== 2. Stuck holds, most overdue first =='
-- The holds first, then one pass over the release_hold jobs for all of them
-- (river_job has no index on args).
WITH stuck AS MATERIALIZED (
    SELECT id, client, order_ref, campaign, expires_at
    FROM reservations
    WHERE status = 'held' AND expires_at < now()
    ORDER BY expires_at, id
    LIMIT :limit
), release_jobs AS (
    SELECT DISTINCT ON (args ->> 'reservation_id') args ->> 'reservation_id' AS reservation_id,
           id, state, attempt, max_attempts, scheduled_at, errors
    FROM river_job
    WHERE kind = 'release_hold' AND args ->> 'reservation_id' IN (SELECT id::text FROM stuck)
    ORDER BY args ->> 'reservation_id', id DESC
)
SELECT s.id, s.client, s.order_ref, s.campaign,
       date_trunc('second', s.expires_at)               AS expires_at,
       date_trunc('second', now() - s.expires_at)       AS overdue,
       (SELECT string_agg(l.sku || '/' || l.pool || ' x ' || l.quantity, ', ' ORDER BY l.sku, l.pool)
        FROM reservation_lines l WHERE l.reservation_id = s.id) AS lines,
       j.id                                             AS release_job_id,
       j.state                                          AS release_job_state,
       j.attempt || '/' || j.max_attempts               AS attempts,
       date_trunc('second', j.scheduled_at)             AS job_scheduled_at,
       left(j.errors[array_upper(j.errors, 1)] ->> 'error', 200) AS last_error
FROM stuck s
LEFT JOIN release_jobs j ON j.reservation_id = s.id::text
ORDER BY s.expires_at, s.id;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset limit
