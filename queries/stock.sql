-- name: StockGet :one
SELECT * FROM stock WHERE sku = @sku AND pool = @pool;

-- name: StockListBySKU :many
SELECT * FROM stock WHERE sku = @sku ORDER BY pool = 'main' DESC, pool COLLATE "C";

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
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND pool = @pool
RETURNING *;

-- name: StockAdjust :one
-- StockAdjust adds delta to total and available, creating the row on the
-- first positive delta; a negative delta takes only what is available.
INSERT INTO stock AS s (sku, pool, total, available, version, feed_xid)
SELECT @sku, @pool, @delta::bigint, @delta::bigint, 1, pg_current_xact_id()
WHERE @delta::bigint > 0
ON CONFLICT (sku, pool) DO UPDATE
SET total = s.total + excluded.total,
    available = s.available + excluded.available,
    version = s.version + 1,
    feed_xid = greatest(s.feed_xid, excluded.feed_xid),
    updated_at = now()
RETURNING *;

-- name: StockTake :one
-- StockTake removes quantity from total and available if available has it.
UPDATE stock
SET total = total - @quantity,
    available = available - @quantity,
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND pool = @pool AND available >= @quantity
RETURNING *;

-- name: StockSetStatus :one
UPDATE stock
SET status = @status,
    paused_reason = sqlc.narg('paused_reason'),
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
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

-- name: StockLockMany :batchmany
-- StockLockMany locks stock rows in (sku, pool) byte order, the one order
-- every path locks stock rows in whatever the database's collation, and
-- returns what a hold batch decides its grants on.
SELECT s.sku, s.pool, s.available, s.status, s.paused_reason
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool) k
  ON k.sku = s.sku AND k.pool = s.pool
ORDER BY s.sku COLLATE "C", s.pool COLLATE "C"
FOR NO KEY UPDATE OF s;

-- name: StockHoldsApply :batchexec
-- StockHoldsApply writes the grants of a hold batch whose stock rows
-- StockLockMany locked: each row's counters move by the sum of its granted
-- lines (row_* arrays), the lines are inserted (line_* arrays), and each
-- line gets a reserve ledger row carrying the version its stock row reached,
-- its counters after the change and its event feed position (feed_xid). The
-- UPDATE is conditional: a row moves only while it is on sale and has the
-- units granted, so the database re-checks every grant the batch decided,
-- and the statement fails with SQLSTATE SH001 (stockhold_check) when a row
-- did not move, rather than commit a grant it refused.
WITH wanted AS (
    SELECT unnest(@row_skus::text[]) AS sku, unnest(@row_pools::text[]) AS pool,
           unnest(@row_quantities::bigint[]) AS quantity
), moved AS (
    UPDATE stock s
    SET available = s.available - g.quantity,
        reserved = s.reserved + g.quantity,
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    FROM wanted g
    WHERE s.sku = g.sku AND s.pool = g.pool AND s.status = 'on_sale' AND s.available >= g.quantity
    RETURNING s.sku, s.pool, s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold
), granted AS (
    SELECT unnest(@line_ids::uuid[]) AS reservation_id, unnest(@line_skus::text[]) AS sku,
           unnest(@line_pools::text[]) AS pool, unnest(@line_quantities::bigint[]) AS quantity,
           unnest(@line_actors::text[]) AS actor, generate_series(1, cardinality(@line_ids::uuid[])) AS n
), lines AS (
    INSERT INTO reservation_lines (reservation_id, sku, pool, quantity)
    SELECT g.reservation_id, g.sku, g.pool, g.quantity FROM granted g ORDER BY g.n
), ledger AS (
    INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                        stock_version, reservation_id, actor,
                        feed_xid, total_after, available_after, reserved_after, sold_after)
    SELECT g.sku, g.pool, 'reserve', 0, -g.quantity, g.quantity, 0, m.version, g.reservation_id, g.actor,
           m.feed_xid, m.total, m.available, m.reserved, m.sold
    FROM granted g
    JOIN moved m ON m.sku = g.sku AND m.pool = g.pool
    ORDER BY g.n
)
SELECT stockhold_check(
    (SELECT 'stock rows not on sale or without the units granted: ' || string_agg(g.sku || '/' || g.pool, ', ')
     FROM wanted g WHERE NOT EXISTS (SELECT 1 FROM moved m WHERE m.sku = g.sku AND m.pool = g.pool)));

-- name: StockFree :many
-- StockFree returns which of the given stock rows no other transaction has
-- locked right now, without waiting (it locks them until the caller's
-- transaction ends). A batch that ran into its lock timeout asks it to tell
-- the rows someone else holds from the rest.
SELECT s.sku, s.pool
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool) k
  ON k.sku = s.sku AND k.pool = s.pool
ORDER BY s.sku COLLATE "C", s.pool COLLATE "C"
FOR NO KEY UPDATE OF s SKIP LOCKED;

-- name: StockRowsOfReservations :many
-- StockRowsOfReservations lists the stock rows the lines of reservations
-- ids draw on.
SELECT DISTINCT l.sku, l.pool FROM reservation_lines l
WHERE l.reservation_id = ANY(@ids::uuid[]);

-- name: StockExisting :many
-- StockExisting returns which of the given stock rows exist.
SELECT s.sku, s.pool
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool) k
  ON k.sku = s.sku AND k.pool = s.pool;
