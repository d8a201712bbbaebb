-- name: RollbackCreate :one
-- RollbackCreate records a request; requested_at defaults to now (the
-- transaction's start), which is when an API or CLI request is made.
INSERT INTO rollback_requests (operator, operator_key, reason, scope, dry_run, source, job_id, requested_at)
VALUES (@operator, sqlc.narg('operator_key'), @reason, @scope, @dry_run, @source, sqlc.narg('job_id'),
        coalesce(sqlc.narg('requested_at')::timestamptz, now()))
RETURNING *;

-- name: DatabaseClock :one
-- DatabaseClock is the database's clock now, not the transaction's start:
-- a campaign's end takes its rollback's cut-off once its pools are paused.
SELECT clock_timestamp()::timestamptz AS now;

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
-- request is running (again, for a failed one whose batch was retried).
UPDATE rollback_requests
SET released_count = released_count + @released,
    released_units = released_units + @units,
    batches = batches + 1,
    status = 'running',
    error = NULL,
    finished_at = NULL,
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
-- The next batch of a rollback by ids: held ones created before the cut-off
-- only, skipping rows a confirm or release is working on (the next batch
-- gets them if they stay held).
SELECT id FROM reservations
WHERE id = ANY(@ids::uuid[]) AND status = 'held' AND created_at < @cutoff
ORDER BY id
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: ReservationsHeldByCampaign :many
SELECT id FROM reservations
WHERE campaign = @campaign AND status = 'held' AND created_at < @cutoff
ORDER BY id
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: ReservationsHeldByScope :many
-- ReservationsHeldByScope is the next batch of a rollback by SKU (its pool,
-- at one location or all) or by location (every SKU there).
SELECT r.id FROM reservations r
WHERE r.status = 'held' AND r.created_at < @cutoff
  AND EXISTS (SELECT 1 FROM reservation_lines l
              WHERE l.reservation_id = r.id
                AND (sqlc.narg('sku')::text IS NULL OR (l.sku = sqlc.narg('sku')::text AND l.pool = sqlc.narg('pool')::text))
                AND (sqlc.narg('location')::text IS NULL OR l.location = sqlc.narg('location')::text))
ORDER BY r.id
LIMIT @lim
FOR UPDATE OF r SKIP LOCKED;

-- name: RollbackScopeCount :one
-- RollbackScopeCount says how many holds in a scope created before the
-- cut-off are still held with a line in scope, locked or not, and the
-- units of those lines: a dry run's answer, what the real run hands back
-- (a hold's lines of the SKU's pool, at the location when given, or at the
-- location, with every other component line of a bundle line one of them
-- is a component of; every line of hold ids and of a campaign), and how a
-- rollback knows it is done. Exactly one scope's parameters are set.
SELECT count(DISTINCT r.id)::int AS holds, coalesce(sum(l.quantity), 0)::bigint AS units
FROM reservations r
JOIN reservation_lines l ON l.reservation_id = r.id
WHERE r.status = 'held'
  AND r.created_at < @cutoff
  AND (sqlc.narg('ids')::uuid[] IS NULL OR r.id = ANY(sqlc.narg('ids')::uuid[]))
  AND (sqlc.narg('campaign')::text IS NULL OR r.campaign = sqlc.narg('campaign')::text)
  AND EXISTS (
      -- l itself in scope, or a line of the same bundle line in scope.
      SELECT 1 FROM reservation_lines s
      WHERE s.reservation_id = l.reservation_id
        AND ((s.sku = l.sku AND s.location = l.location AND s.pool = l.pool) OR s.bundle_sku = l.bundle_sku)
        AND (sqlc.narg('sku')::text IS NULL OR (s.sku = sqlc.narg('sku')::text AND s.pool = sqlc.narg('pool')::text))
        AND (sqlc.narg('location')::text IS NULL OR s.location = sqlc.narg('location')::text));

-- name: RollbackMarkRunning :one
-- RollbackMarkRunning starts a pending request, or reopens a failed one.
UPDATE rollback_requests
SET status = 'running', error = NULL, finished_at = NULL, started_at = coalesce(started_at, now()), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: RollbackReopen :execrows
-- RollbackReopen sets a failed request back to running, for a retry of its
-- discarded batch job (a finished request's batches do nothing).
UPDATE rollback_requests
SET status = 'running', error = NULL, finished_at = NULL, updated_at = now()
WHERE id = @id AND status = 'failed';

-- name: RollbackLiveJob :one
-- RollbackLiveJob returns the newest job of rollback id's chain that is
-- still to run (or running, with include_running), other than
-- except_job_id: the job that started the request (job_id: its
-- manual_rollback job, or the first batch of a campaign's end) or any
-- manual_rollback or rollback_batch job naming it. No row: the request is
-- finished, or its chain is stranded.
--
-- A batch asks without include_running: River marks a job completed a
-- little after its transaction commits, so the batch before it may still
-- read running, though it will never enqueue anything again.
SELECT j.id, j.kind, j.state::text AS state
FROM river_job j
WHERE j.state IN ('available', 'pending', 'running', 'retryable', 'scheduled')
  AND (j.state <> 'running' OR @include_running::boolean)
  AND j.id <> @except_job_id::bigint
  AND (j.id = sqlc.narg('job_id')::bigint
       OR (j.kind IN ('rollback_batch', 'manual_rollback')
           AND j.args @> jsonb_build_object('rollback_id', @rollback_id::bigint)))
ORDER BY j.id DESC
LIMIT 1;

-- name: RollbackResumed :one
-- RollbackResumed records that the request's stranded chain was given a
-- new job, by whom, and with which key.
UPDATE rollback_requests
SET resumes = resumes + 1, resumed_at = now(), resumed_by = @resumed_by::text, resumed_key = sqlc.narg('resumed_key'),
    updated_at = now()
WHERE id = @id
RETURNING *;
