-- name: AlertRaise :one
-- AlertRaise opens an alert, or bumps the open one of the same kind and
-- subject: occurrences = 1 means this call opened it. A repeat may raise the
-- level, never lower it. A repeat more than repage_after_ms after the
-- alert last paged (0: never) pages again: this call must page when
-- paged_occurrences = occurrences in the returned row.
INSERT INTO alerts (level, kind, subject, sku, location, pool, details, suggested_action)
VALUES (@level, @kind, @subject, sqlc.narg('sku'), sqlc.narg('location'), sqlc.narg('pool'), @details, @suggested_action)
ON CONFLICT (kind, subject) WHERE status = 'open' DO UPDATE
SET last_seen_at = now(),
    occurrences = alerts.occurrences + 1,
    paged_at = CASE
        WHEN sqlc.arg('repage_after_ms')::bigint > 0 AND alerts.paged_at <= now() - sqlc.arg('repage_after_ms')::bigint * interval '1 millisecond'
        THEN now() ELSE alerts.paged_at END,
    paged_occurrences = CASE
        WHEN sqlc.arg('repage_after_ms')::bigint > 0 AND alerts.paged_at <= now() - sqlc.arg('repage_after_ms')::bigint * interval '1 millisecond'
        THEN alerts.occurrences + 1 ELSE alerts.paged_occurrences END,
    details = excluded.details,
    suggested_action = excluded.suggested_action,
    level = CASE
        WHEN alerts.level = 'critical' OR excluded.level = 'critical' THEN 'critical'
        WHEN alerts.level = 'warning' OR excluded.level = 'warning' THEN 'warning'
        ELSE 'info' END
RETURNING *;

-- name: AlertGet :one
SELECT * FROM alerts WHERE id = @id;

-- name: AlertList :many
-- AlertList returns up to lim alerts, the last seen first, those after
-- (seen_before, id_before) in that order when it is given (a keyset: an
-- alert seen again meanwhile moves to the top, out of the pages to come).
SELECT * FROM alerts
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status')::text)
  AND (sqlc.narg('seen_before')::timestamptz IS NULL
       OR (last_seen_at, id) < (sqlc.narg('seen_before')::timestamptz, @id_before::bigint))
ORDER BY last_seen_at DESC, id DESC
LIMIT @lim;

-- name: AlertAck :one
UPDATE alerts
SET status = 'acked', acked_by = @operator, acked_key = sqlc.narg('acked_key'), acked_at = now(),
    owner = coalesce(owner, @operator), owner_key = CASE WHEN owner IS NULL THEN sqlc.narg('acked_key') ELSE owner_key END, taken_at = coalesce(taken_at, now())
WHERE id = @id AND status = 'open'
RETURNING *;

-- name: AlertDelivered :exec
UPDATE alerts SET delivered_at = now() WHERE id = @id;

-- name: DiscardedJobsClaim :many
-- DiscardedJobsClaim records the discarded River jobs not seen before and
-- returns them with their last error. It reads river_job itself, so jobs
-- discarded by River's rescuer (a worker killed mid-job) are caught too.
WITH fresh AS (
    INSERT INTO discarded_jobs (job_id, finalized_at, kind)
    SELECT id, finalized_at, kind
    FROM river_job
    WHERE state = 'discarded' AND finalized_at > now() - interval '30 days'
    ON CONFLICT DO NOTHING
    RETURNING job_id
)
SELECT j.id, j.kind, j.args, j.attempt, j.max_attempts, j.finalized_at,
       coalesce(j.errors[array_length(j.errors, 1)]::text, '')::text AS last_error
FROM river_job j
JOIN fresh f ON f.job_id = j.id
ORDER BY j.kind, j.id;

-- name: DiscardedJobsLink :exec
UPDATE discarded_jobs SET alert_id = @alert_id WHERE job_id = ANY(@job_ids::bigint[]) AND alert_id IS NULL;

-- name: AlertResolve :execrows
-- AlertResolve closes the open or acknowledged alert of kind about subject
-- once what it reported went away (a webhook delivering again, a pool's
-- books balanced and the pool resumed), saying how.
UPDATE alerts
SET status = 'resolved', resolved_at = now(), resolution = @resolution
WHERE kind = @kind AND subject = @subject AND status IN ('open', 'acked');
