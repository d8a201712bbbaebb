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
--      them, how long past expiry, their SKU lines (sku/pool x quantity),
--      and whether another session holds a lock on one of their stock
--      rows right now (`locked_rows`): the expiry loop skips such holds
--      rather than wait, and takes them once the lock goes.
--      A hold less than a second overdue is normal: the expiry loop (the
--      expire_holds job) releases due holds every STOCKHOLD_EXPIRY_TICK
--      (200 ms). Past the grace, the sweep_expired job (every 30 s) should.
--   3. The expiry loop's last runs (one expire_holds job per 5 s span):
--      when each ran and what it released. No run in the last minute: no
--      worker works the `expiry` queue, or no River leader enqueues the
--      runs (job_health.sql).
--
-- What to do next:
--   - Many overdue by more than the grace: the workers or the sweeper are
--     not running; run job_health.sql (lag, leader, the expiry queue).
--   - `locked_rows` set: find the session holding the lock
--     (pg_stat_activity, `idle in transaction`) and end it.
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
WITH stuck AS MATERIALIZED (
    SELECT id, client, order_ref, campaign, expires_at
    FROM reservations
    WHERE status = 'held' AND expires_at < now()
    ORDER BY expires_at, id
    LIMIT :limit
)
SELECT s.id, s.client, s.order_ref, s.campaign,
       date_trunc('second', s.expires_at)               AS expires_at,
       date_trunc('second', now() - s.expires_at)       AS overdue,
       (SELECT string_agg(l.sku || '/' || l.pool || ' x ' || l.quantity, ', ' ORDER BY l.sku COLLATE "C", l.pool COLLATE "C")
        FROM reservation_lines l WHERE l.reservation_id = s.id) AS lines,
       (SELECT string_agg(l.sku || '/' || l.pool, ', ' ORDER BY l.sku COLLATE "C", l.pool COLLATE "C")
        FROM reservation_lines l
        JOIN stock st ON st.sku = l.sku AND st.pool = l.pool
        JOIN pg_locks k ON k.locktype = 'transactionid' AND k.granted
                       AND k.transactionid::text = st.xmax::text AND st.xmax::text <> '0'
        WHERE l.reservation_id = s.id)                  AS locked_rows
FROM stuck s
ORDER BY s.expires_at, s.id;

\echo '== 3. The expiry loop, last runs =='
SELECT id, state, date_trunc('second', attempted_at) AS started, date_trunc('second', finalized_at) AS finished,
       (metadata -> 'output' ->> 'released')::int AS released,
       (metadata -> 'output' ->> 'passes')::int   AS passes,
       left(errors[array_upper(errors, 1)] ->> 'error', 200) AS last_error
FROM river_job
WHERE kind = 'expire_holds'
ORDER BY id DESC
LIMIT 5;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset limit
