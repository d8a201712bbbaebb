-- name: SkuLimitsSet :one
-- SkuLimitsSet sets every limit of a SKU's pool at once (null: none).
INSERT INTO sku_limits (sku, pool, max_per_order, min_per_order, step, max_per_customer, customer_window_seconds, set_by)
VALUES (@sku, @pool, sqlc.narg('max_per_order')::bigint, sqlc.narg('min_per_order')::bigint, sqlc.narg('step')::bigint,
        sqlc.narg('max_per_customer')::bigint, sqlc.narg('customer_window_seconds')::bigint, @set_by)
ON CONFLICT (sku, pool) DO UPDATE
SET max_per_order = excluded.max_per_order, min_per_order = excluded.min_per_order, step = excluded.step,
    max_per_customer = excluded.max_per_customer, customer_window_seconds = excluded.customer_window_seconds,
    set_by = excluded.set_by, set_at = now()
RETURNING *;

-- name: SkuLimitsGet :one
SELECT * FROM sku_limits WHERE sku = @sku AND pool = @pool;

-- name: SkuLimitsOfSKU :many
-- SkuLimitsOfSKU returns the limits of each of a SKU's pools that has any.
SELECT * FROM sku_limits WHERE sku = @sku ORDER BY pool COLLATE "C";

-- name: SkuLimitsDelete :execrows
DELETE FROM sku_limits WHERE sku = @sku AND pool = @pool;

-- name: SkuLimitsPoolExists :one
-- SkuLimitsPoolExists reports whether the SKU has a stock row in the pool
-- at some location: limits are set only on a pool that exists.
SELECT EXISTS (SELECT FROM stock WHERE sku = @sku AND pool = @pool)::boolean;

-- name: CustomerUnitsHeld :batchmany
-- CustomerUnitsHeld counts, per (customer, sku, pool) asked, the units
-- the customer's holds hold or bought of the pool (every location), made
-- in the window of the pool's max_per_customer: its own limit's
-- (sku_limits), else the one given (a campaign's; -1: none), a window of
-- null counting every hold. A hold batch sends it after StockLockMany, so
-- it reads, under the lock of every stock row of those pools, what the
-- batches before it committed (each customer's hold locks them all).
SELECT k.customer::text AS customer, k.sku::text AS sku, k.pool::text AS pool,
       coalesce((SELECT sum(rl.quantity)
                 FROM reservations r
                 JOIN reservation_lines rl ON rl.reservation_id = r.id AND rl.sku = k.sku AND rl.pool = k.pool
                 WHERE r.customer_ref = k.customer AND r.status IN ('held', 'confirmed')
                   AND (w.seconds IS NULL OR r.created_at > now() - interval '1 second' * w.seconds)), 0)::bigint AS units
FROM (SELECT unnest(@customers::text[]) AS customer, unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool,
             unnest(@window_seconds::bigint[]) AS window_seconds) k
CROSS JOIN LATERAL (
    SELECT CASE WHEN sl.max_per_customer IS NOT NULL THEN sl.customer_window_seconds
                ELSE nullif(k.window_seconds, -1) END AS seconds
    FROM (SELECT) one
    LEFT JOIN sku_limits sl ON sl.sku = k.sku AND sl.pool = k.pool) w;
