-- name: ReservationInsert :one
-- ReservationInsert returns no row when the caller already used this
-- idempotency key; a concurrent twin waits here until the first commits.
INSERT INTO reservations (id, client, idempotency_key, request_hash, order_ref, campaign, expires_at)
VALUES (@id, @client, @idempotency_key, @request_hash, sqlc.narg('order_ref'), sqlc.narg('campaign'),
        now() + interval '1 second' * @ttl_seconds::bigint)
ON CONFLICT (client, idempotency_key) DO NOTHING
RETURNING *;

-- name: ReservationsInsertMany :batchmany
-- ReservationsInsertMany inserts the holds of a batch in the order given:
-- callers sort them by client and key, so two batches that share keys wait
-- on each other in one order and never deadlock. A hold whose key was used
-- before is left out of the result (ON CONFLICT waits for a concurrent
-- insert of the same key to commit, then skips it).
INSERT INTO reservations (id, client, idempotency_key, request_hash, order_ref, campaign, expires_at, customer_ref)
SELECT h.id, h.client, h.idempotency_key, h.request_hash, h.order_ref, h.campaign,
       now() + interval '1 second' * h.ttl_seconds, h.customer_ref
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@clients::text[]) AS client,
             unnest(@idempotency_keys::text[]) AS idempotency_key, unnest(@request_hashes::text[]) AS request_hash,
             nullif(unnest(@order_refs::text[]), '') AS order_ref, nullif(unnest(@campaigns::text[]), '') AS campaign,
             unnest(@ttl_seconds::bigint[]) AS ttl_seconds, nullif(unnest(@customer_refs::text[]), '') AS customer_ref,
             generate_series(1, cardinality(@ids::uuid[])) AS n) h
ORDER BY h.n
ON CONFLICT (client, idempotency_key) DO NOTHING
RETURNING *;

-- name: ReservationsDelete :batchexec
-- ReservationsDelete removes the holds a batch refused, which it inserted in
-- its own transaction; committed reservations are never deleted.
DELETE FROM reservations WHERE id = ANY(@ids::uuid[]);

-- name: ReservationsGetByKeys :batchmany
-- ReservationsGetByKeys returns the holds made with the given (client, key)
-- pairs: what a replayed request answers.
SELECT r.* FROM reservations r
JOIN (SELECT unnest(@clients::text[]) AS client, unnest(@idempotency_keys::text[]) AS idempotency_key) k
  ON r.client = k.client AND r.idempotency_key = k.idempotency_key;

-- name: ReservationFirstLinesGetByKeys :batchmany
-- ReservationFirstLinesGetByKeys returns the lines of the holds made with
-- these keys as they were granted, which is what a replay answers: from
-- their reserve ledger rows (never changed, never deleted), in the order
-- the hold batch wrote them, the order of its answer, whatever partial
-- releases did to the lines since, with the bundle line each came from
-- (a line keeps it while it holds any of it; the bundle's quantity as
-- granted is sku_granted, the component's units granted, over
-- bundle_per, what one bundle took of it by the definition the line
-- used). By the ledger's index of holds. A hold whose reserve rows were
-- archived (it ended in an archived month) answers its lines as they are
-- now (bundle_per null: the line's bundle_quantity).
SELECT f.reservation_id, f.sku, f.location, f.pool, f.quantity, f.units, f.bundle_sku, f.bundle_quantity, f.bundle_per,
       f.sku_granted, f.bundle_version, f.backordered, f.expected_on
FROM (SELECT r.id AS reservation_id, g.sku, g.location, g.pool, (g.delta_reserved + g.delta_backordered)::bigint AS quantity, g.units,
             l.bundle_sku, l.bundle_quantity, c.quantity AS bundle_per,
             (sum(g.delta_reserved + g.delta_backordered) OVER (PARTITION BY r.id, g.sku, g.pool))::bigint AS sku_granted,
             l.bundle_version, g.delta_backordered AS backordered, g.expected_on, g.id AS ord
      FROM reservations r
      JOIN (SELECT unnest(@clients::text[]) AS client, unnest(@idempotency_keys::text[]) AS idempotency_key) k
        ON r.client = k.client AND r.idempotency_key = k.idempotency_key
      JOIN ledger g ON g.reservation_id = r.id AND g.kind = 'reserve'
      LEFT JOIN reservation_lines l ON l.reservation_id = r.id AND l.sku = g.sku AND l.location = g.location AND l.pool = g.pool
      LEFT JOIN bundle_components c ON c.bundle_sku = l.bundle_sku AND c.version = l.bundle_version AND c.sku = g.sku
      UNION ALL
      SELECT r.id, l.sku, l.location, l.pool, l.quantity, l.units, l.bundle_sku, l.bundle_quantity, NULL::bigint, l.quantity,
             l.bundle_version, l.backordered, NULL::date, 0
      FROM reservations r
      JOIN (SELECT unnest(@clients::text[]) AS client, unnest(@idempotency_keys::text[]) AS idempotency_key) k
        ON r.client = k.client AND r.idempotency_key = k.idempotency_key
      JOIN reservation_lines l ON l.reservation_id = r.id
      WHERE NOT EXISTS (SELECT 1 FROM ledger x WHERE x.reservation_id = r.id AND x.kind = 'reserve')) f
ORDER BY f.reservation_id, f.ord, f.sku, f.location, f.pool;

-- name: ReservationFirstLines :many
-- ReservationFirstLines is ReservationFirstLinesGetByKeys for one hold.
SELECT f.sku, f.location, f.pool, f.quantity, f.units, f.bundle_sku, f.bundle_quantity, f.bundle_per, f.sku_granted, f.bundle_version,
       f.backordered, f.expected_on
FROM (SELECT g.sku, g.location, g.pool, (g.delta_reserved + g.delta_backordered)::bigint AS quantity, g.units,
             l.bundle_sku, l.bundle_quantity, c.quantity AS bundle_per,
             (sum(g.delta_reserved + g.delta_backordered) OVER (PARTITION BY g.sku, g.pool))::bigint AS sku_granted,
             l.bundle_version, g.delta_backordered AS backordered, g.expected_on, g.id AS ord
      FROM ledger g
      LEFT JOIN reservation_lines l ON l.reservation_id = g.reservation_id AND l.sku = g.sku AND l.location = g.location AND l.pool = g.pool
      LEFT JOIN bundle_components c ON c.bundle_sku = l.bundle_sku AND c.version = l.bundle_version AND c.sku = g.sku
      WHERE g.reservation_id = @reservation_id AND g.kind = 'reserve'
      UNION ALL
      SELECT l.sku, l.location, l.pool, l.quantity, l.units, l.bundle_sku, l.bundle_quantity, NULL::bigint, l.quantity, l.bundle_version,
             l.backordered, NULL::date, 0
      FROM reservation_lines l
      WHERE l.reservation_id = @reservation_id
        AND NOT EXISTS (SELECT 1 FROM ledger x WHERE x.reservation_id = @reservation_id AND x.kind = 'reserve')) f
ORDER BY f.ord, f.sku, f.location, f.pool;

-- name: ReservationGet :one
SELECT * FROM reservations WHERE id = @id;

-- name: ReservationKeysMade :many
-- ReservationKeysMade returns, of the (client, key) pairs given, those a
-- hold was made with, each with its hold's id and request hash: what a
-- hold refused from memory looks up first (replay.go).
SELECT r.client, r.idempotency_key, r.id, r.request_hash FROM reservations r
JOIN (SELECT unnest(@clients::text[]) AS client, unnest(@idempotency_keys::text[]) AS idempotency_key) k
  ON r.client = k.client AND r.idempotency_key = k.idempotency_key;

-- name: ReservationGetByKey :one
SELECT * FROM reservations WHERE client = @client AND idempotency_key = @idempotency_key;

-- name: ReservationLinesGet :many
-- ReservationLinesGet returns the lines of reservations, each with the
-- units it holds (or held, once the hold ended; a line without units has
-- none), in the order every answer lists them.
SELECT l.*
FROM reservation_lines l WHERE l.reservation_id = ANY(@reservation_ids::uuid[])
ORDER BY l.reservation_id, l.sku COLLATE "C", l.location COLLATE "C", l.pool COLLATE "C";

-- name: ReservationsLockMany :batchmany
-- ReservationsLockMany locks the reservations ids in id order, the order
-- every path locks holds in, and says which are past their expiry.
SELECT sqlc.embed(r), (r.expires_at <= now())::boolean AS due
FROM reservations r
WHERE r.id = ANY(@ids::uuid[])
ORDER BY r.id
FOR UPDATE;

-- name: ReservationLinesGetMany :batchmany
-- ReservationLinesGetMany is ReservationLinesGet for a pipe.
SELECT l.*
FROM reservation_lines l WHERE l.reservation_id = ANY(@reservation_ids::uuid[])
ORDER BY l.reservation_id, l.sku COLLATE "C", l.location COLLATE "C", l.pool COLLATE "C";

-- name: ReservationsGetMany :batchmany
SELECT * FROM reservations WHERE id = ANY(@ids::uuid[]) ORDER BY id;

-- name: ReservationsChange :batchmany
-- ReservationsChange writes what was decided for holds that this
-- transaction locked (ReservationsLockMany) before it read their lines
-- (ReservationLinesGetMany, a later statement, so the lines are as the last
-- committed change left them). Each hold in ids gets its status (confirmed,
-- released or expired; held for a partial release, which only touches it);
-- each line given (one per location the hold took a SKU from) moves its
-- units out of reserved at that location (into sold for kind confirm, into
-- available otherwise) and gets a ledger row carrying the version, counters
-- and feed position its stock row reached; the lines of a partial release
-- (kind release_partial) shrink, or go when released whole. A line's
-- units promised and not yet on hand (line_backordered, as read: a
-- receipt fills a line only under its hold's lock) stay promised when it
-- is confirmed and are given back first (backordered down) otherwise.
-- Stock rows are locked in (sku, location, pool) byte order, the lock order of every
-- path, and their UPDATE is conditional on holding the units it moves.
-- Then the statement checks that the database agrees with the decision,
-- and fails with SQLSTATE SH001 (stockhold_check) otherwise: every hold was
-- held, every stock row had the units, every line moved is the hold's line
-- as read (a partial release: at most it), and a hold that ends has every
-- one of its lines moved.
--
-- Units with an identity move with their lines (unit_* arrays, each unit
-- naming its hold and line): held -> sold for kind confirm, held ->
-- available otherwise; a partial release takes the units it gives back
-- out of the line (which keeps the units of a hold that ended: what it
-- held). A unit moves only while
-- its hold holds it, a line of a serialized pool moves exactly as many
-- units as its quantity, and each line's ledger row names its units; the
-- same check refuses the statement otherwise.
--
-- What a count found missing of the held units (stock.short) is paid
-- first: of the units the statement hands back to a row, as many as short
-- leave total and short instead of returning to available, in one ledger
-- row of kind shortfall (ref: the latest count that found units missing
-- there, refs: the holds). A confirm that would leave short above reserved
-- sells them: short comes down to reserved, and a ledger row of kind
-- sold_short records it. The statement answers a row per stock row where
-- units were sold so (none otherwise), after the check, for the service's
-- alert; a row of nulls when there is none.
WITH hold AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@statuses::text[]) AS status,
           unnest(@actors::text[]) AS actor, nullif(unnest(@reasons::text[]), '') AS reason
), changed AS (
    UPDATE reservations r
    SET status = h.status,
        confirmed_at = CASE WHEN h.status = 'confirmed' THEN now() END,
        released_at = CASE WHEN h.status IN ('released', 'expired') THEN now() END,
        release_reason = CASE WHEN h.status IN ('released', 'expired') THEN h.reason END,
        released_by = CASE WHEN h.status IN ('released', 'expired') THEN h.actor END,
        updated_at = now()
    FROM hold h
    WHERE r.id = h.id AND r.status = 'held'
    RETURNING r.id
), line AS (
    SELECT unnest(@line_ids::uuid[]) AS reservation_id, unnest(@line_skus::text[]) AS sku,
           unnest(@line_locations::text[]) AS location,
           unnest(@line_pools::text[]) AS pool, unnest(@line_quantities::bigint[]) AS quantity,
           unnest(@line_kinds::text[]) AS kind, unnest(@line_backordered::bigint[]) AS backordered,
           generate_series(1, cardinality(@line_ids::uuid[])) AS n
), given AS (
    -- Of what each line moves, the units promised and not yet on hand
    -- (its backordered): a confirm sells them still promised; any other
    -- change gives them back first (promised, backordered down), then
    -- the units on hand.
    SELECT l.reservation_id, l.sku, l.location, l.pool, l.quantity, l.kind, l.n, coalesce(l.backordered, 0) AS backordered,
           CASE WHEN l.kind = 'confirm' THEN 0 ELSE least(l.quantity, coalesce(l.backordered, 0)) END AS promised,
           CASE WHEN l.kind = 'confirm' THEN l.quantity - coalesce(l.backordered, 0)
                ELSE l.quantity - least(l.quantity, coalesce(l.backordered, 0)) END AS on_hand
    FROM line l
), move AS (
    SELECT l.reservation_id, l.sku, l.location, l.pool, l.quantity, l.backordered, l.promised, l.kind, l.n, h.actor, h.reason,
           CASE WHEN l.kind = 'confirm' THEN 0 ELSE l.on_hand END AS d_available,
           -l.on_hand AS d_reserved,
           CASE WHEN l.kind = 'confirm' THEN l.on_hand ELSE 0 END AS d_sold,
           -l.promised AS d_backordered
    FROM given l
    JOIN hold h ON h.id = l.reservation_id
), sums AS (
    SELECT m.sku, m.location, m.pool, sum(m.d_available)::bigint AS d_available,
           sum(m.d_reserved)::bigint AS d_reserved, sum(m.d_sold)::bigint AS d_sold,
           sum(m.d_backordered)::bigint AS d_backordered
    FROM move m
    GROUP BY m.sku, m.location, m.pool
), locked AS MATERIALIZED (
    -- The rows as locked (the latest version of each): short and reserved
    -- before this statement, for what it pays and sells short.
    SELECT s.sku, s.location, s.pool, s.short, s.reserved FROM stock s
    JOIN sums m ON m.sku = s.sku AND m.location = s.location AND m.pool = s.pool
    ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C"
    FOR NO KEY UPDATE OF s
), moved AS (
    -- Joined with locked, so every row it updates is already locked; only
    -- a row that holds the units moves. The units handed back pay short
    -- first (out of total, never into available); short never stays above
    -- reserved (a confirm sells what is missing).
    UPDATE stock s
    SET available = s.available + m.d_available - least(s.short, m.d_available),
        total = s.total - least(s.short, m.d_available),
        short = least(s.short - least(s.short, m.d_available), s.reserved + m.d_reserved),
        reserved = s.reserved + m.d_reserved,
        sold = s.sold + m.d_sold,
        backordered = s.backordered + m.d_backordered,
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    FROM sums m
    JOIN locked k ON k.sku = m.sku AND k.location = m.location AND k.pool = m.pool
    WHERE s.sku = m.sku AND s.location = m.location AND s.pool = m.pool AND s.reserved >= -m.d_reserved
    RETURNING s.sku, s.location, s.pool, s.version, s.feed_xid, s.total, s.available, s.reserved, s.sold,
              s.quality_control, s.damaged, s.safety_stock, s.incoming,
              least(k.short, m.d_available)::bigint AS paid,
              greatest(k.short - least(k.short, m.d_available) - (k.reserved + m.d_reserved), 0)::bigint AS sold_short
), shortfall AS (
    -- The rows that paid short or sold it, with the count that found the
    -- units missing and the holds whose lines did.
    SELECT v.sku, v.location, v.pool, v.version, v.feed_xid, v.total, v.available, v.reserved, v.sold,
           v.quality_control, v.damaged, v.safety_stock, v.incoming, v.paid, v.sold_short,
           (SELECT 'count ' || c.id FROM stock_counts c
            WHERE c.sku = v.sku AND c.location = v.location AND c.pool = v.pool AND c.short_of_held > 0
            ORDER BY c.id DESC LIMIT 1) AS ref,
           (SELECT m.actor FROM move m
            WHERE m.sku = v.sku AND m.location = v.location AND m.pool = v.pool ORDER BY m.n LIMIT 1) AS actor,
           ARRAY(SELECT DISTINCT m.reservation_id::text FROM move m
                 WHERE m.sku = v.sku AND m.location = v.location AND m.pool = v.pool
                   AND (m.kind = 'confirm') = (v.paid = 0)) AS holds
    FROM moved v
    WHERE v.paid > 0 OR v.sold_short > 0
), unit_in AS (
    SELECT unnest(@unit_reservation_ids::uuid[]) AS reservation_id, unnest(@unit_skus::text[]) AS sku,
           unnest(@unit_locations::text[]) AS location,
           unnest(@unit_pools::text[]) AS pool, unnest(@unit_ids::text[]) AS unit_id
), unit_move AS (
    SELECT u.reservation_id, u.sku, u.location, u.pool, u.unit_id, m.kind
    FROM unit_in u
    JOIN move m ON m.reservation_id = u.reservation_id AND m.sku = u.sku AND m.location = u.location AND m.pool = u.pool
), line_units AS (
    SELECT u.reservation_id, u.sku, u.location, u.pool, array_agg(u.unit_id ORDER BY u.unit_id COLLATE "C") AS units,
           count(*) AS n
    FROM unit_move u
    GROUP BY u.reservation_id, u.sku, u.location, u.pool
), shrunk AS (
    -- Lines are found by their hold's key, the row compared apart (see
    -- "lines not as read" below for why). The units given back leave the
    -- line.
    UPDATE reservation_lines l
    SET quantity = l.quantity - m.quantity,
        backordered = l.backordered - m.promised,
        units = CASE WHEN lu.units IS NULL THEN l.units
                     ELSE ARRAY(SELECT x FROM unnest(l.units) x WHERE x <> ALL(lu.units) ORDER BY x COLLATE "C") END
    FROM move m
    LEFT JOIN line_units lu ON lu.reservation_id = m.reservation_id AND lu.sku = m.sku
                           AND lu.location = m.location AND lu.pool = m.pool
    WHERE m.kind = 'release_partial' AND l.reservation_id = m.reservation_id
      AND (l.sku, l.location, l.pool) IS NOT DISTINCT FROM (m.sku, m.location, m.pool)
      AND l.quantity > m.quantity
    RETURNING l.reservation_id
), dropped AS (
    DELETE FROM reservation_lines l
    USING move m
    WHERE m.kind = 'release_partial' AND l.reservation_id = m.reservation_id
      AND (l.sku, l.location, l.pool) IS NOT DISTINCT FROM (m.sku, m.location, m.pool)
      AND l.quantity = m.quantity
    RETURNING l.reservation_id
), units_moved AS (
    UPDATE units u
    SET status = CASE WHEN m.kind = 'confirm' THEN 'sold' ELSE 'available' END,
        reservation_id = CASE WHEN m.kind = 'confirm' THEN u.reservation_id END,
        updated_at = now()
    FROM unit_move m
    -- By the unit's key; its hold compared with IS NOT DISTINCT FROM, which
    -- no index serves: planned on statistics from before a venue's sales,
    -- the index of units by hold (every held and sold unit) looked cheaper,
    -- and was read for each unit moved (TestChangeLinearOnUnits).
    WHERE u.sku = m.sku AND u.id = m.unit_id AND u.location = m.location AND u.pool = m.pool
      AND u.status = 'held' AND u.reservation_id IS NOT DISTINCT FROM m.reservation_id
    RETURNING u.sku, u.id
), ledger AS (
    INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, delta_short,
                        stock_version, reservation_id, actor, reason, ref, refs, units,
                        feed_xid, total_after, available_after, reserved_after, sold_after,
                        quality_control_after, damaged_after, safety_stock_after, incoming_after, delta_backordered)
    SELECT x.sku, x.location, x.pool, x.kind, x.d_total, x.d_available, x.d_reserved, x.d_sold, x.d_short,
           x.version, x.reservation_id, x.actor, x.reason, x.ref, x.refs, x.units,
           x.feed_xid, x.total, x.available, x.reserved, x.sold, x.quality_control, x.damaged, x.safety_stock, x.incoming,
           x.d_backordered
    FROM (
        SELECT m.n, m.sku, m.location, m.pool, m.kind, 0::bigint AS d_total, m.d_available, m.d_reserved, m.d_sold,
               0::bigint AS d_short, v.version, m.reservation_id, m.actor, m.reason, NULL::text AS ref, NULL::text[] AS refs,
               lu.units, v.feed_xid, v.total, v.available, v.reserved, v.sold,
               v.quality_control, v.damaged, v.safety_stock, v.incoming, m.d_backordered
        FROM move m
        JOIN moved v ON v.sku = m.sku AND v.location = m.location AND v.pool = m.pool
        LEFT JOIN line_units lu ON lu.reservation_id = m.reservation_id AND lu.sku = m.sku
                               AND lu.location = m.location AND lu.pool = m.pool
        UNION ALL
        -- After every line: what the lines handed back paid of short.
        SELECT cardinality(@line_ids::uuid[]) + 1, f.sku, f.location, f.pool, 'shortfall', -f.paid, -f.paid, 0, 0,
               -f.paid, f.version, NULL::uuid, f.actor,
               'held units a count found missing left the books with their holds', f.ref, f.holds,
               NULL::text[], f.feed_xid, f.total, f.available, f.reserved, f.sold,
               f.quality_control, f.damaged, f.safety_stock, f.incoming, 0::bigint
        FROM shortfall f WHERE f.paid > 0
        UNION ALL
        SELECT cardinality(@line_ids::uuid[]) + 2, f.sku, f.location, f.pool, 'sold_short', 0, 0, 0, 0,
               -f.sold_short, f.version, NULL::uuid, f.actor,
               'held units a count found missing were sold', f.ref, f.holds,
               NULL::text[], f.feed_xid, f.total, f.available, f.reserved, f.sold,
               f.quality_control, f.damaged, f.safety_stock, f.incoming, 0::bigint
        FROM shortfall f WHERE f.sold_short > 0
    ) x
    ORDER BY x.n, x.sku COLLATE "C", x.location COLLATE "C", x.pool COLLATE "C"
), checked AS MATERIALIZED (
    SELECT stockhold_check(concat_ws('; ',
    (SELECT 'units not held by their holds: ' || string_agg(u.sku || '/' || u.unit_id, ', ')
     FROM unit_in u
     WHERE NOT EXISTS (SELECT 1 FROM units_moved t WHERE t.sku = u.sku AND t.id = u.unit_id)),
    (SELECT 'lines of serialized pools not moving their units: '
            || string_agg(m.reservation_id::text || ' ' || m.sku || '/' || m.location || '/' || m.pool, ', ')
     FROM move m
     JOIN stock s ON s.sku = m.sku AND s.location = m.location AND s.pool = m.pool
     LEFT JOIN line_units lu ON lu.reservation_id = m.reservation_id AND lu.sku = m.sku
                            AND lu.location = m.location AND lu.pool = m.pool
     WHERE s.serialized AND coalesce(lu.n, 0) <> m.quantity),
    (SELECT 'holds not held: ' || string_agg(h.id::text, ', ')
     FROM hold h WHERE NOT EXISTS (SELECT 1 FROM changed c WHERE c.id = h.id)),
    (SELECT 'stock rows without the units to move: ' || string_agg(m.sku || '/' || m.location || '/' || m.pool, ', ')
     FROM sums m WHERE NOT EXISTS (
         SELECT 1 FROM moved v WHERE v.sku = m.sku AND v.location = m.location AND v.pool = m.pool)),
    (SELECT 'lines not as read: ' || string_agg(m.reservation_id::text || ' ' || m.sku || '/' || m.location || '/' || m.pool, ', ')
     FROM move m
     -- Each line is looked up by its hold's key and compared as a row,
     -- which no index serves: a plan made on statistics from before a
     -- burst took the row's index (every line of a hot SKU) for each line
     -- moved, 200 ms for 500 holds in the expiry bench (TestChangeLinear).
     LEFT JOIN LATERAL (
         SELECT l.quantity, l.backordered FROM reservation_lines l
         WHERE l.reservation_id = m.reservation_id
           AND (l.sku, l.location, l.pool) IS NOT DISTINCT FROM (m.sku, m.location, m.pool)
         OFFSET 0) l ON true
     WHERE l.quantity IS NULL OR m.quantity < 1 OR l.backordered <> m.backordered
        OR (m.kind = 'release_partial' AND l.quantity < m.quantity)
        OR (m.kind <> 'release_partial' AND l.quantity <> m.quantity)),
    (SELECT 'lines left out: ' || string_agg(l.reservation_id::text || ' ' || l.sku || '/' || l.location || '/' || l.pool, ', ')
     FROM hold h
     CROSS JOIN LATERAL (
         SELECT l.reservation_id, l.sku, l.location, l.pool FROM reservation_lines l
         WHERE l.reservation_id = h.id OFFSET 0) l
     WHERE h.status <> 'held'
       AND NOT EXISTS (SELECT 1 FROM move m WHERE m.reservation_id = l.reservation_id AND m.sku = l.sku
                                               AND m.location = l.location AND m.pool = l.pool))
)) AS ok
)
-- Left of the join, the check is read whatever shortfall holds.
SELECT f.sku, f.location, f.pool, f.sold_short, coalesce(f.ref, '')::text AS ref, coalesce(f.holds, '{}')::text[] AS holds
FROM checked c
LEFT JOIN shortfall f ON f.sold_short > 0;

-- name: ReservationsDue :batchmany
-- ReservationsDue locks up to lim held reservations that expired
-- grace_seconds ago or earlier, the longest overdue first. It skips rows
-- another transaction is working on, and holds with a line on one of the
-- stock rows given (rows found locked by someone else: their holds wait for
-- a later pass rather than hold up everyone else's). Each due hold's own
-- lines are looked at, by their key (OFFSET 0 keeps the subquery per hold,
-- and the rows are compared as one value, which no index of the rows'
-- lines serves). As a join with the rows, the prepared statement's generic
-- plan (made without the arrays' values, with statistics from before a
-- burst on a new SKU) took the rows' lines for a handful and compared every
-- due hold with every one: 332 million comparisons and 10.6 s for 17,230
-- due holds in the expiry bench, while nothing expired
-- (TestDueHoldsReadLinear).
SELECT r.id FROM reservations r
WHERE r.status = 'held'
  AND r.expires_at <= now() - interval '1 second' * @grace_seconds::float8
  AND NOT EXISTS (
        SELECT 1 FROM reservation_lines l
        WHERE l.reservation_id = r.id
          AND ROW(l.sku, l.location, l.pool) = ANY (ARRAY(
                SELECT ROW(x.sku, x.location, x.pool)
                FROM (SELECT unnest(@skip_skus::text[]) AS sku, unnest(@skip_locations::text[]) AS location,
                             unnest(@skip_pools::text[]) AS pool) x))
        OFFSET 0)
ORDER BY r.expires_at, r.id
LIMIT @lim
FOR UPDATE OF r SKIP LOCKED;

-- name: ReservationsLockFree :batchmany
-- ReservationsLockFree locks, of the reservations ids, those no other
-- transaction is working on, without waiting, in id order, and says which
-- are past their expiry: a hold batch that carries changes to holds on its
-- stock rows (a confirm, a release, an expiry) locks them after those
-- rows, so it must never wait on a path that locks holds first. A hold it
-- skips is changed by whoever has it, or goes again elsewhere.
SELECT sqlc.embed(r), (r.expires_at <= now())::boolean AS due
FROM reservations r
WHERE r.id = ANY(@ids::uuid[])
ORDER BY r.id
FOR UPDATE OF r SKIP LOCKED;

-- name: ReservationsDueOn :many
-- ReservationsDueOn lists, of the scan held reservations that expired
-- grace_seconds ago or earlier, the longest overdue first, up to lim with a
-- line on one of the stock rows given, each with every stock row its lines
-- draw on (a row per line): the expiry loop hands them to the hold
-- batches of those rows (see expiry.go). It walks the due holds along
-- reservations_held_expires_at first (MATERIALIZED: a plan that read the
-- given rows' lines first would read every hold of a busy venue), looks
-- at each one's own lines by their key (as ReservationsDue does: not a
-- join that may compare every due hold with every line of the rows), and
-- locks nothing.
WITH due AS MATERIALIZED (
    SELECT r.id, r.expires_at FROM reservations r
    WHERE r.status = 'held'
      AND r.expires_at <= now() - interval '1 second' * @grace_seconds::float8
    ORDER BY r.expires_at, r.id
    LIMIT @scan
), on_rows AS (
    SELECT d.id, d.expires_at FROM due d
    WHERE EXISTS (
            SELECT 1 FROM reservation_lines l
            WHERE l.reservation_id = d.id
              AND ROW(l.sku, l.location, l.pool) = ANY (ARRAY(
                    SELECT ROW(x.sku, x.location, x.pool)
                    FROM (SELECT unnest(@skus::text[]) AS sku, unnest(@locations::text[]) AS location,
                                 unnest(@pools::text[]) AS pool) x))
            OFFSET 0)
    ORDER BY d.expires_at, d.id
    LIMIT @lim
)
SELECT o.id, l.sku, l.location, l.pool
FROM on_rows o
JOIN reservation_lines l ON l.reservation_id = o.id
ORDER BY o.expires_at, o.id;

-- name: ReservationsFree :many
-- ReservationsFree returns which of the reservations ids no other
-- transaction has locked right now, without waiting (it locks them until
-- the caller's transaction ends). A batch that ran into its lock timeout
-- asks it to tell the holds someone else is working on from the rest.
SELECT r.id FROM reservations r
WHERE r.id = ANY(@ids::uuid[])
ORDER BY r.id
FOR UPDATE SKIP LOCKED;

-- name: ReservationLinesBundleGiven :exec
-- ReservationLinesBundleGiven records a partial release of bundles
-- bundles of bundle bundle_sku from a hold that stays held (its lock
-- held): the component lines left say how many of it they hold now.
UPDATE reservation_lines
SET bundle_quantity = bundle_quantity - @bundles::bigint
WHERE reservation_id = @reservation_id AND bundle_sku = @bundle_sku;
