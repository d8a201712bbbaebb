-- units_against_ledger.sql: which units of a pool are not where its ledger
-- last put them (changed behind the triggers), and what the ledger says?
--
--   psql "$DATABASE_URL" -X -v sku=SHOW -f sql/units_against_ledger.sql
--   psql "$DATABASE_URL" -X -v sku=SHOW -v pool=gala -f sql/units_against_ledger.sql
--
-- Read only. One pass over the pool's ledger rows that name units (every
-- row that moves a unit names it), through the ledger's (sku, location,
-- pool, stock_version) index. A pool of units lives at one location, so
-- the SKU and the pool name it.
--
-- How to read it:
--   1. The pool: its counters beside its units by status. They must be
--      equal; the database refuses to commit otherwise, unless its
--      triggers were bypassed (session_replication_role = replica).
--   2. Each unit whose status or pool is not what the last ledger row of
--      the pool naming it says: `ledger_says` is held after a reserve,
--      sold after a confirm, available after units came in or went back,
--      gone after a retirement or a transfer out ("never named": a unit
--      the pool's ledger never moved). `ledger_id` is that row.
--
-- What to do next (reconciliation paused the pool with a counters_vs_units
-- finding naming these units, and the repair refuses while they disagree):
--   - Put each unit back as its ledger row says, in one transaction with
--     the triggers bypassed as they were, e.g.
--       SET session_replication_role = replica;
--       UPDATE units SET status = 'available' WHERE sku = 'SHOW' AND id = 'A-2';
--       RESET session_replication_role;
--     then make the change you meant through the API (POST
--     /v1/skus/{sku}/units/retire takes a seat out, with its ledger row),
--     reconcile (stockhold reconcile --sku SHOW) and resume the pool.

\if :{?sku} \else \set sku '' \endif
\if :{?pool} \else \set pool 'main' \endif

\echo '== 1. The pool: counters and units by status =='
SELECT s.sku, s.location, s.pool, s.status, s.available, s.reserved, s.sold,
       count(u.*) FILTER (WHERE u.status = 'available') AS units_available,
       count(u.*) FILTER (WHERE u.status = 'held')      AS units_held,
       count(u.*) FILTER (WHERE u.status = 'sold')      AS units_sold,
       count(u.*) FILTER (WHERE u.status = 'retired')   AS units_retired
FROM stock s
LEFT JOIN units u ON u.sku = s.sku AND u.location = s.location AND u.pool = s.pool
WHERE s.sku = :'sku' AND s.pool = :'pool' AND s.serialized
GROUP BY s.sku, s.location, s.pool, s.status, s.available, s.reserved, s.sold;

\echo '== 2. Units not where the ledger last put them =='
WITH said AS (
    SELECT DISTINCT ON (x.unit_id) x.unit_id, g.kind, g.id AS ledger_id, g.at,
           CASE WHEN g.delta_reserved > 0 THEN 'held'
                WHEN g.delta_sold > 0 THEN 'sold'
                WHEN g.delta_available > 0 THEN 'available'
                ELSE 'gone' END AS expected
    FROM ledger g
    CROSS JOIN LATERAL unnest(g.units) AS x(unit_id)
    WHERE g.sku = :'sku' AND g.pool = :'pool' AND g.units IS NOT NULL
    ORDER BY x.unit_id, g.stock_version DESC, g.id DESC
)
SELECT u.id, u.status, u.pool, u.reservation_id,
       coalesce(s.expected, 'never named') AS ledger_says, s.kind AS ledger_kind, s.ledger_id,
       date_trunc('second', s.at) AS ledger_at, date_trunc('second', u.updated_at) AS unit_updated_at
FROM units u
LEFT JOIN said s ON s.unit_id = u.id
WHERE u.sku = :'sku'
  AND (u.pool = :'pool' OR s.unit_id IS NOT NULL)
  AND NOT coalesce((u.pool = :'pool' AND u.status = s.expected)
                   OR (s.expected = 'gone' AND (u.pool <> :'pool' OR u.status = 'retired')), false)
ORDER BY u.id COLLATE "C";

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset sku
\unset pool
