-- name: InvariantViolations :many
-- InvariantViolations lists every breach of the invariants 1, 2, 3, 5, 6,
-- 7 and 8 of docs/internals/ARCHITECTURE.md (and the "released twice" half
-- of 4), one row each; empty means the books balance. Tests call it after every change to stock.
SELECT 'stock ' || sku || '/' || location || '/' || pool AS subject,
       concat_ws('; ',
         CASE WHEN NOT counters_ok THEN format('counters: total %s != available %s + reserved %s + sold %s + quality_control %s + damaged %s + safety_stock %s (or negative, incoming %s, or short %s above reserved)',
                                               total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short) END,
         CASE WHEN NOT lines_ok THEN format('lines: reserved %s vs held lines %s, sold %s vs confirmed lines %s', reserved, lines_held, sold, lines_confirmed) END,
         CASE WHEN NOT ledger_ok THEN format('ledger: counters %s/%s/%s/%s/%s/%s/%s/%s/%s vs ledger %s/%s/%s/%s/%s/%s/%s/%s/%s',
                                             total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short,
                                             ledger_total, ledger_available, ledger_reserved, ledger_sold,
                                             ledger_quality_control, ledger_damaged, ledger_safety_stock, ledger_incoming, ledger_short) END,
         CASE WHEN NOT transit_ok THEN format('incoming %s vs %s in transit to it', incoming, in_transit) END,
         CASE WHEN NOT promise_ok THEN format('backordered %s vs lines %s and ledger %s (or past its policy)',
                                              backordered, lines_backordered, ledger_backordered) END
       )::text AS problem
FROM stock_health
WHERE NOT ok
UNION ALL
-- Invariant 8's other half: a transfer in transit is incoming at a stock
-- row of its destination (a transfer to a row that does not exist).
SELECT 'transfer ' || t.id::text, format('in transit to %s/%s/%s, which has no stock row', t.sku, t.to_location, t.pool)
FROM transfers t
WHERE t.status = 'in_transit'
  AND NOT EXISTS (SELECT 1 FROM stock s WHERE s.sku = t.sku AND s.location = t.to_location AND s.pool = t.pool)
UNION ALL
-- And an open inbound line is incoming at a stock row of its location.
SELECT 'inbound ' || l.inbound_id::text, format('line %s/%s expected at %s, which has no stock row', l.sku, l.pool, l.location)
FROM inbound_lines l
JOIN inbound i ON i.id = l.inbound_id
WHERE i.status = 'open'
  AND NOT EXISTS (SELECT 1 FROM stock s WHERE s.sku = l.sku AND s.location = l.location AND s.pool = l.pool)
UNION ALL
SELECT 'idempotency key ' || client || '/' || idempotency_key, format('%s holds', count(*))
FROM reservations
GROUP BY client, idempotency_key
HAVING count(*) > 1
UNION ALL
SELECT 'reservation ' || reservation_id::text, format('%s ledger rows hand back %s/%s/%s', count(*), sku, location, pool)
FROM ledger
WHERE kind IN ('release', 'expire', 'rollback', 'confirm') AND reservation_id IS NOT NULL
GROUP BY reservation_id, sku, location, pool
HAVING count(*) > 1
UNION ALL
SELECT 'reservation ' || r.id::text, 'status ' || r.status || ' but no matching ledger row'
FROM reservations r
WHERE r.status <> 'held' AND NOT EXISTS (
    SELECT 1 FROM ledger g WHERE g.reservation_id = r.id AND g.kind IN ('release', 'expire', 'rollback', 'confirm'))
  -- A hold made before the end of an archived month may have ended there:
  -- its rows were carried forward (migrations/00150_ledger_archives.sql).
  AND NOT EXISTS (SELECT 1 FROM ledger_archives a WHERE a.to_at > r.created_at)
UNION ALL
-- Per hold and stock row, the ledger's units still held and sold by the
-- hold must be what its line holds: all of it while held (less what partial
-- releases handed back), all of it sold once confirmed, none once it ended
-- or retention deleted it; of it, what is promised and not filled yet
-- (backordered) is neither held nor sold but promised.
SELECT 'reservation ' || g.reservation_id::text,
       format('the ledger has %s held, %s sold and %s promised of %s/%s/%s, the hold (%s) %s (%s promised)',
              g.held, g.sold, g.promised, g.sku, g.location, g.pool,
              coalesce(r.status, 'deleted'), coalesce(l.quantity, 0), coalesce(l.backordered, 0))
FROM (SELECT reservation_id, sku, location, pool, sum(delta_reserved) AS held, sum(delta_sold) AS sold,
             sum(delta_backordered) AS promised
      FROM ledger WHERE reservation_id IS NOT NULL
      GROUP BY reservation_id, sku, location, pool) g
LEFT JOIN reservations r ON r.id = g.reservation_id
LEFT JOIN reservation_lines l ON l.reservation_id = g.reservation_id AND l.sku = g.sku
                             AND l.location = g.location AND l.pool = g.pool
WHERE g.held <> CASE WHEN r.status = 'held' THEN coalesce(l.quantity - l.backordered, 0) ELSE 0 END
   OR g.sold <> CASE WHEN r.status = 'confirmed' THEN coalesce(l.quantity - l.backordered, 0) ELSE 0 END
   OR g.promised <> CASE WHEN r.status IN ('held', 'confirmed') THEN coalesce(l.backordered, 0) ELSE 0 END
UNION ALL
-- Invariant 7: a serialized pool's counters are its units by status, and
-- units live only in serialized pools.
SELECT 'stock ' || s.sku || '/' || s.location || '/' || s.pool,
       format('counters %s/%s/%s (available/reserved/sold), units %s/%s/%s, serialized %s', s.available, s.reserved, s.sold,
              coalesce(u.available, 0), coalesce(u.held, 0), coalesce(u.sold, 0), s.serialized)
FROM stock s
LEFT JOIN (SELECT sku, location, pool, count(*) FILTER (WHERE status = 'available') AS available,
                  count(*) FILTER (WHERE status = 'held') AS held, count(*) FILTER (WHERE status = 'sold') AS sold,
                  count(*) AS n
           FROM units GROUP BY sku, location, pool) u ON u.sku = s.sku AND u.location = s.location AND u.pool = s.pool
WHERE (s.serialized AND (s.available, s.reserved, s.sold) <> (coalesce(u.available, 0), coalesce(u.held, 0), coalesce(u.sold, 0)))
   OR (NOT s.serialized AND coalesce(u.n, 0) > 0)
UNION ALL
-- A unit held or sold is so by a hold that holds it (held) or bought it
-- (confirmed), whose line names it; a unit a held or confirmed hold's line
-- names is held or sold by that hold; a line of a serialized pool names as
-- many units as its quantity.
SELECT 'unit ' || u.sku || '/' || u.id,
       format('%s by hold %s (%s), on its line %s', u.status, u.reservation_id, coalesce(r.status, 'none'), l.reservation_id IS NOT NULL)
FROM units u
LEFT JOIN reservations r ON r.id = u.reservation_id
LEFT JOIN reservation_lines l ON l.reservation_id = u.reservation_id AND l.sku = u.sku AND l.location = u.location
                             AND l.pool = u.pool AND u.id = ANY(l.units)
WHERE u.status IN ('held', 'sold')
  AND (r.status IS DISTINCT FROM CASE u.status WHEN 'held' THEN 'held' ELSE 'confirmed' END OR l.reservation_id IS NULL)
UNION ALL
SELECT 'unit ' || l.sku || '/' || x.id, format('on a line of hold %s (%s) but %s by %s', l.reservation_id, r.status, coalesce(u.status, 'missing'), u.reservation_id)
FROM reservation_lines l
JOIN reservations r ON r.id = l.reservation_id AND r.status IN ('held', 'confirmed')
CROSS JOIN LATERAL unnest(l.units) AS x(id)
LEFT JOIN units u ON u.sku = l.sku AND u.id = x.id
WHERE u.reservation_id IS DISTINCT FROM l.reservation_id OR u.status IS DISTINCT FROM CASE r.status WHEN 'held' THEN 'held' ELSE 'sold' END
UNION ALL
SELECT 'reservation ' || l.reservation_id::text, format('line %s/%s/%s of %s has %s units', l.sku, l.location, l.pool, l.quantity, cardinality(l.units))
FROM reservation_lines l
JOIN stock s ON s.sku = l.sku AND s.location = l.location AND s.pool = l.pool
WHERE cardinality(l.units) <> CASE WHEN s.serialized THEN l.quantity ELSE 0 END;

-- name: ReadinessProbeTimeout :exec
-- ReadinessProbeTimeout bounds the rest of the probe's transaction, its
-- COMMIT included: a commit that waits longer for the synchronous standby
-- is cancelled, which PostgreSQL answers with a warning the pool turns
-- into an error (see app.failoverGuard).
SELECT set_config('statement_timeout', @timeout::text, true);

-- name: ReadinessProbe :exec
-- ReadinessProbe records that instance could write now, and forgets the
-- instances that have not probed for a day.
WITH gone AS (
    DELETE FROM readiness_probes WHERE probed_at < now() - interval '1 day'
)
INSERT INTO readiness_probes (instance, probed_at) VALUES (@instance, now())
ON CONFLICT (instance) DO UPDATE SET probed_at = excluded.probed_at;
