-- webhooks.sql: are webhook receivers getting the event feed, and if not, why?
--
--   psql "$DATABASE_URL" -X -f sql/webhooks.sql
--
-- Read only.
--
-- How to read it:
--   1. The feed's horizon. An event is served (GET /v1/events, webhooks)
--      only once every transaction that could still write before it has
--      ended: the oldest transaction with a transaction id still running on
--      the server, in any database, holds the whole feed back. Shown: the
--      oldest few, with their session. A few milliseconds is normal (a
--      batch of holds); seconds or more stalls events and webhooks alike.
--   2. Each webhook: the last event its receiver acknowledged and when that
--      event happened (`oldest_pending_at` is the first one not yet
--      acknowledged: the lag), how many ledger rows wait after it (counted
--      up to 10,001), failures in a row at the batch now due, since when,
--      the last error, and its delivery job (one per webhook at most:
--      `scheduled`/`available` = waiting to retry or to run, `running`).
--   3. The dispatcher's last runs (webhook_dispatch, one job per 5 s span):
--      how many deliveries it started. None in the last minute: no worker
--      works the `webhooks` queue, or no River leader enqueues the runs.
--
-- What to do next:
--   - Section 1 shows an old transaction: if it is `idle in transaction`
--     (a session left open), end it: SELECT pg_terminate_backend(pid).
--   - `failures` 3 or more: the receiver refuses deliveries (a critical
--     `webhook_failing` alert is open); `last_error` says how. Delivery is
--     retried (every 16 x STOCKHOLD_RETRY_BASE, 80 s by default) from the
--     last acknowledged event and resumes by itself once the receiver takes
--     it; or DELETE /v1/webhooks/{id} if the receiver is gone for good.
--   - Rows pending, no failures, no delivery job: the dispatcher is not
--     running (section 3, then job_health.sql).

\echo '== 1. The feed horizon: the oldest transactions still running =='
SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon_xid,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL) AS transactions_with_an_xid;
SELECT a.pid,
       a.datname,
       a.state,
       (now() - a.xact_start)::interval(0) AS open_for,
       a.backend_xid::text AS xid,
       left(regexp_replace(a.query, '\s+', ' ', 'g'), 80) AS query
FROM pg_stat_activity a
WHERE a.backend_xid IS NOT NULL
ORDER BY age(a.backend_xid) DESC
LIMIT 5;

\echo '== 2. Webhooks and their delivery =='
SELECT w.id,
       w.url,
       array_to_string(w.events, ',') AS events,
       w.cursor_xid::text || '-' || w.cursor_id || '-' || w.cursor_n AS last_event_id,
       w.delivered_at,
       w.delivered_events,
       p.oldest_pending_at,
       p.pending_rows,
       w.failures,
       w.failing_since,
       left(w.last_error, 120) AS last_error,
       (SELECT j.state::text || ' (job ' || j.id || ', attempt ' || j.attempt || ', due ' || to_char(j.scheduled_at, 'HH24:MI:SS') || ')'
        FROM river_job j
        WHERE j.kind = 'webhook_deliver' AND j.args @> jsonb_build_object('webhook_id', w.id)
        ORDER BY j.id DESC
        LIMIT 1) AS delivery_job
FROM webhooks w
CROSS JOIN LATERAL (
    SELECT min(x.at) AS oldest_pending_at, count(*) AS pending_rows
    FROM (SELECT l.at FROM ledger l
          WHERE l.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
            AND (l.feed_xid, l.id) > (w.cursor_xid, w.cursor_id)
          ORDER BY l.feed_xid, l.id
          LIMIT 10001) x
) p
ORDER BY w.id;

\echo '== 3. The dispatcher''s last runs =='
SELECT j.id,
       j.state,
       j.scheduled_at,
       j.finalized_at,
       j.metadata -> 'output' AS output
FROM river_job j
WHERE j.kind = 'webhook_dispatch'
ORDER BY j.id DESC
LIMIT 5;
