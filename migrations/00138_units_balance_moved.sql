-- A serialized pool's counters equal its units by status (migrations 00120
-- and 00134), checked at commit from what the transaction moved rather
-- than by counting the pool's units: the count grew with the
-- venue, inside the stock row's lock.
--
-- Each transaction keeps, per (sku, location, pool), how its units moved by
-- status less how its counters moved, in one transaction-local setting
-- (stockhold.units_moved, a JSON object; a savepoint rolled back takes its
-- part back with it). A statement-level trigger on units adds each
-- statement's units by status (new rows less old rows: one call per
-- statement, whatever it moved), a row-level trigger on a serialized
-- pool's stock row takes away its counters' change (before it, a pool
-- counted zero; units live only in serialized pools). The check is a
-- difference of zero for every pool: the deferred trigger on stock rows
-- (00122) runs it when counters changed, and a statement that leaves a
-- pool's units unbalanced queues one run of it at commit, through a row in
-- units_balance_due (a statement that moves units with their counters, as
-- the service's do, queues none). A pool starts balanced and every
-- transaction that commits leaves its difference unchanged, so counters
-- stay equal to units, in one statement or several. A transaction that
-- sets its constraints IMMEDIATE is checked at each statement: one that
-- moves units and counters in one statement may be refused then, never
-- one that leaves them apart let through.
--
-- Creating the triggers and the table takes short locks on units and stock;
-- no row is read or written.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION units_moved_add(p_sku text, p_location text, p_pool text, d_available bigint, d_held bigint, d_sold bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    k text := p_sku || E'\x1f' || p_location || E'\x1f' || p_pool;
    moved jsonb := coalesce(nullif(current_setting('stockhold.units_moved', true), ''), '{}')::jsonb;
    cur jsonb := moved -> k;
    a bigint := d_available;
    h bigint := d_held;
    s bigint := d_sold;
    queued boolean := false;
BEGIN
    IF cur IS NOT NULL THEN
        a := a + (cur ->> 0)::bigint;
        h := h + (cur ->> 1)::bigint;
        s := s + (cur ->> 2)::bigint;
        queued := (cur ->> 3)::boolean;
    END IF;
    IF a = 0 AND h = 0 AND s = 0 THEN
        PERFORM set_config('stockhold.units_moved', (moved - k)::text, true);
        RETURN false;
    END IF;
    PERFORM set_config('stockhold.units_moved', jsonb_set(moved, ARRAY[k], jsonb_build_array(a, h, s, true))::text, true);
    RETURN NOT queued;
END;
$$;

-- A row per pool a statement left unbalanced, whose deferred trigger runs
-- the check at commit and deletes it: no row of it ever commits.
CREATE UNLOGGED TABLE units_balance_due (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku       text NOT NULL,
    location  text NOT NULL,
    pool      text NOT NULL
);
COMMENT ON TABLE units_balance_due IS 'Pools whose units a statement moved without their counters: each row queues the counters-vs-units check at commit, which deletes it. Always empty outside a transaction.';

CREATE FUNCTION units_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        FOR r IN
            SELECT n.sku, n.location, n.pool, count(*) FILTER (WHERE n.status = 'available') AS a,
                   count(*) FILTER (WHERE n.status = 'held') AS h, count(*) FILTER (WHERE n.status = 'sold') AS s
            FROM new_units n GROUP BY n.sku, n.location, n.pool
        LOOP
            IF units_moved_add(r.sku, r.location, r.pool, r.a, r.h, r.s) THEN
                INSERT INTO units_balance_due (sku, location, pool) VALUES (r.sku, r.location, r.pool);
            END IF;
        END LOOP;
        RETURN NULL;
    END IF;
    FOR r IN
        SELECT x.sku, x.location, x.pool, sum(x.a) AS a, sum(x.h) AS h, sum(x.s) AS s
        FROM (
            SELECT n.sku, n.location, n.pool, (n.status = 'available')::int AS a, (n.status = 'held')::int AS h, (n.status = 'sold')::int AS s
            FROM new_units n
            UNION ALL
            SELECT o.sku, o.location, o.pool, -(o.status = 'available')::int, -(o.status = 'held')::int, -(o.status = 'sold')::int
            FROM old_units o
        ) x
        GROUP BY x.sku, x.location, x.pool
        HAVING sum(x.a) <> 0 OR sum(x.h) <> 0 OR sum(x.s) <> 0
    LOOP
        IF units_moved_add(r.sku, r.location, r.pool, r.a, r.h, r.s) THEN
            INSERT INTO units_balance_due (sku, location, pool) VALUES (r.sku, r.location, r.pool);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

-- A serialized pool's counters moved: they count against its units. A
-- pool that was not serialized counted zero.
CREATE FUNCTION stock_counters_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.serialized THEN
        PERFORM units_moved_add(NEW.sku, NEW.location, NEW.pool, OLD.available - NEW.available, OLD.reserved - NEW.reserved, OLD.sold - NEW.sold);
    ELSE
        PERFORM units_moved_add(NEW.sku, NEW.location, NEW.pool, -NEW.available, -NEW.reserved, -NEW.sold);
    END IF;
    RETURN NULL;
END;
$$;

-- The check: zero, or the transaction does not commit. What the units
-- are is told assuming the pool was balanced when the transaction began
-- (every committed one leaves it so).
CREATE OR REPLACE FUNCTION units_balance_check(p_sku text, p_location text, p_pool text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    cur jsonb := coalesce(nullif(current_setting('stockhold.units_moved', true), ''), '{}')::jsonb -> (p_sku || E'\x1f' || p_location || E'\x1f' || p_pool);
    st stock%ROWTYPE;
BEGIN
    IF cur IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO st FROM stock WHERE sku = p_sku AND location = p_location AND pool = p_pool;
    IF st.sku IS NULL OR NOT st.serialized THEN
        RAISE EXCEPTION 'units of %/%/% moved (% available, % held, % sold), but the pool is not serialized',
            p_sku, p_location, p_pool, cur ->> 0, cur ->> 1, cur ->> 2
            USING ERRCODE = 'check_violation';
    END IF;
    RAISE EXCEPTION 'stock %/%/% counts available %, reserved %, sold %, but its units are % available, % held, % sold',
        p_sku, p_location, p_pool, st.available, st.reserved, st.sold,
        st.available + (cur ->> 0)::bigint, st.reserved + (cur ->> 1)::bigint, st.sold + (cur ->> 2)::bigint
        USING ERRCODE = 'check_violation';
END;
$$;

CREATE FUNCTION units_balance_due_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM units_balance_check(NEW.sku, NEW.location, NEW.pool);
    DELETE FROM units_balance_due WHERE id = NEW.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER units_balance_due AFTER INSERT ON units_balance_due
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION units_balance_due_check();

-- The row-level check on every unit changed goes: a statement that leaves
-- units unbalanced queues its own.
DROP TRIGGER units_balance ON units;

CREATE TRIGGER units_moved_insert AFTER INSERT ON units
    REFERENCING NEW TABLE AS new_units
    FOR EACH STATEMENT EXECUTE FUNCTION units_moved();
CREATE TRIGGER units_moved_update AFTER UPDATE ON units
    REFERENCING OLD TABLE AS old_units NEW TABLE AS new_units
    FOR EACH STATEMENT EXECUTE FUNCTION units_moved();
CREATE TRIGGER stock_counters_moved_insert AFTER INSERT ON stock
    FOR EACH ROW WHEN (NEW.serialized)
    EXECUTE FUNCTION stock_counters_moved();
CREATE TRIGGER stock_counters_moved_update AFTER UPDATE ON stock
    FOR EACH ROW WHEN (NEW.serialized AND (NOT OLD.serialized
        OR (OLD.available, OLD.reserved, OLD.sold) IS DISTINCT FROM (NEW.available, NEW.reserved, NEW.sold)))
    EXECUTE FUNCTION stock_counters_moved();

-- +goose Down
CREATE CONSTRAINT TRIGGER units_balance AFTER INSERT OR UPDATE ON units
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION units_balance();
DROP TABLE units_balance_due;
DROP TRIGGER stock_counters_moved_update ON stock;
DROP TRIGGER stock_counters_moved_insert ON stock;
DROP TRIGGER units_moved_update ON units;
DROP TRIGGER units_moved_insert ON units;
DROP FUNCTION stock_counters_moved();
DROP FUNCTION units_balance_due_check();
DROP FUNCTION units_moved();
DROP FUNCTION units_moved_add(text, text, text, bigint, bigint, bigint);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION units_balance_check(p_sku text, p_location text, p_pool text) RETURNS void LANGUAGE plpgsql AS $$
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
-- +goose StatementEnd
