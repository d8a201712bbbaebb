-- Units with an identity: seats, tickets, serial numbers. A pool
-- may hold units, each one unit of its counters with its own state:
--
--   available -> held -> sold
--                held -> available
--   available -> retired
--
-- A serialized pool changes only through its units (adding, retiring,
-- holding them), so that its counters always equal its units by status:
-- available, reserved (held), sold; retired units are out of the total.

-- +goose Up
ALTER TABLE stock ADD COLUMN serialized boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN stock.serialized IS 'The pool holds units with an identity (the units table): it changes only through them, and its counters equal its units by status.';

CREATE TABLE units (
    sku             text        NOT NULL,
    id              text        NOT NULL,
    pool            text        NOT NULL,
    -- A row or section, and a place within it: "two seats together" are
    -- two units of one group with consecutive positions.
    group_name      text,
    position        integer,
    attributes      jsonb       NOT NULL DEFAULT '{}',
    status          text        NOT NULL DEFAULT 'available',
    -- The hold that holds it, or bought it.
    reservation_id  uuid        REFERENCES reservations (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, id),
    FOREIGN KEY (sku, pool) REFERENCES stock (sku, pool),
    CONSTRAINT units_id_length CHECK (char_length(id) BETWEEN 1 AND 64),
    CONSTRAINT units_group_length CHECK (char_length(group_name) BETWEEN 1 AND 64),
    CONSTRAINT units_status CHECK (status IN ('available', 'held', 'sold', 'retired')),
    CONSTRAINT units_holder CHECK ((status IN ('held', 'sold')) = (reservation_id IS NOT NULL)),
    CONSTRAINT units_position_in_group CHECK (position IS NULL OR group_name IS NOT NULL),
    CONSTRAINT units_attributes_object CHECK (jsonb_typeof(attributes) = 'object')
);

COMMENT ON TABLE units IS 'One row per unit with an identity (a seat, a ticket, a serial number): available -> held -> sold, held -> available, available -> retired; never deleted.';

-- One unit per place: no two seats of a show at A-12.
CREATE UNIQUE INDEX units_place ON units (sku, group_name, position) WHERE position IS NOT NULL;
-- What a hold picks from: a pool's available units in seat order.
CREATE INDEX units_available ON units (sku, pool, group_name, position, id) WHERE status = 'available';
CREATE INDEX units_reservation ON units (reservation_id) WHERE reservation_id IS NOT NULL;

-- The state machine, enforced by the database whatever the code does.
-- +goose StatementBegin
CREATE FUNCTION units_transitions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'unit %/% cannot be deleted: retire it', OLD.sku, OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.sku <> OLD.sku OR NEW.id <> OLD.id THEN
        RAISE EXCEPTION 'unit %/% cannot change its identity', OLD.sku, OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.pool <> OLD.pool AND NOT (OLD.status = 'available' AND NEW.status = 'available') THEN
        RAISE EXCEPTION 'unit %/% is %: only an available unit moves to another pool', OLD.sku, OLD.id, OLD.status
            USING ERRCODE = 'check_violation';
    END IF;
    IF NOT (
        (OLD.status = NEW.status AND NEW.reservation_id IS NOT DISTINCT FROM OLD.reservation_id
             AND OLD.status IN ('available', 'held'))
        OR (OLD.status = 'available' AND NEW.status IN ('held', 'retired'))
        OR (OLD.status = 'held' AND NEW.status = 'sold' AND NEW.reservation_id = OLD.reservation_id)
        OR (OLD.status = 'held' AND NEW.status = 'available')
    ) THEN
        RAISE EXCEPTION 'unit %/% cannot go from % to %', OLD.sku, OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER units_transitions BEFORE UPDATE OR DELETE ON units
    FOR EACH ROW EXECUTE FUNCTION units_transitions();

-- The units of each hold, as the hold took them: the record of which units
-- a hold had once they went back or were sold. live while the hold holds
-- or bought the unit; the unique index keeps a unit in at most one live
-- hold, whatever writes the table.
CREATE TABLE reservation_units (
    reservation_id  uuid    NOT NULL REFERENCES reservations (id),
    sku             text    NOT NULL,
    unit_id         text    NOT NULL,
    pool            text    NOT NULL,
    live            boolean NOT NULL DEFAULT true,
    -- Given back by a partial release, while the hold kept the rest: no
    -- longer one of the hold's units.
    part_released   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (reservation_id, sku, unit_id),
    FOREIGN KEY (sku, unit_id) REFERENCES units (sku, id)
);

COMMENT ON TABLE reservation_units IS 'Which units each hold took; live while it holds or bought them. A unit is live in at most one hold (reservation_units_live).';

ALTER TABLE reservation_units ADD CONSTRAINT reservation_units_part_released CHECK (NOT (live AND part_released));

CREATE UNIQUE INDEX reservation_units_live ON reservation_units (sku, unit_id) WHERE live;

-- A serialized pool's counters equal its units by status, and units live
-- only in serialized pools: the database checks both at commit for every
-- pool whose stock row or units a transaction changed, so whatever a
-- statement decided, a transaction that leaves them apart does not commit.
-- Each pool is checked once per transaction (stockhold.balanced remembers
-- which), against the rows as the transaction leaves them (a deferred
-- event's NEW may be an earlier version).
CREATE INDEX units_pool_status ON units (sku, pool, status);

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

CREATE FUNCTION units_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM units_balance_check(NEW.sku, NEW.pool);
    IF TG_TABLE_NAME = 'units' AND TG_OP = 'UPDATE' AND OLD.pool <> NEW.pool THEN
        PERFORM units_balance_check(OLD.sku, OLD.pool);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER stock_units_balance AFTER INSERT OR UPDATE ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.serialized) EXECUTE FUNCTION units_balance();

CREATE CONSTRAINT TRIGGER units_balance AFTER INSERT OR UPDATE ON units
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION units_balance();

-- A ledger row that moved units names them.
ALTER TABLE ledger ADD COLUMN units text[];
COMMENT ON COLUMN ledger.units IS 'The units this movement moved, for a serialized pool (their ids, in order).';

-- +goose Down
ALTER TABLE ledger DROP COLUMN units;
DROP TRIGGER stock_units_balance ON stock;
DROP TABLE reservation_units;
DROP TABLE units;
DROP FUNCTION units_transitions();
DROP FUNCTION units_balance();
DROP FUNCTION units_balance_check(text, text);
ALTER TABLE stock DROP COLUMN serialized;
