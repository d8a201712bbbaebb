-- Holds beyond hold, confirm and release: listing them, extending one.
-- Extensions are rare next to holds, so they are plain transactions outside
-- the batches; they lock the hold first, as every change to a hold does.

-- name: ReservationsList :many
-- ReservationsList returns up to lim holds, newest first (ids are
-- time-ordered UUIDs, so id order is creation order), older than before_id
-- when it is given, filtered by whichever of client, order_ref, status and
-- sku are given (sku: any line of the hold).
SELECT r.* FROM reservations r
WHERE (sqlc.narg('before_id')::uuid IS NULL OR r.id < sqlc.narg('before_id')::uuid)
  AND (sqlc.narg('client')::text IS NULL OR r.client = sqlc.narg('client')::text)
  AND (sqlc.narg('order_ref')::text IS NULL OR r.order_ref = sqlc.narg('order_ref')::text)
  AND (sqlc.narg('status')::text IS NULL OR r.status = sqlc.narg('status')::text)
  AND (sqlc.narg('sku')::text IS NULL OR EXISTS (
        SELECT 1 FROM reservation_lines l WHERE l.reservation_id = r.id AND l.sku = sqlc.narg('sku')::text))
ORDER BY r.id DESC
LIMIT @lim;

-- name: ReservationExtendTerms :one
-- ReservationExtendTerms is what an extension of a hold the caller has
-- locked decides on: the database's clock, and the longest the hold may
-- last (its campaign's hold TTL, or the service's maximum).
SELECT now()::timestamptz AS now,
       coalesce(extract(epoch FROM c.hold_ttl)::bigint, @max_ttl_seconds::bigint)::bigint AS max_ttl_seconds
FROM reservations r
LEFT JOIN campaigns c ON c.id = r.campaign
WHERE r.id = @id;

-- name: ReservationExtend :one
-- ReservationExtend moves a held hold's expiry; the expiry loop picks holds
-- by expires_at, so this moves its expiry work too.
UPDATE reservations
SET expires_at = @expires_at, updated_at = now()
WHERE id = @id AND status = 'held'
RETURNING *;
