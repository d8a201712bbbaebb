-- Locations (POST/GET/PATCH /v1/locations): where stock is.

-- name: LocationCreate :one
-- LocationCreate adds a location; no row when the id is taken.
INSERT INTO locations (id, name, priority, active, latitude, longitude, pickup, created_by, created_key)
VALUES (@id, @name, @priority, @active, sqlc.narg('latitude'), sqlc.narg('longitude'), @pickup, @created_by, sqlc.narg('created_key'))
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: LocationGet :one
SELECT * FROM locations WHERE id = @id;

-- name: LocationsGet :many
-- LocationsGet returns the locations among ids that exist.
SELECT * FROM locations WHERE id = ANY(@ids::text[]) ORDER BY id COLLATE "C";

-- name: LocationsPage :many
-- LocationsPage lists up to lim locations after the id given (a keyset
-- page in id order, byte-wise).
SELECT * FROM locations
WHERE sqlc.narg('after')::text IS NULL OR id COLLATE "C" > sqlc.narg('after')::text COLLATE "C"
ORDER BY id COLLATE "C"
LIMIT @lim;

-- name: LocationTotals :many
-- LocationTotals sums the stock of each location among ids, every state,
-- over every SKU and pool there. It reads every stock row of those
-- locations (a scan of the stock table): a page of locations, not the hot
-- path.
SELECT s.location,
       count(*)::bigint                   AS rows,
       sum(s.total)::bigint               AS total,
       sum(s.available)::bigint           AS available,
       sum(s.reserved)::bigint            AS reserved,
       sum(s.sold)::bigint                AS sold,
       sum(s.quality_control)::bigint     AS quality_control,
       sum(s.damaged)::bigint             AS damaged,
       sum(s.safety_stock)::bigint        AS safety_stock,
       sum(s.incoming)::bigint            AS incoming,
       sum(s.short)::bigint               AS short
FROM stock s
WHERE s.location = ANY(@ids::text[])
GROUP BY s.location;

-- name: LocationUpdate :one
-- LocationUpdate changes whichever of name, priority, active, pickup and
-- the coordinates are given (set_coordinates: latitude and longitude, null
-- to forget them).
UPDATE locations
SET name = coalesce(sqlc.narg('name')::text, name),
    priority = coalesce(sqlc.narg('priority')::integer, priority),
    active = coalesce(sqlc.narg('active')::boolean, active),
    pickup = coalesce(sqlc.narg('pickup')::boolean, pickup),
    latitude = CASE WHEN @set_coordinates::boolean THEN sqlc.narg('latitude')::double precision ELSE latitude END,
    longitude = CASE WHEN @set_coordinates::boolean THEN sqlc.narg('longitude')::double precision ELSE longitude END,
    updated_by = @updated_by, updated_key = sqlc.narg('updated_key'), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: LocationStopSaleSet :one
-- LocationStopSaleSet stops sales at one location (a reason) or lets them
-- go on (null), with who and when.
UPDATE locations
SET stop_sale_reason = sqlc.narg('reason')::text, stop_sale_actor = @actor, stop_sale_key = sqlc.narg('actor_key'),
    stop_sale_at = now()
WHERE id = @id
RETURNING *;

-- name: LocationsStopped :many
-- LocationsStopped lists the locations whose sales are stopped.
SELECT * FROM locations WHERE stop_sale_reason IS NOT NULL ORDER BY id COLLATE "C";

-- Transfers between locations (POST/GET /v1/transfers).

-- name: TransferCreate :one
INSERT INTO transfers (id, sku, pool, from_location, to_location, quantity, reason, actor, actor_key)
VALUES (@id, @sku, @pool, @from_location, @to_location, @quantity, @reason, @actor, sqlc.narg('actor_key'))
RETURNING *;

-- name: TransferGet :one
SELECT * FROM transfers WHERE id = @id;

-- name: TransferLock :one
-- TransferLock locks a transfer before the stock rows it moves, the order
-- every change of a transfer takes its locks in.
SELECT * FROM transfers WHERE id = @id FOR UPDATE;

-- name: TransferSet :one
-- TransferSet records a transfer's receipts and losses and, when it
-- finishes, its status, who finished it and why.
UPDATE transfers
SET received = @received, lost = @lost, status = @status, updated_at = now(),
    finished_at = CASE WHEN @status::text <> 'in_transit' THEN now() END,
    finished_by = CASE WHEN @status::text <> 'in_transit' THEN sqlc.narg('finished_by')::text END,
    finish_reason = CASE WHEN @status::text <> 'in_transit' THEN sqlc.narg('finish_reason')::text END
WHERE id = @id
RETURNING *;

-- name: TransfersPage :many
-- TransfersPage lists up to lim transfers, oldest first, after the one
-- given (a keyset on (created_at, id)), with the status given or any.
SELECT t.* FROM transfers t
WHERE (sqlc.narg('status')::text IS NULL OR t.status = sqlc.narg('status')::text)
  AND (sqlc.narg('sku')::text IS NULL OR t.sku = sqlc.narg('sku')::text)
  AND (sqlc.narg('after_id')::uuid IS NULL OR (t.created_at, t.id) > (
        SELECT a.created_at, a.id FROM transfers a WHERE a.id = sqlc.narg('after_id')::uuid))
ORDER BY t.created_at, t.id
LIMIT @lim;

-- name: TransfersToRowAgainstLedger :many
-- TransfersToRowAgainstLedger locks the transfers in transit to a stock
-- row (in id order) and reads each beside its own ledger rows at that row
-- (ref: the transfer's id, written since it was made): the incoming its
-- transfer_in row added, the receipts and the losses in transit, what its
-- quantity, received and lost must be. A repair of the row restores them.
SELECT t.id, t.quantity, t.received, t.lost,
       coalesce(g.quantity, 0)::bigint AS ledger_quantity,
       coalesce(g.received, 0)::bigint AS ledger_received,
       coalesce(g.lost, 0)::bigint     AS ledger_lost
FROM transfers t
LEFT JOIN LATERAL (
    SELECT sum(x.delta_incoming) FILTER (WHERE x.kind = 'transfer_in') AS quantity,
           -sum(x.delta_incoming) FILTER (WHERE x.kind = 'receive')    AS received,
           -sum(x.delta_incoming) FILTER (WHERE x.kind = 'loss')       AS lost
    FROM ledger x
    WHERE x.sku = t.sku AND x.location = t.to_location AND x.pool = t.pool
      AND x.at >= t.created_at AND x.ref = t.id::text
) g ON true
WHERE t.sku = @sku AND t.to_location = @to_location AND t.pool = @pool AND t.status = 'in_transit'
ORDER BY t.id
FOR UPDATE OF t;

-- name: TransferRestore :exec
-- TransferRestore sets a transfer's quantity, received and lost (a repair
-- of its destination's books, from its ledger rows).
UPDATE transfers SET quantity = @quantity, received = @received, lost = @lost, updated_at = now()
WHERE id = @id;

-- Stock counts (POST /v1/skus/{sku}/counts).

-- name: StockCountRecord :one
INSERT INTO stock_counts (sku, location, pool, counted, on_shelf, difference, short_of_held, available_change, forced, reason, actor, actor_key)
VALUES (@sku, @location, @pool, @counted, @on_shelf, @difference, @short_of_held, @available_change, @forced, @reason, @actor, sqlc.narg('actor_key'))
RETURNING *;

-- name: StockCountsRecent :many
-- StockCountsRecent is the latest counts (of one SKU, or all), newest
-- first: the console's list of counts and their differences.
SELECT * FROM stock_counts
WHERE sqlc.narg('sku')::text IS NULL OR sku = sqlc.narg('sku')::text
ORDER BY id DESC
LIMIT @lim;

-- name: ReservationsHeldOnPool :many
-- ReservationsHeldOnPool lists the held holds with a line on one stock
-- row, soonest to expire first, up to lim: the holds at risk when a count
-- finds fewer units on the shelf than they hold.
SELECT r.id, r.order_ref, r.expires_at, x.quantity
FROM reservation_lines x
JOIN reservations r ON r.id = x.reservation_id
WHERE x.sku = @sku AND x.location = @location AND x.pool = @pool AND r.status = 'held'
ORDER BY r.expires_at, r.id
LIMIT @lim;

-- name: LocationsOrder :many
-- LocationsOrder is every location's priority: the order a SKU's stock is
-- listed in (GET /v1/skus/{sku}, GET /v1/skus).
SELECT id, priority FROM locations;

-- name: StockPickupBySKU :many
-- StockPickupBySKU lists a SKU's main stock at the pickup locations that
-- can sell it now (active, sales not stopped there, the row on sale, some
-- available), by priority then id: a click-and-collect page's choices.
SELECT s.location, l.name, l.latitude, l.longitude, s.available
FROM stock s
JOIN locations l ON l.id = s.location
WHERE s.sku = @sku AND s.pool = 'main' AND l.pickup AND l.active AND l.stop_sale_reason IS NULL
  AND s.status = 'on_sale' AND s.available > 0
ORDER BY l.priority, s.location COLLATE "C";
