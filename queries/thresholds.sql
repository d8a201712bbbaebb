-- Low-stock thresholds (PUT /v1/skus/{sku}/threshold).

-- name: StockThresholdSet :one
-- StockThresholdSet sets (or, with a null threshold, clears) a pool's
-- low-stock threshold. It locks the stock row, so no change to the row is
-- in flight, and records the threshold as applying from the row's next
-- version on: a change already in the feed keeps the threshold it had.
WITH s AS (
    UPDATE stock t
    SET low_threshold = sqlc.narg('threshold')::bigint
    WHERE t.sku = @sku AND t.location = @location AND t.pool = @pool
    RETURNING t.sku, t.location, t.pool, t.version
)
INSERT INTO stock_thresholds (sku, location, pool, from_version, threshold, set_by)
SELECT s.sku, s.location, s.pool, s.version + 1, sqlc.narg('threshold')::bigint, @set_by::text FROM s
ON CONFLICT (sku, location, pool, from_version) DO UPDATE
SET threshold = excluded.threshold, set_by = excluded.set_by, set_at = now()
RETURNING stock_thresholds.sku, stock_thresholds.location, stock_thresholds.pool, stock_thresholds.threshold;
