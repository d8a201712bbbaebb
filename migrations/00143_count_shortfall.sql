-- What a forced count finds missing of the held units: a
-- count below what holds hold could take only what was not held off the
-- shelf, and the held units it did not find came back as available when
-- their holds ended. Now the row carries them:
--
--   stock.short  the units inside reserved a count found missing (CHECK
--                0 <= short <= reserved, so no writer, at any concurrency,
--                leaves more missing than held). Every change that hands
--                held units back (release, partial release, expiry, the
--                sweeper, rollbacks, reconciliation: ReservationsChange)
--                pays it first: those units leave total (and short)
--                instead of returning to available, in a ledger row of
--                kind shortfall whose ref is the count. A confirm that
--                would leave more missing than held sells them: short
--                comes down to reserved, and a ledger row of kind
--                sold_short (and an alert) records the units sold while
--                counted missing.
--   ledger.delta_short, ledger_checkpoints.short
--                short is in the books like every state: its ledger
--                deltas sum to it, and reconciliation checks it.
--   stock_counts.available_change
--                what a count moved available by; short_of_held is what
--                is missing of the held units after it.
--
-- Catalog-only changes under a short lock timeout, as 00134: constant
-- defaults, the CHECK and the ledger's kinds NOT VALID (every row already
-- there has short 0; 00144 validates the CHECK without blocking writes).

-- +goose Up
SET LOCAL lock_timeout = '5s';

ALTER TABLE stock ADD COLUMN short bigint NOT NULL DEFAULT 0;
ALTER TABLE stock ADD CONSTRAINT stock_short CHECK (short >= 0 AND short <= reserved) NOT VALID;
COMMENT ON COLUMN stock.short IS 'Units inside reserved that a stock count found missing: they leave total as their holds hand them back (ledger kind shortfall), never back to available.';

ALTER TABLE ledger ADD COLUMN delta_short bigint NOT NULL DEFAULT 0;
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short')) NOT VALID;

ALTER TABLE ledger_checkpoints ADD COLUMN short bigint NOT NULL DEFAULT 0;

ALTER TABLE stock_counts ADD COLUMN available_change bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN stock_counts.short_of_held IS 'Held units the shelf did not have after the count (stock.short): owed by their holds, they leave the books as the holds end.';

DROP VIEW stock_health;
CREATE VIEW stock_health AS
WITH lines AS (
    SELECT l.sku, l.location, l.pool,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'held'), 0)::bigint      AS held,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'confirmed'), 0)::bigint AS confirmed
    FROM reservation_lines l
    JOIN reservations r ON r.id = l.reservation_id
    GROUP BY l.sku, l.location, l.pool
), moves AS (
    SELECT sku, location, pool,
           sum(delta_total)::bigint           AS total,
           sum(delta_available)::bigint       AS available,
           sum(delta_reserved)::bigint        AS reserved,
           sum(delta_sold)::bigint            AS sold,
           sum(delta_quality_control)::bigint AS quality_control,
           sum(delta_damaged)::bigint         AS damaged,
           sum(delta_safety_stock)::bigint    AS safety_stock,
           sum(delta_incoming)::bigint        AS incoming,
           sum(delta_short)::bigint           AS short
    FROM ledger
    GROUP BY sku, location, pool
), transit AS (
    SELECT sku, to_location AS location, pool, sum(quantity - received - lost)::bigint AS incoming
    FROM transfers
    WHERE status = 'in_transit'
    GROUP BY sku, to_location, pool
), health AS (
    SELECT s.sku, s.location, s.pool, s.status,
           s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short,
           coalesce(l.held, 0)             AS lines_held,
           coalesce(l.confirmed, 0)        AS lines_confirmed,
           coalesce(m.total, 0)            AS ledger_total,
           coalesce(m.available, 0)        AS ledger_available,
           coalesce(m.reserved, 0)         AS ledger_reserved,
           coalesce(m.sold, 0)             AS ledger_sold,
           coalesce(m.quality_control, 0)  AS ledger_quality_control,
           coalesce(m.damaged, 0)          AS ledger_damaged,
           coalesce(m.safety_stock, 0)     AS ledger_safety_stock,
           coalesce(m.incoming, 0)         AS ledger_incoming,
           coalesce(m.short, 0)            AS ledger_short,
           coalesce(t.incoming, 0)         AS in_transit,
           (s.total = s.available + s.reserved + s.sold + s.quality_control + s.damaged + s.safety_stock
            AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0 AND s.quality_control >= 0
            AND s.damaged >= 0 AND s.safety_stock >= 0 AND s.incoming >= 0
            AND s.short >= 0 AND s.short <= s.reserved)                                      AS counters_ok,
           (s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0))         AS lines_ok,
           ((s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short)
            = (coalesce(m.total, 0), coalesce(m.available, 0), coalesce(m.reserved, 0), coalesce(m.sold, 0),
               coalesce(m.quality_control, 0), coalesce(m.damaged, 0), coalesce(m.safety_stock, 0),
               coalesce(m.incoming, 0), coalesce(m.short, 0)))                                AS ledger_ok,
           (s.incoming = coalesce(t.incoming, 0))                                             AS transit_ok
    FROM stock s
    LEFT JOIN lines l ON l.sku = s.sku AND l.location = s.location AND l.pool = s.pool
    LEFT JOIN moves m ON m.sku = s.sku AND m.location = s.location AND m.pool = s.pool
    LEFT JOIN transit t ON t.sku = s.sku AND t.location = s.location AND t.pool = s.pool
)
SELECT h.*, (h.counters_ok AND h.lines_ok AND h.ledger_ok AND h.transit_ok) AS ok
FROM health h;

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP VIEW stock_health;
CREATE VIEW stock_health AS
WITH lines AS (
    SELECT l.sku, l.location, l.pool,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'held'), 0)::bigint      AS held,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'confirmed'), 0)::bigint AS confirmed
    FROM reservation_lines l
    JOIN reservations r ON r.id = l.reservation_id
    GROUP BY l.sku, l.location, l.pool
), moves AS (
    SELECT sku, location, pool,
           sum(delta_total)::bigint           AS total,
           sum(delta_available)::bigint       AS available,
           sum(delta_reserved)::bigint        AS reserved,
           sum(delta_sold)::bigint            AS sold,
           sum(delta_quality_control)::bigint AS quality_control,
           sum(delta_damaged)::bigint         AS damaged,
           sum(delta_safety_stock)::bigint    AS safety_stock,
           sum(delta_incoming)::bigint        AS incoming
    FROM ledger
    GROUP BY sku, location, pool
), transit AS (
    SELECT sku, to_location AS location, pool, sum(quantity - received - lost)::bigint AS incoming
    FROM transfers
    WHERE status = 'in_transit'
    GROUP BY sku, to_location, pool
), health AS (
    SELECT s.sku, s.location, s.pool, s.status,
           s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming,
           coalesce(l.held, 0)             AS lines_held,
           coalesce(l.confirmed, 0)        AS lines_confirmed,
           coalesce(m.total, 0)            AS ledger_total,
           coalesce(m.available, 0)        AS ledger_available,
           coalesce(m.reserved, 0)         AS ledger_reserved,
           coalesce(m.sold, 0)             AS ledger_sold,
           coalesce(m.quality_control, 0)  AS ledger_quality_control,
           coalesce(m.damaged, 0)          AS ledger_damaged,
           coalesce(m.safety_stock, 0)     AS ledger_safety_stock,
           coalesce(m.incoming, 0)         AS ledger_incoming,
           coalesce(t.incoming, 0)         AS in_transit,
           (s.total = s.available + s.reserved + s.sold + s.quality_control + s.damaged + s.safety_stock
            AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0 AND s.quality_control >= 0
            AND s.damaged >= 0 AND s.safety_stock >= 0 AND s.incoming >= 0)                  AS counters_ok,
           (s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0))         AS lines_ok,
           ((s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming)
            = (coalesce(m.total, 0), coalesce(m.available, 0), coalesce(m.reserved, 0), coalesce(m.sold, 0),
               coalesce(m.quality_control, 0), coalesce(m.damaged, 0), coalesce(m.safety_stock, 0),
               coalesce(m.incoming, 0)))                                                      AS ledger_ok,
           (s.incoming = coalesce(t.incoming, 0))                                             AS transit_ok
    FROM stock s
    LEFT JOIN lines l ON l.sku = s.sku AND l.location = s.location AND l.pool = s.pool
    LEFT JOIN moves m ON m.sku = s.sku AND m.location = s.location AND m.pool = s.pool
    LEFT JOIN transit t ON t.sku = s.sku AND t.location = s.location AND t.pool = s.pool
)
SELECT h.*, (h.counters_ok AND h.lines_ok AND h.ledger_ok AND h.transit_ok) AS ok
FROM health h;
ALTER TABLE stock_counts DROP COLUMN available_change;
ALTER TABLE ledger_checkpoints DROP COLUMN short;
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel')) NOT VALID;
ALTER TABLE ledger DROP COLUMN delta_short;
ALTER TABLE stock DROP CONSTRAINT stock_short, DROP COLUMN short;
