-- Stock where it really is: locations, the states stock can be
-- in besides available / reserved / sold, transfers between locations and
-- stock counts. The stock key becomes (sku, location, pool); every row
-- already there is at location 'default'.
--
-- How the upgrade avoids a long lock on a large stock table (and ledger,
-- reservation_lines, ledger_checkpoints), in four migrations:
--
--   00134 (this one, one transaction): only catalog changes. Every new
--         column has a constant default, which PostgreSQL 11+ records in
--         the catalog without rewriting the table: the rows already there
--         are at 'default', and so is a row written (by hand, say) that
--         names no location, as a request that names none is. New CHECK and
--         FOREIGN KEY constraints are added NOT VALID: checked for every
--         row written from now on, without scanning the rows already
--         there. Each ALTER takes its table's ACCESS EXCLUSIVE lock for a
--         moment; lock_timeout makes the migration fail (and be rerun)
--         rather than queue behind a long transaction with every request
--         queued behind it. Tables are altered in the order the service
--         locks them (stock, then lines, units, then the ledger).
--   00135 (no transaction): the new keys' unique indexes, built
--         CONCURRENTLY (reads and writes go on while they build).
--   00136 (one transaction): the primary keys swapped to those indexes
--         (ADD PRIMARY KEY USING INDEX: no scan, the columns are NOT NULL
--         already) and the foreign keys to stock re-added NOT VALID.
--   00137 (no transaction): VALIDATE CONSTRAINT for the constraints added
--         NOT VALID (a scan under SHARE UPDATE EXCLUSIVE, which blocks
--         neither reads nor writes), and the old ledger index dropped
--         CONCURRENTLY.
--
-- A CONCURRENTLY build that fails leaves an INVALID index behind: drop it
-- (docs/OPERATIONS.md, "Upgrading to locations") and migrate again.

-- +goose Up
SET LOCAL lock_timeout = '5s';

CREATE TABLE locations (
    id          text        PRIMARY KEY,
    name        text        NOT NULL,
    -- Allocation takes the lowest priority number first (ties by id).
    priority    integer     NOT NULL DEFAULT 0,
    -- An inactive location takes no new holds; its holds finish normally.
    active      boolean     NOT NULL DEFAULT true,
    -- A stop-sale of this location alone (PUT /v1/stop-sale with a
    -- location): while stop_sale_reason is set, new holds here answer 503.
    stop_sale_reason text,
    stop_sale_actor  text,
    stop_sale_key    text,
    stop_sale_at     timestamptz,
    created_by  text        NOT NULL,
    created_key text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text,
    updated_key text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT locations_id_length CHECK (char_length(id) BETWEEN 1 AND 64),
    CONSTRAINT locations_name_length CHECK (char_length(name) BETWEEN 1 AND 200)
);
COMMENT ON TABLE locations IS 'Places stock is at (a warehouse, a store, a venue). Holds allocate to active locations, lowest priority first.';
INSERT INTO locations (id, name, priority, created_by) VALUES ('default', 'Default', 0, 'system:upgrade');

-- Stock: where it is, and the states on hand that are not for sale.
ALTER TABLE stock
    ADD COLUMN location        text   NOT NULL DEFAULT 'default',
    ADD COLUMN quality_control bigint NOT NULL DEFAULT 0,
    ADD COLUMN damaged         bigint NOT NULL DEFAULT 0,
    ADD COLUMN safety_stock    bigint NOT NULL DEFAULT 0,
    ADD COLUMN incoming        bigint NOT NULL DEFAULT 0;
ALTER TABLE stock
    DROP CONSTRAINT stock_balanced,
    ADD CONSTRAINT stock_balanced CHECK (total = available + reserved + sold + quality_control + damaged + safety_stock) NOT VALID,
    ADD CONSTRAINT stock_states_nonnegative CHECK (quality_control >= 0 AND damaged >= 0 AND safety_stock >= 0 AND incoming >= 0) NOT VALID,
    ADD CONSTRAINT stock_location_fkey FOREIGN KEY (location) REFERENCES locations (id) NOT VALID;
COMMENT ON TABLE stock IS 'One row per (sku, location, pool); pool is main or a campaign id. total = available + reserved + sold + quality_control + damaged + safety_stock, always; incoming is on its way here, not yet on hand.';
COMMENT ON COLUMN stock.incoming IS 'Units in transit towards this location (open transfers to it, less what was received or written off): not on hand, not in total.';

ALTER TABLE reservation_lines ADD COLUMN location text NOT NULL DEFAULT 'default';

ALTER TABLE units ADD COLUMN location text NOT NULL DEFAULT 'default';
ALTER TABLE reservation_units ADD COLUMN location text NOT NULL DEFAULT 'default';

ALTER TABLE ledger
    ADD COLUMN location              text   NOT NULL DEFAULT 'default',
    ADD COLUMN delta_quality_control bigint NOT NULL DEFAULT 0,
    ADD COLUMN delta_damaged         bigint NOT NULL DEFAULT 0,
    ADD COLUMN delta_safety_stock    bigint NOT NULL DEFAULT 0,
    ADD COLUMN delta_incoming        bigint NOT NULL DEFAULT 0,
    ADD COLUMN quality_control_after bigint,
    ADD COLUMN damaged_after         bigint,
    ADD COLUMN safety_stock_after    bigint,
    ADD COLUMN incoming_after        bigint;
-- The rows already there have zero in the new deltas, so they meet the new
-- rules; like ledger_kind before them, these stay NOT VALID rather than
-- scan an append-only table for what cannot be there.
ALTER TABLE ledger
    DROP CONSTRAINT ledger_balanced,
    ADD CONSTRAINT ledger_balanced CHECK (delta_total = delta_available + delta_reserved + delta_sold
        + delta_quality_control + delta_damaged + delta_safety_stock) NOT VALID,
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel')) NOT VALID;
COMMENT ON TABLE ledger IS 'Append-only: one row per change to a stock row. Summed per (sku, location, pool), the deltas equal the counters.';

ALTER TABLE ledger_checkpoints
    ADD COLUMN location        text   NOT NULL DEFAULT 'default',
    ADD COLUMN quality_control bigint NOT NULL DEFAULT 0,
    ADD COLUMN damaged         bigint NOT NULL DEFAULT 0,
    ADD COLUMN safety_stock    bigint NOT NULL DEFAULT 0,
    ADD COLUMN incoming        bigint NOT NULL DEFAULT 0;

ALTER TABLE stock_thresholds ADD COLUMN location text NOT NULL DEFAULT 'default';

-- A campaign carves each allotment out of main at one location.
ALTER TABLE campaign_allotments ADD COLUMN location text NOT NULL DEFAULT 'default';
ALTER TABLE campaign_allotments
    DROP CONSTRAINT campaign_allotments_pkey,
    ADD CONSTRAINT campaign_allotments_pkey PRIMARY KEY (campaign, sku, location),
    ADD CONSTRAINT campaign_allotments_location_fkey FOREIGN KEY (location) REFERENCES locations (id);

ALTER TABLE reconcile_findings ADD COLUMN location text;
ALTER TABLE alerts ADD COLUMN location text;

-- A shop key bound to locations (a sales channel) allocates only there;
-- null: every location.
ALTER TABLE api_keys ADD COLUMN locations text[];
COMMENT ON COLUMN api_keys.locations IS 'The locations this key''s holds allocate from (a sales channel); null: all of them.';

-- Transfers: units leave available at from_location and are incoming at
-- to_location until received (available there), written off when the
-- transfer is closed short (ledger kind loss), or given back to
-- from_location by a cancel before any receipt.
CREATE TABLE transfers (
    id            uuid        PRIMARY KEY,
    sku           text        NOT NULL,
    pool          text        NOT NULL,
    from_location text        NOT NULL REFERENCES locations (id),
    to_location   text        NOT NULL REFERENCES locations (id),
    quantity      bigint      NOT NULL,
    received      bigint      NOT NULL DEFAULT 0,
    lost          bigint      NOT NULL DEFAULT 0,
    status        text        NOT NULL DEFAULT 'in_transit',
    reason        text        NOT NULL,
    actor         text        NOT NULL,
    actor_key     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    finished_by   text,
    finish_reason text,
    CONSTRAINT transfers_status CHECK (status IN ('in_transit', 'received', 'closed', 'cancelled')),
    CONSTRAINT transfers_places CHECK (from_location <> to_location),
    CONSTRAINT transfers_quantity CHECK (quantity > 0 AND received >= 0 AND lost >= 0 AND received + lost <= quantity),
    CONSTRAINT transfers_finished CHECK ((status = 'in_transit') = (finished_at IS NULL)),
    CONSTRAINT transfers_received CHECK (status <> 'received' OR (received = quantity AND lost = 0)),
    CONSTRAINT transfers_closed CHECK (status <> 'closed' OR received + lost = quantity),
    CONSTRAINT transfers_cancelled CHECK (status <> 'cancelled' OR (received = 0 AND lost = 0))
);
COMMENT ON TABLE transfers IS 'Stock moving between locations: per (sku, to_location), the open transfers'' quantity less received and lost equals stock.incoming there.';
CREATE INDEX transfers_in_transit ON transfers (created_at, id) WHERE status = 'in_transit';
CREATE INDEX transfers_to ON transfers (sku, to_location, pool) WHERE status = 'in_transit';

-- Stock counts: what was on the shelf, and the difference it made.
CREATE TABLE stock_counts (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku             text        NOT NULL,
    location        text        NOT NULL,
    pool            text        NOT NULL,
    -- counted: on the shelf and not sold (available + reserved +
    -- quality_control + damaged + safety_stock); on_shelf: what the
    -- counters said; difference = counted - on_shelf.
    counted         bigint      NOT NULL,
    on_shelf        bigint      NOT NULL,
    difference      bigint      NOT NULL,
    -- Held units the shelf could not cover (a forced count below held).
    short_of_held   bigint      NOT NULL DEFAULT 0,
    forced          boolean     NOT NULL DEFAULT false,
    reason          text        NOT NULL,
    actor           text        NOT NULL,
    actor_key       text,
    at              timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (location) REFERENCES locations (id),
    CONSTRAINT stock_counts_counted CHECK (counted >= 0 AND on_shelf >= 0 AND short_of_held >= 0),
    CONSTRAINT stock_counts_difference CHECK (difference = counted - on_shelf)
);
COMMENT ON TABLE stock_counts IS 'Each stock count: what was counted on the shelf, what the counters said, and the difference recorded (ledger kind count).';
CREATE INDEX stock_counts_sku ON stock_counts (sku, id);

-- A serialized pool's counters equal its units by status, now per (sku,
-- location, pool): the functions of migration 00120 again, with the key
-- (the triggers of 00120 and 00122 call units_balance, replaced in place).

-- +goose StatementBegin
CREATE FUNCTION units_balance_check(p_sku text, p_location text, p_pool text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    key text := E'\x1e' || p_sku || E'\x1f' || p_location || E'\x1f' || p_pool || E'\x1e';
    done text := coalesce(current_setting('stockhold.balanced', true), '');
    st stock%ROWTYPE;
    n_available bigint;
    n_held bigint;
    n_sold bigint;
    n_units bigint;
BEGIN
    IF position(key IN done) > 0 THEN
        RETURN;
    END IF;
    PERFORM set_config('stockhold.balanced', done || key, true);
    SELECT * INTO st FROM stock WHERE sku = p_sku AND location = p_location AND pool = p_pool;
    SELECT count(*) FILTER (WHERE status = 'available'), count(*) FILTER (WHERE status = 'held'),
           count(*) FILTER (WHERE status = 'sold'), count(*)
    INTO n_available, n_held, n_sold, n_units
    FROM units WHERE sku = p_sku AND location = p_location AND pool = p_pool;
    IF NOT FOUND OR st.sku IS NULL THEN
        RETURN;
    END IF;
    IF NOT st.serialized THEN
        IF n_units > 0 THEN
            RAISE EXCEPTION 'stock %/%/% has % units but is not serialized', p_sku, p_location, p_pool, n_units
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN;
    END IF;
    IF st.available <> n_available OR st.reserved <> n_held OR st.sold <> n_sold THEN
        RAISE EXCEPTION 'stock %/%/% counts available %, reserved %, sold %, but its units are % available, % held, % sold',
            p_sku, p_location, p_pool, st.available, st.reserved, st.sold, n_available, n_held, n_sold
            USING ERRCODE = 'check_violation';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION units_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM units_balance_check(NEW.sku, NEW.location, NEW.pool);
    IF TG_TABLE_NAME = 'units' AND TG_OP = 'UPDATE' AND (OLD.pool <> NEW.pool OR OLD.location <> NEW.location) THEN
        PERFORM units_balance_check(OLD.sku, OLD.location, OLD.pool);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION units_balance_check(text, text);

-- stock_health: per (sku, location, pool), the counters beside the lines
-- of held and confirmed holds and the ledger summed from the beginning,
-- every state included, and incoming beside the open transfers to it.
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

-- The protection rules count busy answers per stock row, so per location
-- too: a small table (an hour of periods at most).
ALTER TABLE trip_counts ADD COLUMN location text NOT NULL DEFAULT '';
ALTER TABLE trip_counts DROP CONSTRAINT trip_counts_pkey,
    ADD PRIMARY KEY (period, rule, instance, sku, location, pool);

-- +goose Down
SET LOCAL lock_timeout = '5s';
DELETE FROM trip_counts WHERE location NOT IN ('', 'default');
ALTER TABLE trip_counts DROP CONSTRAINT trip_counts_pkey,
    ADD PRIMARY KEY (period, rule, instance, sku, pool);
ALTER TABLE trip_counts DROP COLUMN location;
DROP VIEW stock_health;
CREATE VIEW stock_health AS
WITH lines AS (
    SELECT l.sku, l.pool,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'held'), 0)::bigint      AS held,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'confirmed'), 0)::bigint AS confirmed
    FROM reservation_lines l
    JOIN reservations r ON r.id = l.reservation_id
    GROUP BY l.sku, l.pool
), moves AS (
    SELECT sku, pool,
           sum(delta_total)::bigint     AS total,
           sum(delta_available)::bigint AS available,
           sum(delta_reserved)::bigint  AS reserved,
           sum(delta_sold)::bigint      AS sold
    FROM ledger
    GROUP BY sku, pool
)
SELECT s.sku, s.pool, s.status,
       s.total, s.available, s.reserved, s.sold,
       coalesce(l.held, 0)           AS lines_held,
       coalesce(l.confirmed, 0)      AS lines_confirmed,
       coalesce(m.total, 0)          AS ledger_total,
       coalesce(m.available, 0)      AS ledger_available,
       coalesce(m.reserved, 0)       AS ledger_reserved,
       coalesce(m.sold, 0)           AS ledger_sold,
       (s.total = s.available + s.reserved + s.sold
        AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0)                   AS counters_ok,
       (s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0))     AS lines_ok,
       (s.total = coalesce(m.total, 0) AND s.available = coalesce(m.available, 0)
        AND s.reserved = coalesce(m.reserved, 0) AND s.sold = coalesce(m.sold, 0))  AS ledger_ok,
       (s.total = s.available + s.reserved + s.sold
        AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0
        AND s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0)
        AND s.total = coalesce(m.total, 0) AND s.available = coalesce(m.available, 0)
        AND s.reserved = coalesce(m.reserved, 0) AND s.sold = coalesce(m.sold, 0)) AS ok
FROM stock s
LEFT JOIN lines l ON l.sku = s.sku AND l.pool = s.pool
LEFT JOIN moves m ON m.sku = s.sku AND m.pool = s.pool;

-- +goose StatementBegin
CREATE FUNCTION units_balance_check(p_sku text, p_pool text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    key text := E'\x1e' || p_sku || E'\x1f' || p_pool || E'\x1e';
    done text := coalesce(current_setting('stockhold.balanced', true), '');
    st stock%ROWTYPE;
    n_available bigint;
    n_held bigint;
    n_sold bigint;
    n_units bigint;
BEGIN
    IF position(key IN done) > 0 THEN
        RETURN;
    END IF;
    PERFORM set_config('stockhold.balanced', done || key, true);
    SELECT * INTO st FROM stock WHERE sku = p_sku AND pool = p_pool;
    SELECT count(*) FILTER (WHERE status = 'available'), count(*) FILTER (WHERE status = 'held'),
           count(*) FILTER (WHERE status = 'sold'), count(*)
    INTO n_available, n_held, n_sold, n_units
    FROM units WHERE sku = p_sku AND pool = p_pool;
    IF NOT FOUND OR st.sku IS NULL THEN
        RETURN;
    END IF;
    IF NOT st.serialized THEN
        IF n_units > 0 THEN
            RAISE EXCEPTION 'stock %/% has % units but is not serialized', p_sku, p_pool, n_units
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN;
    END IF;
    IF st.available <> n_available OR st.reserved <> n_held OR st.sold <> n_sold THEN
        RAISE EXCEPTION 'stock %/% counts available %, reserved %, sold %, but its units are % available, % held, % sold',
            p_sku, p_pool, st.available, st.reserved, st.sold, n_available, n_held, n_sold
            USING ERRCODE = 'check_violation';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION units_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM units_balance_check(NEW.sku, NEW.pool);
    IF TG_TABLE_NAME = 'units' AND TG_OP = 'UPDATE' AND OLD.pool <> NEW.pool THEN
        PERFORM units_balance_check(OLD.sku, OLD.pool);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION units_balance_check(text, text, text);

DROP TABLE stock_counts;
DROP TABLE transfers;
ALTER TABLE api_keys DROP COLUMN locations;
ALTER TABLE alerts DROP COLUMN location;
ALTER TABLE reconcile_findings DROP COLUMN location;
ALTER TABLE campaign_allotments
    DROP CONSTRAINT campaign_allotments_location_fkey,
    DROP CONSTRAINT campaign_allotments_pkey,
    ADD CONSTRAINT campaign_allotments_pkey PRIMARY KEY (campaign, sku),
    DROP COLUMN location;
ALTER TABLE stock_thresholds DROP COLUMN location;
ALTER TABLE ledger_checkpoints
    DROP COLUMN location, DROP COLUMN quality_control, DROP COLUMN damaged, DROP COLUMN safety_stock, DROP COLUMN incoming;
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair')) NOT VALID,
    DROP CONSTRAINT ledger_balanced,
    ADD CONSTRAINT ledger_balanced CHECK (delta_total = delta_available + delta_reserved + delta_sold),
    DROP COLUMN location, DROP COLUMN delta_quality_control, DROP COLUMN delta_damaged,
    DROP COLUMN delta_safety_stock, DROP COLUMN delta_incoming, DROP COLUMN quality_control_after,
    DROP COLUMN damaged_after, DROP COLUMN safety_stock_after, DROP COLUMN incoming_after;
ALTER TABLE reservation_units DROP COLUMN location;
ALTER TABLE units DROP COLUMN location;
ALTER TABLE reservation_lines DROP COLUMN location;
ALTER TABLE stock
    DROP CONSTRAINT stock_location_fkey,
    DROP CONSTRAINT stock_states_nonnegative,
    DROP CONSTRAINT stock_balanced,
    ADD CONSTRAINT stock_balanced CHECK (total = available + reserved + sold),
    DROP COLUMN location, DROP COLUMN quality_control, DROP COLUMN damaged, DROP COLUMN safety_stock, DROP COLUMN incoming;
DROP TABLE locations;
