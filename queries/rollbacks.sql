-- name: RollbackCreate :one
INSERT INTO rollback_requests (operator, reason, scope, dry_run, source, job_id)
VALUES (@operator, @reason, @scope, @dry_run, @source, sqlc.narg('job_id'))
RETURNING *;

-- name: RollbackGet :one
SELECT * FROM rollback_requests WHERE id = @id;

-- name: RollbackLock :one
SELECT * FROM rollback_requests WHERE id = @id FOR UPDATE;

-- name: RollbackGetByJob :one
SELECT * FROM rollback_requests WHERE job_id = @job_id;

-- name: RollbackSetJob :exec
UPDATE rollback_requests SET job_id = @job_id, updated_at = now() WHERE id = @id;

-- name: RollbackLatestForCampaign :one
SELECT * FROM rollback_requests
WHERE scope->>'campaign' = @campaign::text AND source = 'campaign_end'
ORDER BY id DESC
LIMIT 1;

-- name: RollbackProgress :one
-- RollbackProgress records one batch: what it released, and that the
-- request is running.
UPDATE rollback_requests
SET released_count = released_count + @released,
    released_units = released_units + @units,
    batches = batches + 1,
    status = 'running',
    started_at = coalesce(started_at, now()),
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: RollbackFinish :one
UPDATE rollback_requests
SET status = @status,
    error = sqlc.narg('error'),
    matched_count = coalesce(sqlc.narg('matched_count'), matched_count),
    matched_units = coalesce(sqlc.narg('matched_units'), matched_units),
    started_at = coalesce(started_at, now()),
    finished_at = now(),
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: ReservationsHeldByIDs :many
-- The next batch of a rollback by ids: held ones only, skipping rows a
-- confirm or release is working on (the next batch gets them if they stay held).
SELECT id FROM reservations
WHERE id = ANY(@ids::uuid[]) AND status = 'held'
ORDER BY id
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: ReservationsHeldByCampaign :many
SELECT id FROM reservations
WHERE campaign = @campaign AND status = 'held'
ORDER BY id
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: ReservationsHeldBySKU :many
SELECT r.id FROM reservations r
WHERE r.status = 'held' AND r.created_at < @held_before
  AND EXISTS (SELECT 1 FROM reservation_lines l WHERE l.reservation_id = r.id AND l.sku = @sku AND l.pool = @pool)
ORDER BY r.id
LIMIT @lim
FOR UPDATE OF r SKIP LOCKED;

-- name: RollbackScopeCount :one
-- RollbackScopeCount says how many holds (and units, all lines) in a scope
-- are still held, locked or not: a dry run's answer, and how a rollback
-- knows it is done. Exactly one scope's parameters are set.
SELECT count(DISTINCT r.id)::int AS holds, coalesce(sum(l.quantity), 0)::bigint AS units
FROM reservations r
JOIN reservation_lines l ON l.reservation_id = r.id
WHERE r.status = 'held'
  AND (sqlc.narg('ids')::uuid[] IS NULL OR r.id = ANY(sqlc.narg('ids')::uuid[]))
  AND (sqlc.narg('campaign')::text IS NULL OR r.campaign = sqlc.narg('campaign')::text)
  AND (sqlc.narg('sku')::text IS NULL OR (r.created_at < sqlc.narg('held_before')::timestamptz AND EXISTS (
        SELECT 1 FROM reservation_lines x WHERE x.reservation_id = r.id AND x.sku = sqlc.narg('sku')::text AND x.pool = sqlc.narg('pool')::text)));

-- name: RollbackMarkRunning :one
UPDATE rollback_requests
SET status = 'running', started_at = coalesce(started_at, now()), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: RollbackReopen :execrows
-- RollbackReopen sets a failed request back to running, for a retry of its
-- discarded batch job (a finished request's batches do nothing).
UPDATE rollback_requests
SET status = 'running', error = NULL, finished_at = NULL, updated_at = now()
WHERE id = @id AND status = 'failed';
