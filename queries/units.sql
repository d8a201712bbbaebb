-- Units with an identity (seats, tickets, serial numbers): adding and
-- retiring them, listing them, and what a hold batch reads to pick them.
-- Every statement that changes units runs after the pool's stock row is
-- locked, so units of one pool change one transaction at a time.

-- name: UnitsExisting :many
-- UnitsExisting returns which of the given unit ids of sku exist, in any
-- pool and state.
SELECT u.id FROM units u WHERE u.sku = @sku AND u.id = ANY(@ids::text[]) ORDER BY u.id COLLATE "C";

-- name: UnitsPlacesTaken :many
-- UnitsPlacesTaken returns the (group, position) places of sku already
-- taken by a unit, among those given.
SELECT u.group_name::text AS group_name, u.position::int AS position, u.id
FROM units u
JOIN (SELECT unnest(@groups::text[]) AS g, unnest(@positions::int[]) AS p) k ON u.group_name = k.g AND u.position = k.p
WHERE u.sku = @sku;

-- name: UnitsAdd :one
-- UnitsAdd adds available units to one pool whose stock row the caller
-- locked, moves its counters by their number, marks it serialized, and
-- writes one stock_in ledger row naming the units. It returns the ledger
-- row's id.
WITH added AS (
    INSERT INTO units (sku, id, location, pool, group_name, position, attributes)
    SELECT @sku, u.id, @location, @pool, nullif(u.grp, ''), nullif(u.pos, -1), u.attrs
    FROM (SELECT unnest(@ids::text[]) AS id, unnest(@groups::text[]) AS grp,
                 unnest(@positions::int[]) AS pos, unnest(@attributes::jsonb[]) AS attrs,
                 generate_series(1, cardinality(@ids::text[])) AS n) u
    ORDER BY u.n
    RETURNING id
), moved AS (
    UPDATE stock s
    SET total = s.total + (SELECT count(*) FROM added),
        available = s.available + (SELECT count(*) FROM added),
        serialized = true,
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool
    RETURNING s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold,
              s.quality_control, s.damaged, s.safety_stock, s.incoming
)
INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    stock_version, actor, reason, ref, units,
                    feed_xid, total_after, available_after, reserved_after, sold_after,
                    quality_control_after, damaged_after, safety_stock_after, incoming_after)
SELECT @sku, @location, @pool, 'stock_in', cardinality(@ids::text[]), cardinality(@ids::text[]), 0, 0,
       m.version, @actor::text, sqlc.narg('reason')::text, sqlc.narg('ref')::text, @ids::text[],
       m.feed_xid, m.total, m.available, m.reserved, m.sold, m.quality_control, m.damaged, m.safety_stock, m.incoming
FROM moved m
RETURNING id;

-- name: UnitsRetire :one
-- UnitsRetire takes available units of one pool whose stock row the
-- caller locked out of it (a broken seat): they become retired, the
-- pool's total and available shrink by their number, and one adjust
-- ledger row names them. It returns how many it retired; the caller
-- checked that every one was available.
WITH retired AS (
    UPDATE units u SET status = 'retired', updated_at = now()
    WHERE u.sku = @sku AND u.location = @location AND u.pool = @pool AND u.id = ANY(@ids::text[]) AND u.status = 'available'
    RETURNING u.id
), moved AS (
    UPDATE stock s
    SET total = s.total - (SELECT count(*) FROM retired),
        available = s.available - (SELECT count(*) FROM retired),
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool
    RETURNING s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold,
              s.quality_control, s.damaged, s.safety_stock, s.incoming
), ledger AS (
    INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                        stock_version, actor, reason, ref, units,
                        feed_xid, total_after, available_after, reserved_after, sold_after,
                        quality_control_after, damaged_after, safety_stock_after, incoming_after)
    SELECT @sku, @location, @pool, 'adjust', -(SELECT count(*) FROM retired), -(SELECT count(*) FROM retired), 0, 0,
           m.version, @actor::text, sqlc.narg('reason')::text, sqlc.narg('ref')::text,
           (SELECT array_agg(id ORDER BY id COLLATE "C") FROM retired),
           m.feed_xid, m.total, m.available, m.reserved, m.sold, m.quality_control, m.damaged, m.safety_stock, m.incoming
    FROM moved m
)
SELECT count(*)::int FROM retired;

-- name: UnitsGet :many
-- UnitsGet returns the given units of sku, in any pool and state.
SELECT * FROM units WHERE sku = @sku AND id = ANY(@ids::text[]) ORDER BY id COLLATE "C";

-- name: UnitsList :many
-- UnitsList pages through sku's units in id order (byte-wise), after the
-- id given, filtered by whichever of pool, status and group are given,
-- each with the client of the hold that holds or bought it ('' for none),
-- so that a shop is shown only its own holds.
SELECT sqlc.embed(u), coalesce(r.client, '')::text AS holder
FROM units u
LEFT JOIN reservations r ON r.id = u.reservation_id
WHERE u.sku = @sku
  AND (sqlc.narg('after')::text IS NULL OR u.id COLLATE "C" > sqlc.narg('after')::text COLLATE "C")
  AND (sqlc.narg('pool')::text IS NULL OR u.pool = sqlc.narg('pool')::text)
  AND (sqlc.narg('status')::text IS NULL OR u.status = sqlc.narg('status')::text)
  AND (sqlc.narg('group_name')::text IS NULL OR u.group_name = sqlc.narg('group_name')::text)
ORDER BY u.id COLLATE "C"
LIMIT @lim;

-- name: UnitsNamed :batchmany
-- UnitsNamed reads the units a hold batch's lines name, as they are once
-- the batch has locked their pools' stock rows (every change to a pool's
-- units locks its stock row first, so they cannot change under it).
SELECT u.sku, u.id, u.location, u.pool, u.status, u.group_name, u.position
FROM units u
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@ids::text[]) AS id) k ON u.sku = k.sku AND u.id = k.id;

-- name: UnitsFree :batchmany
-- UnitsFree reads, for each pool given, up to its limit of available units
-- in seat order (group, position, id): what a hold batch picks "N units"
-- from.
SELECT u.sku, u.id, u.pool, u.group_name, u.position
FROM (SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool, unnest(@lims::int[]) AS lim) k
CROSS JOIN LATERAL (
    SELECT v.sku, v.id, v.pool, v.group_name, v.position FROM units v
    WHERE v.sku = k.sku AND v.pool = k.pool AND v.status = 'available'
    ORDER BY v.group_name COLLATE "C" NULLS LAST, v.position NULLS LAST, v.id COLLATE "C"
    LIMIT k.lim
) u;

-- name: UnitsRuns :batchmany
-- UnitsRuns reads, for each pool given, up to lim disjoint windows of
-- min_len available units with consecutive positions in one group, in
-- seat order, each row naming the min_len it answers: what a hold batch
-- picks "N adjacent units" from. It walks the pool's available units in
-- seat order along units_seat_order and stops at the lim-th window (window
-- functions over the index scan, run as a pipeline under the LIMIT): its
-- cost is the available units before the windows it returns, not the
-- venue. Each run of consecutive positions is cut into windows from its
-- start.
WITH k AS (
    SELECT unnest(@skus::text[]) AS sku, unnest(@pools::text[]) AS pool,
           unnest(@min_lens::int[]) AS min_len, unnest(@lims::int[]) AS lim
)
SELECT k.sku::text AS sku, k.pool::text AS pool, k.min_len::int AS min_len, r.group_name::text AS group_name, r.ids::text[] AS ids
FROM k
CROSS JOIN LATERAL (
    SELECT b.group_name, b.ids
    FROM (
        SELECT a.group_name, a.position,
               max(CASE WHEN a.prev IS DISTINCT FROM a.position - 1 THEN a.position END)
                   OVER (PARTITION BY a.group_name COLLATE "C" ORDER BY a.position ROWS UNBOUNDED PRECEDING) AS start,
               array_agg(a.id) OVER (PARTITION BY a.group_name COLLATE "C" ORDER BY a.position
                                     ROWS BETWEEN k.min_len - 1 PRECEDING AND CURRENT ROW) AS ids
        FROM (
            SELECT v.id, v.group_name, v.position,
                   lag(v.position) OVER (PARTITION BY v.group_name COLLATE "C" ORDER BY v.position) AS prev
            FROM units v
            WHERE v.sku = k.sku AND v.pool = k.pool AND v.status = 'available' AND v.position IS NOT NULL
        ) a
    ) b
    WHERE (b.position - b.start + 1) % k.min_len = 0
    LIMIT k.lim
) r;

-- name: UnitsMovePool :many
-- UnitsMovePool moves available units of sku from one pool to another at
-- one location (a campaign's carve-out, and its return): the units named,
-- or, with none named, up to lim of them in seat order. The caller locked
-- both pools' stock rows. It returns the ids moved, byte-wise.
WITH picked AS (
    SELECT u.id FROM units u
    WHERE u.sku = @sku AND u.location = @location AND u.pool = @from_pool AND u.status = 'available'
      AND (cardinality(@ids::text[]) = 0 OR u.id = ANY(@ids::text[]))
    ORDER BY u.group_name COLLATE "C" NULLS LAST, u.position NULLS LAST, u.id COLLATE "C"
    LIMIT @lim
), moved AS (
    UPDATE units u SET pool = @to_pool, updated_at = now()
    FROM picked p
    WHERE u.sku = @sku AND u.id = p.id AND u.location = @location AND u.pool = @from_pool AND u.status = 'available'
    RETURNING u.id
)
SELECT id FROM moved ORDER BY id COLLATE "C";

-- name: StockShiftUnits :one
-- StockShiftUnits moves a serialized pool's total and available by delta
-- (units that came in or went out with UnitsMovePool), marking it
-- serialized; the caller locked it.
UPDATE stock
SET total = total + @delta::bigint,
    available = available + @delta::bigint,
    serialized = true,
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND location = @location AND pool = @pool
RETURNING *;

-- name: UnitsSoldTwice :one
-- UnitsSoldTwice counts the units of sku that more than one confirmed
-- hold bought (never more than zero), and the units sold.
SELECT (SELECT count(*) FROM (
            SELECT x.id FROM reservation_lines l
            JOIN reservations r ON r.id = l.reservation_id
            CROSS JOIN LATERAL unnest(l.units) AS x(id)
            WHERE l.sku = @sku AND r.status = 'confirmed'
            GROUP BY x.id HAVING count(*) > 1) twice)::int AS sold_twice,
       (SELECT count(*) FROM units WHERE sku = @sku AND status = 'sold')::int AS sold;

-- name: StockPoolsGuard :exec
-- StockPoolsGuard takes, until the transaction ends, the advisory locks
-- keys exclusively, in order: an addition of units takes those of its
-- pool (see inventory's poolguard.go).
SELECT pg_advisory_xact_lock(k) FROM unnest(@keys::bigint[]) AS k ORDER BY k;

-- name: StockPoolsGuardShared :exec
-- StockPoolsGuardShared is StockPoolsGuard's shared side: what may put
-- stock without an identity on a row of a pool takes it.
SELECT pg_advisory_xact_lock_shared(k) FROM unnest(@keys::bigint[]) AS k ORDER BY k;

-- name: StockPoolPlain :many
-- StockPoolPlain lists the rows of a SKU's pool, at every location, that
-- hold stock without an identity or expect some (incoming: a transfer in
-- transit to them), which units with an identity cannot join.
SELECT location, total, incoming FROM stock
WHERE sku = @sku AND pool = @pool AND NOT serialized AND (total > 0 OR incoming > 0)
ORDER BY location COLLATE "C";
