-- name: ReservationInsert :one
-- ReservationInsert returns no row when the caller already used this
-- idempotency key; a concurrent twin waits here until the first commits.
INSERT INTO reservations (id, client, idempotency_key, request_hash, order_ref, campaign, expires_at)
VALUES (@id, @client, @idempotency_key, @request_hash, sqlc.narg('order_ref'), sqlc.narg('campaign'),
        now() + interval '1 second' * @ttl_seconds::bigint)
ON CONFLICT (client, idempotency_key) DO NOTHING
RETURNING *;

-- name: ReservationInsertMany :many
-- ReservationInsertMany is ReservationInsert for a coalesced batch; the ids
-- it does not return lost to an earlier use of their idempotency key.
INSERT INTO reservations (id, client, idempotency_key, request_hash, order_ref, campaign, expires_at)
SELECT unnest(@ids::uuid[]), unnest(@clients::text[]), unnest(@idempotency_keys::text[]),
       unnest(@request_hashes::text[]), nullif(unnest(@order_refs::text[]), ''),
       nullif(unnest(@campaigns::text[]), ''), now() + interval '1 second' * unnest(@ttl_seconds::bigint[])
ON CONFLICT (client, idempotency_key) DO NOTHING
RETURNING *;

-- name: ReservationsDelete :exec
-- ReservationsDelete removes rows a failing batch inserted in its own
-- transaction; committed reservations are never deleted.
DELETE FROM reservations WHERE id = ANY(@ids::uuid[]);

-- name: ReservationGet :one
SELECT * FROM reservations WHERE id = @id;

-- name: ReservationGetByKey :one
SELECT * FROM reservations WHERE client = @client AND idempotency_key = @idempotency_key;

-- name: ReservationLock :one
SELECT * FROM reservations WHERE id = @id FOR UPDATE;

-- name: ReservationsLockHeld :many
-- ReservationsLockHeld locks the held ones among ids, in id order so that
-- two releases of overlapping sets cannot deadlock.
SELECT id FROM reservations
WHERE id = ANY(@ids::uuid[]) AND status = 'held'
ORDER BY id
FOR UPDATE;

-- name: ReservationConfirm :one
-- ReservationConfirm sells a hold that is held and not past its expiry; no
-- row means it is not (any more).
UPDATE reservations
SET status = 'confirmed', confirmed_at = now(), updated_at = now()
WHERE id = @id AND status = 'held' AND expires_at > now()
RETURNING *;

-- name: ReservationExpiry :one
-- ReservationExpiry locks a reservation and says how many seconds it has
-- left before it expires (zero or less: it is due).
SELECT status, extract(epoch FROM expires_at - now())::float8 AS remaining_seconds
FROM reservations
WHERE id = @id
FOR UPDATE;

-- name: ReservationsRelease :many
-- ReservationsRelease ends the held ones among ids as released or expired;
-- a reservation that is no longer held is left alone, so no path can hand
-- its stock back twice.
UPDATE reservations
SET status = @status, released_at = now(), updated_at = now(),
    release_reason = sqlc.narg('reason'), released_by = @actor
WHERE id = ANY(@ids::uuid[]) AND status = 'held'
RETURNING id;

-- name: ReservationsExpiredHeld :many
-- ReservationsExpiredHeld picks up to lim held reservations that expired
-- more than grace_seconds ago, skipping rows another transaction is working on.
SELECT id FROM reservations
WHERE status = 'held' AND expires_at < now() - interval '1 second' * @grace_seconds::float8
ORDER BY id
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: ReservationLinesInsert :exec
INSERT INTO reservation_lines (reservation_id, sku, pool, quantity)
SELECT unnest(@reservation_ids::uuid[]), unnest(@skus::text[]), unnest(@pools::text[]), unnest(@quantities::bigint[]);

-- name: ReservationLinesGet :many
SELECT * FROM reservation_lines WHERE reservation_id = ANY(@reservation_ids::uuid[]) ORDER BY reservation_id, sku, pool;

-- name: ReservationLinesSummed :many
-- ReservationLinesSummed totals the lines of reservations per stock row, in
-- the order rows must be locked.
SELECT sku, pool, sum(quantity)::bigint AS quantity
FROM reservation_lines
WHERE reservation_id = ANY(@reservation_ids::uuid[])
GROUP BY sku, pool
ORDER BY sku, pool;
