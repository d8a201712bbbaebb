-- Supplier inbound: a purchase order or shipment notice from a supplier
-- (its reference, the location it arrives at, the day it is expected) and
-- its lines (sku, pool, quantity). While it is open, every line's
-- outstanding units (quantity less received less short) are incoming at
-- its stock row, next to the transfers in transit there:
--
--   inbound        the notice; status open, then received (every line
--                  arrived whole), closed (the shortfall written off,
--                  recorded per line as short) or cancelled (before any
--                  receipt: nothing arrived, nothing is owed).
--   inbound_lines  one line per (sku, pool) of a notice; location is the
--                  notice's, kept on the line for its index.
--   incoming_expected
--                  per (sku, location, pool), what incoming must be: the
--                  transfers in transit plus the open inbound lines. The
--                  stock_health view, reconciliation and every step of a
--                  transfer or an inbound compare incoming with it.
--   ledger kinds   inbound (incoming added), inbound_receive (incoming
--                  into available), inbound_short (a close writes off
--                  what never came), inbound_cancel (incoming taken
--                  back); ref is the notice's id.
--
-- Catalog-only changes under a short lock timeout: new tables, views,
-- the ledger's kinds NOT VALID as 00143 left them (new rows are checked;
-- no row already there has a new kind).

-- +goose Up
SET LOCAL lock_timeout = '5s';

CREATE TABLE inbound (
    id            uuid        PRIMARY KEY,
    supplier_ref  text        NOT NULL,
    location      text        NOT NULL REFERENCES locations (id),
    expected_on   date        NOT NULL,
    status        text        NOT NULL DEFAULT 'open',
    reason        text        NOT NULL,
    actor         text        NOT NULL,
    actor_key     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    finished_by   text,
    finish_reason text,
    CONSTRAINT inbound_status CHECK (status IN ('open', 'received', 'closed', 'cancelled')),
    CONSTRAINT inbound_finished CHECK ((status = 'open') = (finished_at IS NULL))
);
COMMENT ON TABLE inbound IS 'Stock expected from a supplier at a location: while open, its lines'' outstanding units are incoming there.';
CREATE INDEX inbound_open ON inbound (expected_on, created_at, id) WHERE status = 'open';
CREATE INDEX inbound_expected ON inbound (expected_on, created_at, id);

CREATE TABLE inbound_lines (
    inbound_id uuid   NOT NULL REFERENCES inbound (id),
    sku        text   NOT NULL,
    location   text   NOT NULL,
    pool       text   NOT NULL,
    quantity   bigint NOT NULL,
    received   bigint NOT NULL DEFAULT 0,
    short      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (inbound_id, sku, pool),
    CONSTRAINT inbound_lines_quantity CHECK (quantity > 0 AND received >= 0 AND short >= 0 AND received + short <= quantity)
);
COMMENT ON COLUMN inbound_lines.short IS 'What a close wrote off of the line (ledger kind inbound_short): ordered, never received.';
CREATE INDEX inbound_lines_row ON inbound_lines (sku, location, pool);

CREATE VIEW incoming_expected AS
SELECT sku, location, pool, sum(outstanding)::bigint AS incoming
FROM (
    SELECT t.sku, t.to_location AS location, t.pool, t.quantity - t.received - t.lost AS outstanding
    FROM transfers t
    WHERE t.status = 'in_transit'
    UNION ALL
    SELECT l.sku, l.location, l.pool, l.quantity - l.received - l.short
    FROM inbound_lines l
    JOIN inbound i ON i.id = l.inbound_id
    WHERE i.status = 'open'
) x
GROUP BY sku, location, pool;
COMMENT ON VIEW incoming_expected IS 'Per stock row, what incoming must be: the transfers in transit to it plus the open inbound lines at it (invariant 8).';

ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short',
        'inbound', 'inbound_receive', 'inbound_short', 'inbound_cancel')) NOT VALID;

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
    LEFT JOIN incoming_expected t ON t.sku = s.sku AND t.location = s.location AND t.pool = s.pool
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
DROP VIEW incoming_expected;
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short')) NOT VALID;
DROP TABLE inbound_lines;
DROP TABLE inbound;
