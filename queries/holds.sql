-- Holds beyond hold, confirm and release: listing them, extending one,
-- releasing some of its units. These are rare next to holds, so they are
-- plain transactions outside the batches; they lock in the same order
-- (the hold, then its stock rows in (sku, pool) byte order).

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

-- name: ReservationLockForChange :one
-- ReservationLockForChange locks one hold for an extension or a partial
-- release and returns what they decide on: whether it is past its expiry,
-- the database's clock, and the longest a hold may last (its campaign's
-- hold TTL, or the service's maximum).
SELECT sqlc.embed(r), (r.expires_at <= now())::boolean AS due, now()::timestamptz AS now,
       coalesce(extract(epoch FROM c.hold_ttl)::bigint, @max_ttl_seconds::bigint)::bigint AS max_ttl_seconds
FROM reservations r
LEFT JOIN campaigns c ON c.id = r.campaign
WHERE r.id = @id
FOR UPDATE OF r;

-- name: ReservationExtend :one
-- ReservationExtend moves a held hold's expiry; the expiry loop picks holds
-- by expires_at, so this moves its expiry work too.
UPDATE reservations
SET expires_at = @expires_at, updated_at = now()
WHERE id = @id AND status = 'held'
RETURNING *;

-- name: ReservationLinesRelease :many
-- ReservationLinesRelease hands back some units of a held hold whose row
-- the caller has locked: the given lines shrink (a line released whole is
-- deleted), their stock rows are locked in (sku, pool) byte order and move
-- the units from reserved to available, and each gets a release_partial
-- ledger row with the version, counters and feed position it produced. The
-- caller checked that every quantity is at most its line's. It returns the
-- ledger ids.
WITH give AS (
    SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool, unnest(@quantities::bigint[]) AS quantity
), locked AS MATERIALIZED (
    SELECT s.sku, s.pool FROM stock s
    JOIN give g ON g.sku = s.sku AND g.pool = s.pool
    ORDER BY s.sku COLLATE "C", s.pool COLLATE "C"
    FOR NO KEY UPDATE OF s
), moved AS (
    UPDATE stock s
    SET available = s.available + g.quantity,
        reserved = s.reserved - g.quantity,
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    FROM give g
    JOIN locked k ON k.sku = g.sku AND k.pool = g.pool
    WHERE s.sku = g.sku AND s.pool = g.pool
    RETURNING s.sku, s.pool, s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold
), shrunk AS (
    UPDATE reservation_lines l
    SET quantity = l.quantity - g.quantity
    FROM give g
    WHERE l.reservation_id = @id::uuid AND l.sku = g.sku AND l.pool = g.pool AND l.quantity > g.quantity
    RETURNING l.sku
), dropped AS (
    DELETE FROM reservation_lines l
    USING give g
    WHERE l.reservation_id = @id::uuid AND l.sku = g.sku AND l.pool = g.pool AND l.quantity = g.quantity
    RETURNING l.sku
), touched AS (
    UPDATE reservations SET updated_at = now() WHERE id = @id::uuid AND status = 'held'
)
INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    stock_version, reservation_id, actor, reason,
                    feed_xid, total_after, available_after, reserved_after, sold_after)
SELECT g.sku, g.pool, 'release_partial', 0, g.quantity, -g.quantity, 0, m.version, @id::uuid, @actor::text,
       sqlc.narg('reason')::text, m.feed_xid, m.total, m.available, m.reserved, m.sold
FROM give g
JOIN moved m ON m.sku = g.sku AND m.pool = g.pool
ORDER BY g.sku COLLATE "C", g.pool COLLATE "C"
RETURNING id;
