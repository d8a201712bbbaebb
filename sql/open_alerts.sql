-- open_alerts.sql: what must a person look at right now?
--
--   psql "$DATABASE_URL" -X -f sql/open_alerts.sql
--   psql "$DATABASE_URL" -X -v limit=500 -f sql/open_alerts.sql
--
-- Read only.
--
-- How to read it:
--   1. Counts of open and acknowledged (not yet resolved) alerts by level.
--   2. The open alerts (`limit`, default 100): critical first, then warning,
--      then info, the most recently seen first within a level. There is at
--      most one open alert per kind and subject; a repeat bumps
--      `occurrences` and `last_seen_at` instead of opening another, so a high
--      count on an old alert means the cause is still there.
--      subject       what it is about: 'sku:A1/main', 'job:release_hold'
--                    (discarded jobs of a kind), 'job:1234' (one refused
--                    manual_rollback job), 'campaign:c1'.
--      suggested_action  what stockhold thinks you should do.
--      delivered     whether the webhook (STOCKHOLD_ALERT_WEBHOOK) got it.
--
-- What to do next:
--   - Follow suggested_action; details has the evidence (for a discarded
--     job: its id, args and last error; job_health.sql shows more).
--   - A pool paused by reconciliation: stock_health.sql, then resume it with
--     a reason once explained.
--   - Acknowledge it so the next person knows someone is on it:
--     POST /v1/alerts/{id}/ack with {"operator": "<you>"}.

\if :{?limit} \else \set limit 100 \endif

\echo '== 1. Alerts not resolved, by level =='
SELECT level,
       count(*) FILTER (WHERE status = 'open')  AS open,
       count(*) FILTER (WHERE status = 'acked') AS acked,
       date_trunc('second', max(last_seen_at))  AS last_seen_at
FROM alerts
WHERE status IN ('open', 'acked')
GROUP BY level
ORDER BY CASE level WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END;

\echo '== 2. Open alerts, critical first =='
SELECT id, level, kind, subject, sku, pool, occurrences,
       date_trunc('second', first_seen_at) AS first_seen_at,
       date_trunc('second', last_seen_at)  AS last_seen_at,
       suggested_action,
       delivered_at IS NOT NULL AS delivered,
       details::text AS details
FROM alerts
WHERE status = 'open'
ORDER BY CASE level WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, last_seen_at DESC, id DESC
LIMIT :limit;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset limit
