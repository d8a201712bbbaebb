-- name: StockGet :one
SELECT * FROM stock WHERE sku = @sku AND pool = @pool;

-- name: StockListBySKU :many
SELECT * FROM stock WHERE sku = @sku ORDER BY pool = 'main' DESC, pool;

-- name: StockReserve :one
-- StockReserve takes quantity from available into reserved, only while the
-- row is on sale and has the stock: zero rows means the hold must fail.
UPDATE stock
SET available = available - @quantity,
    reserved = reserved + @quantity,
    version = version + 1,
    updated_at = now()
WHERE sku = @sku AND pool = @pool AND status = 'on_sale' AND available >= @quantity
RETURNING version;

-- name: StockMove :one
-- StockMove applies deltas to a row's counters; the CHECK constraints refuse
-- any result that would go negative or unbalance the row.
UPDATE stock
SET total = total + @delta_total,
    available = available + @delta_available,
    reserved = reserved + @delta_reserved,
    sold = sold + @delta_sold,
    version = version + 1,
    updated_at = now()
WHERE sku = @sku AND pool = @pool
RETURNING *;

-- name: StockAdjust :one
-- StockAdjust adds delta to total and available, creating the row on the
-- first positive delta; a negative delta takes only what is available.
INSERT INTO stock AS s (sku, pool, total, available, version)
SELECT @sku, @pool, @delta::bigint, @delta::bigint, 1
WHERE @delta::bigint > 0
ON CONFLICT (sku, pool) DO UPDATE
SET total = s.total + excluded.total,
    available = s.available + excluded.available,
    version = s.version + 1,
    updated_at = now()
RETURNING *;

-- name: StockTake :one
-- StockTake removes quantity from total and available if available has it.
UPDATE stock
SET total = total - @quantity,
    available = available - @quantity,
    version = version + 1,
    updated_at = now()
WHERE sku = @sku AND pool = @pool AND available >= @quantity
RETURNING *;

-- name: StockSetStatus :one
UPDATE stock
SET status = @status,
    paused_reason = sqlc.narg('paused_reason'),
    version = version + 1,
    updated_at = now()
WHERE sku = @sku AND pool = @pool
RETURNING *;

-- name: StockCreate :one
INSERT INTO stock (sku, pool) VALUES (@sku, @pool)
ON CONFLICT (sku, pool) DO NOTHING
RETURNING *;

-- name: StockLock :one
-- StockLock locks one stock row for the rest of the transaction; the hold
-- combiner grants a whole batch against what it reads.
SELECT * FROM stock WHERE sku = @sku AND pool = @pool FOR UPDATE;
