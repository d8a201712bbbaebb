-- name: StockGet :one
SELECT * FROM stock WHERE sku = @sku AND location = @location AND pool = @pool;

-- name: StockSKUExists :one
-- StockSKUExists says whether sku has any pool: a pool a request names
-- that does not exist is then unknown_pool rather than unknown_sku.
SELECT EXISTS (SELECT 1 FROM stock WHERE sku = @sku);

-- name: StockListBySKU :many
-- StockListBySKU is a SKU's stock view: every (location, pool) of it,
-- locations by priority then id, main first within each, without the
-- history of ended campaigns: a rolled-back campaign's pool that holds
-- nothing but the units it sold (shown on the campaign's page only; they
-- stay in its books) and has nothing in transit to it. A row with any
-- other state not zero is listed, so no stock is ever out of sight.
SELECT s.* FROM stock s
JOIN locations l ON l.id = s.location
WHERE s.sku = @sku
  AND NOT (s.pool <> 'main' AND s.total = s.sold AND s.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = s.pool AND c.status = 'rolled_back'))
ORDER BY l.priority, s.location COLLATE "C", s.pool = 'main' DESC, s.pool COLLATE "C";

-- name: StockReserve :one
-- StockReserve takes quantity from available into reserved, only while the
-- row is on sale and has the stock: zero rows means the hold must fail (the
-- bare SQL the bench compares holds with).
UPDATE stock
SET available = available - @quantity,
    reserved = reserved + @quantity,
    version = version + 1,
    updated_at = now()
WHERE sku = @sku AND location = @location AND pool = @pool AND status = 'on_sale' AND available >= @quantity
RETURNING version;

-- name: StockMove :one
-- StockMove applies deltas to a row's counters (short, the held units a
-- count found missing, among them); the CHECK constraints refuse any
-- result that would go negative or unbalance the row. A serialized row
-- (units with an identity) does not move: it changes only through its
-- units.
UPDATE stock
SET total = total + @delta_total,
    available = available + @delta_available,
    reserved = reserved + @delta_reserved,
    sold = sold + @delta_sold,
    quality_control = quality_control + @delta_quality_control,
    damaged = damaged + @delta_damaged,
    safety_stock = safety_stock + @delta_safety_stock,
    incoming = incoming + @delta_incoming,
    short = short + @delta_short,
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND location = @location AND pool = @pool AND NOT serialized
RETURNING *;

-- name: StockAdjust :one
-- StockAdjust adds delta to total and available, creating the row on the
-- first positive delta; a negative delta takes only what is available. A
-- serialized row does not move (no row returned).
INSERT INTO stock AS s (sku, location, pool, total, available, version, feed_xid)
SELECT @sku, @location, @pool, @delta::bigint, @delta::bigint, 1, pg_current_xact_id()
WHERE @delta::bigint > 0
ON CONFLICT (sku, location, pool) DO UPDATE
SET total = s.total + excluded.total,
    available = s.available + excluded.available,
    version = s.version + 1,
    feed_xid = greatest(s.feed_xid, excluded.feed_xid),
    updated_at = now()
WHERE NOT s.serialized
RETURNING *;

-- name: StockTake :one
-- StockTake removes quantity from total and available if available has it
-- and the row is not serialized.
UPDATE stock
SET total = total - @quantity,
    available = available - @quantity,
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND location = @location AND pool = @pool AND available >= @quantity AND NOT serialized
RETURNING *;

-- name: StockSetStatus :one
UPDATE stock
SET status = @status,
    paused_reason = sqlc.narg('paused_reason'),
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND location = @location AND pool = @pool
RETURNING *;

-- name: StockCreate :one
INSERT INTO stock (sku, location, pool) VALUES (@sku, @location, @pool)
ON CONFLICT (sku, location, pool) DO NOTHING
RETURNING *;

-- name: StockLock :one
-- StockLock locks one stock row for the rest of the transaction.
SELECT * FROM stock WHERE sku = @sku AND location = @location AND pool = @pool FOR UPDATE;

-- name: StockLockMany :batchmany
-- StockLockMany locks the stock rows a hold batch may draw on, in (sku,
-- location, pool) byte order, the one order every path locks stock rows in
-- whatever the database's collation, and returns what the batch decides
-- its grants on, with each row's location as the batch reads it (its
-- priority, whether it takes holds, its own stop-sale, where it is), and short: what a
-- change joining the batch hands back pays it first (batch_joined.go). A key
-- whose location is empty asks for the (sku, pool) at every location: a
-- line the batch allocates. Each row carries its (sku, pool)'s limits
-- (sku_limits; null where none is set), read under the lock. A row
-- whose pool has a backorder policy carries what it has promised
-- (backordered), its policy, and, with a horizon, what is on its way
-- within it (stock_incoming_soon: each delivery's expected day, null for
-- a transfer in transit, and units, by day); the CASE reads nothing for
-- any other row.
SELECT s.sku, s.location, s.pool, s.available, s.status, s.paused_reason, s.serialized,
       l.priority, l.active, l.stop_sale_reason, s.short, l.latitude, l.longitude,
       sl.max_per_order, sl.min_per_order, sl.step, sl.max_per_customer, sl.customer_window_seconds,
       s.backordered, s.backorder_limit, s.backorder_horizon_days,
       (CASE WHEN s.backorder_horizon_days IS NOT NULL THEN ARRAY(
            SELECT x.expected_on FROM stock_incoming_soon(s.sku, s.location, s.pool, s.backorder_horizon_days) x
            ORDER BY x.expected_on NULLS FIRST, x.quantity) END)::date[] AS soon_on,
       (CASE WHEN s.backorder_horizon_days IS NOT NULL THEN ARRAY(
            SELECT x.quantity FROM stock_incoming_soon(s.sku, s.location, s.pool, s.backorder_horizon_days) x
            ORDER BY x.expected_on NULLS FIRST, x.quantity) END)::bigint[] AS soon_units
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool, unnest(@locations::text[]) AS location) k
  ON k.sku = s.sku AND k.pool = s.pool AND (k.location = '' OR k.location = s.location)
JOIN locations l ON l.id = s.location
LEFT JOIN sku_limits sl ON sl.sku = s.sku AND sl.pool = s.pool
ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C"
FOR NO KEY UPDATE OF s;

-- name: StockRowsRead :many
-- StockRowsRead is StockLockMany without the lock, and with the switch
-- for everything and the clients whose sales are stopped, and whether the
-- pool may promise beyond its stock (a backorder policy): what an instance
-- reads again to know whether a hold it answers sold out from memory would
-- still be refused, and for whom a batch would answer stop_sale first
-- (soldout.go).
SELECT s.sku, s.location, s.pool, s.available, s.status, s.paused_reason,
       l.priority, l.active, l.stop_sale_reason,
       EXISTS (SELECT FROM sku_limits sl WHERE sl.sku = s.sku AND sl.pool = s.pool) AS limited,
       (s.backorder_limit > 0 OR s.backorder_horizon_days IS NOT NULL)::boolean AS promising,
       (SELECT x.active FROM stop_sale x WHERE x.id)::boolean AS stop_sale,
       (SELECT coalesce(array_agg(c.client), '{}') FROM stop_sale_clients c WHERE c.active)::text[] AS stopped_clients
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool, unnest(@locations::text[]) AS location) k
  ON k.sku = s.sku AND k.pool = s.pool AND (k.location = '' OR k.location = s.location)
JOIN locations l ON l.id = s.location;

-- name: StockHoldsApply :batchexec
-- StockHoldsApply writes the grants of a hold batch whose stock rows
-- StockLockMany locked: each row's counters move by the sum of its granted
-- lines (row_* arrays: the units taken from available, and those promised
-- beyond it, backordered, which the CHECK stock_backordered bounds by the
-- row's policy), the lines are inserted (line_* arrays: one per
-- location a hold line was allocated to), and each line gets a reserve
-- ledger row carrying the version its stock row reached, its counters
-- after the change and its event feed position (feed_xid). Units with an
-- identity granted (unit_* arrays) become held by their holds, and are
-- named by their lines (units) and the lines' ledger rows. A line held for
-- a bundle line records it (line_bundle_* arrays, empty in a batch
-- without one).
-- The UPDATEs are conditional: a row moves only while it is on sale and
-- has the units granted, a unit only while it is available in the line's
-- pool, so the database re-checks every grant the batch decided, and the
-- statement fails with SQLSTATE SH001 (stockhold_check) when a row or a
-- unit did not move, rather than commit a grant it refused.
WITH wanted AS (
    SELECT unnest(@row_skus::text[]) AS sku, unnest(@row_locations::text[]) AS location,
           unnest(@row_pools::text[]) AS pool, unnest(@row_quantities::bigint[]) AS quantity,
           unnest(@row_backordered::bigint[]) AS backordered
), moved AS (
    UPDATE stock s
    SET available = s.available - g.quantity,
        reserved = s.reserved + g.quantity,
        backordered = s.backordered + coalesce(g.backordered, 0),
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    FROM wanted g
    WHERE s.sku = g.sku AND s.location = g.location AND s.pool = g.pool AND s.status = 'on_sale' AND s.available >= g.quantity
    RETURNING s.sku, s.location, s.pool, s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold,
              s.quality_control, s.damaged, s.safety_stock, s.incoming
), granted AS (
    SELECT unnest(@line_ids::uuid[]) AS reservation_id, unnest(@line_skus::text[]) AS sku,
           unnest(@line_locations::text[]) AS location,
           unnest(@line_pools::text[]) AS pool, unnest(@line_quantities::bigint[]) AS quantity,
           unnest(@line_actors::text[]) AS actor, nullif(unnest(@line_actor_keys::text[]), '') AS actor_key,
           unnest(@line_backordered::bigint[]) AS backordered, nullif(unnest(@line_expected_on::text[]), '')::date AS expected_on,
           -- A batch without bundle lines sends these empty: null for every line.
           nullif(unnest(@line_bundle_skus::text[]), '') AS bundle_sku, nullif(unnest(@line_bundle_quantities::bigint[]), 0) AS bundle_quantity,
           nullif(unnest(@line_bundle_versions::bigint[]), 0) AS bundle_version,
           generate_series(1, cardinality(@line_ids::uuid[])) AS n
), unit_grants AS (
    SELECT unnest(@unit_reservation_ids::uuid[]) AS reservation_id, unnest(@unit_skus::text[]) AS sku,
           unnest(@unit_locations::text[]) AS location,
           unnest(@unit_pools::text[]) AS pool, unnest(@unit_ids::text[]) AS unit_id
), took AS (
    UPDATE units u
    SET status = 'held', reservation_id = g.reservation_id, updated_at = now()
    FROM unit_grants g
    WHERE u.sku = g.sku AND u.id = g.unit_id AND u.location = g.location AND u.pool = g.pool AND u.status = 'available'
    RETURNING u.sku, u.id
), line_units AS MATERIALIZED (
    -- Once (inlined, it was grouped again for each line granted).
    SELECT g.reservation_id, g.sku, g.location, g.pool, array_agg(g.unit_id ORDER BY g.unit_id COLLATE "C") AS units
    FROM unit_grants g
    GROUP BY g.reservation_id, g.sku, g.location, g.pool
), lines AS (
    INSERT INTO reservation_lines (reservation_id, sku, location, pool, quantity, units, backordered, bundle_sku, bundle_quantity, bundle_version)
    SELECT g.reservation_id, g.sku, g.location, g.pool, g.quantity, coalesce(lu.units, '{}'), coalesce(g.backordered, 0),
           g.bundle_sku, g.bundle_quantity, g.bundle_version
    FROM granted g
    LEFT JOIN line_units lu ON lu.reservation_id = g.reservation_id AND lu.sku = g.sku
                           AND lu.location = g.location AND lu.pool = g.pool
    ORDER BY g.n
), ledger AS (
    INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                        stock_version, reservation_id, actor, actor_key, units,
                        feed_xid, total_after, available_after, reserved_after, sold_after,
                        quality_control_after, damaged_after, safety_stock_after, incoming_after,
                        delta_backordered, expected_on)
    SELECT g.sku, g.location, g.pool, 'reserve', 0, coalesce(g.backordered, 0) - g.quantity, g.quantity - coalesce(g.backordered, 0), 0,
           m.version, g.reservation_id, g.actor, g.actor_key, lu.units,
           m.feed_xid, m.total, m.available, m.reserved, m.sold, m.quality_control, m.damaged, m.safety_stock, m.incoming,
           coalesce(g.backordered, 0), g.expected_on
    FROM granted g
    JOIN moved m ON m.sku = g.sku AND m.location = g.location AND m.pool = g.pool
    LEFT JOIN line_units lu ON lu.reservation_id = g.reservation_id AND lu.sku = g.sku
                           AND lu.location = g.location AND lu.pool = g.pool
    ORDER BY g.n
)
SELECT stockhold_check(concat_ws('; ',
    (SELECT 'stock rows not on sale or without the units granted: ' || string_agg(g.sku || '/' || g.location || '/' || g.pool, ', ')
     FROM wanted g WHERE NOT EXISTS (
         SELECT 1 FROM moved m WHERE m.sku = g.sku AND m.location = g.location AND m.pool = g.pool)),
    (SELECT 'units not available: ' || string_agg(g.sku || '/' || g.unit_id, ', ')
     FROM unit_grants g WHERE NOT EXISTS (SELECT 1 FROM took t WHERE t.sku = g.sku AND t.id = g.unit_id))));

-- name: StockFree :many
-- StockFree returns which of the given stock rows (an empty location: the
-- (sku, pool) at every location) no other transaction has locked right
-- now, without waiting (it locks them until the caller's transaction
-- ends). A batch that ran into its lock timeout asks it to tell the rows
-- someone else holds from the rest.
SELECT s.sku, s.location, s.pool
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool, unnest(@locations::text[]) AS location) k
  ON k.sku = s.sku AND k.pool = s.pool AND (k.location = '' OR k.location = s.location)
ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C"
FOR NO KEY UPDATE OF s SKIP LOCKED;

-- name: StockRowsOfReservations :many
-- StockRowsOfReservations lists the stock rows the lines of reservations
-- ids draw on.
SELECT DISTINCT l.sku, l.location, l.pool FROM reservation_lines l
WHERE l.reservation_id = ANY(@ids::uuid[]);

-- name: StockExisting :many
-- StockExisting returns which of the given stock rows exist (an empty
-- location: the (sku, pool) at every location).
SELECT s.sku, s.location, s.pool
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool, unnest(@locations::text[]) AS location) k
  ON k.sku = s.sku AND k.pool = s.pool AND (k.location = '' OR k.location = s.location);


-- name: StockScan :many
-- StockScan returns up to lim stock rows after SKU after ("" for the
-- first), in the primary key's order (SKU in the database's collation,
-- then location and pool): an index scan that stops at lim rows, however
-- large the catalogue; a catalogue page reads the key a stretch at a time.
-- Ended campaigns' pools are left out, as in StockListBySKU.
SELECT * FROM stock
WHERE sku > @after
  AND NOT (stock.pool <> 'main' AND stock.total = stock.sold AND stock.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = stock.pool AND c.status = 'rolled_back'))
ORDER BY sku, location, pool LIMIT @lim;

-- name: StockBatch :many
-- StockBatch returns every row (location and pool) of the given SKUs, in
-- the primary key's order (ended campaigns' pools left out, as in
-- StockListBySKU).
SELECT * FROM stock
WHERE sku = ANY(@skus::text[])
  AND NOT (stock.pool <> 'main' AND stock.total = stock.sold AND stock.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = stock.pool AND c.status = 'rolled_back'))
ORDER BY sku, location, pool;

-- name: StockPoolSerializedAt :one
-- StockPoolSerializedAt says where a SKU's pool holds units with an
-- identity, if it does: such a pool lives at one location, and no other
-- location may have a row of it. No row: it is not serialized anywhere.
SELECT location FROM stock WHERE sku = @sku AND pool = @pool AND serialized LIMIT 1;

-- name: StockSerializedOf :many
-- StockSerializedOf lists where the given SKUs' pools hold units with an
-- identity (each such pool lives at one location).
SELECT sku, location, pool FROM stock WHERE sku = ANY(@skus::text[]) AND serialized;
