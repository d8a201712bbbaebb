-- name: SkuBackordersSet :one
-- SkuBackordersSet sets the backorder policy of a SKU's pool.
INSERT INTO sku_backorders (sku, pool, below_zero, horizon_days, set_by)
VALUES (@sku, @pool, @below_zero, sqlc.narg('horizon_days')::integer, @set_by)
ON CONFLICT (sku, pool) DO UPDATE
SET below_zero = excluded.below_zero, horizon_days = excluded.horizon_days, set_by = excluded.set_by, set_at = now()
RETURNING *;

-- name: SkuBackordersGet :one
SELECT * FROM sku_backorders WHERE sku = @sku AND pool = @pool;

-- name: SkuBackordersDelete :exec
DELETE FROM sku_backorders WHERE sku = @sku AND pool = @pool;

-- name: StockBackorderRowsLock :many
-- StockBackorderRowsLock locks the stock rows of a SKU's pool at every
-- location, in (sku, location, pool) byte order, and returns what each
-- has promised beyond its stock (backordered) next to what a policy of
-- horizon days (null: none) would let it promise of what is on its way.
SELECT s.location, s.backordered, s.incoming,
       CASE WHEN sqlc.narg('horizon_days')::integer IS NULL THEN 0
            ELSE (SELECT coalesce(sum(x.quantity), 0) FROM stock_incoming_soon(s.sku, s.location, s.pool, sqlc.narg('horizon_days')::integer) x)
       END::bigint AS incoming_soon
FROM stock s
WHERE s.sku = @sku AND s.pool = @pool
ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C"
FOR NO KEY UPDATE OF s;

-- name: StockBackorderRowsRead :many
-- StockBackorderRowsRead is StockBackorderRowsLock without the lock: what
-- a read of the policy shows.
SELECT s.location, s.backordered, s.incoming,
       CASE WHEN sqlc.narg('horizon_days')::integer IS NULL THEN 0
            ELSE (SELECT coalesce(sum(x.quantity), 0) FROM stock_incoming_soon(s.sku, s.location, s.pool, sqlc.narg('horizon_days')::integer) x)
       END::bigint AS incoming_soon
FROM stock s
WHERE s.sku = @sku AND s.pool = @pool
ORDER BY s.location COLLATE "C";

-- name: StockBackorderPolicySet :exec
-- StockBackorderPolicySet keeps a pool's policy on each of its stock rows
-- (StockBackorderRowsLock locked them), where the CHECK stock_backordered
-- reads it.
UPDATE stock
SET backorder_limit = @below_zero, backorder_horizon_days = sqlc.narg('horizon_days')::integer, updated_at = now()
WHERE sku = @sku AND pool = @pool;

-- name: BackorderHoldsLock :many
-- BackorderHoldsLock locks the held and confirmed holds with units
-- promised at a stock row that no other transaction has locked, in id
-- order (the order every path locks holds in), skipping the rest: a
-- receipt holds the row's lock, and a change of one of those holds
-- locks the hold before the row (ReservationsChange), so waiting would
-- deadlock. A hold skipped is being changed: released, its promise goes;
-- confirmed, the next receipt fills it.
SELECT r.id FROM reservations r
WHERE r.id IN (SELECT l.reservation_id FROM reservation_lines l
               WHERE l.sku = @sku AND l.location = @location AND l.pool = @pool AND l.backordered > 0)
  AND r.status IN ('held', 'confirmed')
ORDER BY r.id
FOR UPDATE SKIP LOCKED;

-- name: BackordersFill :many
-- BackordersFill fills, from what a receipt just made available at a
-- stock row (at most units, at most what is available), the promised
-- units of the holds ids (BackorderHoldsLock locked them): confirmed holds
-- first, then held ones, each oldest first. Each hold filled gets a
-- ledger row of kind backorder_fill (available into reserved, or into
-- sold for a confirmed hold, backordered down); the line's backordered
-- comes down by as many. It answers each hold filled with its units.
WITH cand AS (
    SELECT l.reservation_id, l.backordered, r.status,
           sum(l.backordered) OVER (ORDER BY (r.status = 'confirmed') DESC, coalesce(r.confirmed_at, r.created_at), r.created_at, r.id) AS upto
    FROM reservation_lines l
    JOIN reservations r ON r.id = l.reservation_id
    WHERE l.sku = @sku AND l.location = @location AND l.pool = @pool AND l.backordered > 0
      AND r.id = ANY(@ids::uuid[]) AND r.status IN ('held', 'confirmed')
), budget AS (
    SELECT least(@units::bigint, s.available, s.backordered) AS n FROM stock s
    WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool
), fill AS (
    SELECT c.reservation_id, c.status, least(c.backordered, b.n - (c.upto - c.backordered)) AS n, c.upto
    FROM cand c, budget b
    WHERE c.upto - c.backordered < b.n
), filled_lines AS (
    UPDATE reservation_lines l
    SET backordered = l.backordered - f.n
    FROM fill f
    WHERE l.reservation_id = f.reservation_id AND l.sku = @sku AND l.location = @location AND l.pool = @pool
    RETURNING l.reservation_id
), sums AS (
    SELECT coalesce(sum(f.n), 0)::bigint AS n,
           coalesce(sum(f.n) FILTER (WHERE f.status = 'held'), 0)::bigint AS held,
           coalesce(sum(f.n) FILTER (WHERE f.status = 'confirmed'), 0)::bigint AS confirmed
    FROM fill f
), moved AS (
    UPDATE stock s
    SET available = s.available - m.n, reserved = s.reserved + m.held, sold = s.sold + m.confirmed,
        backordered = s.backordered - m.n,
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    FROM sums m
    WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool AND m.n > 0
    RETURNING s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold,
              s.quality_control, s.damaged, s.safety_stock, s.incoming
), ledger AS (
    INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, delta_backordered,
                        stock_version, reservation_id, actor, actor_key, reason, ref,
                        feed_xid, total_after, available_after, reserved_after, sold_after,
                        quality_control_after, damaged_after, safety_stock_after, incoming_after)
    SELECT @sku, @location, @pool, 'backorder_fill', 0, -f.n,
           CASE WHEN f.status = 'held' THEN f.n ELSE 0 END, CASE WHEN f.status = 'confirmed' THEN f.n ELSE 0 END, -f.n,
           m.version, f.reservation_id, @actor, sqlc.narg('actor_key'), 'promised units filled by a receipt', @ref,
           m.feed_xid, m.total, m.available, m.reserved, m.sold, m.quality_control, m.damaged, m.safety_stock, m.incoming
    FROM fill f, moved m
    ORDER BY f.upto
)
SELECT f.reservation_id, f.n::bigint AS units
FROM fill f
ORDER BY f.upto;
