-- A bundle's low state stays in step with what it makes when a change to
-- a component is in flight while the bundle's threshold or definition is
-- written, and when a component's first stock at a location is.
--
-- A change to a stock row that is not watched (stock.bundle_watch) fires
-- nothing, so a row must be watched before any change that a crossing is
-- decided without. A threshold or a definition is written under the
-- bundles' lock (stockhold.bundle_low); the rows it needs are watched
-- before that lock is taken (waiting, like any change, for the changes in
-- flight on them: those commit first and are seen by the decision, the
-- later ones fire their check), then once more under it, without waiting,
-- for the rows created since (app/stock/bundle_thresholds.go).
--
--   stock_bundle_low_insert  now fires at the commit of every main pool
--                            created, watched or not: under the lock, it
--                            watches the row when a threshold committed
--                            since the row was created wants it (the
--                            BEFORE INSERT trigger decided by what it saw
--                            then), and decides the crossings.
--   bundle_low_check         takes the lock before it asks whether the
--                            row is watched by any threshold: a threshold
--                            written after that question but decided
--                            before this change commits would miss it.
--
-- Functions and a trigger replaced: catalog-only, under a short lock
-- timeout.

-- +goose Up
SET LOCAL lock_timeout = '5s';

-- +goose StatementBegin
-- bundle_low_decide decides, under the bundles' lock, the crossings that a
-- change to the main pool of sku at location (its stock version) made:
-- each bundle of which sku is a component, computed again where it has a
-- threshold that the change moves (that location, or every location for a
-- split component). From above the threshold to at or below it, a
-- crossing is recorded on this change; above it again, the bundle may
-- cross again.
CREATE FUNCTION bundle_low_decide(p_sku text, p_location text, p_pool text, p_version bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t record;
    v bigint;
    n bigint;
BEGIN
    FOR t IN
        SELECT bt.sku, bt.location, bt.threshold, bt.low FROM bundle_thresholds bt
        JOIN bundles d ON d.sku = bt.sku
        JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE bc.sku = p_sku AND (bt.location = p_location OR bc.split)
        ORDER BY bt.sku, bt.location
    LOOP
        v := bundle_available(t.sku, t.location);
        IF v <= t.threshold AND NOT t.low THEN
            UPDATE bundle_thresholds SET low = true, crossings = crossings + 1
            WHERE sku = t.sku AND location = t.location
            RETURNING crossings INTO n;
            INSERT INTO bundle_lows (sku, location, pool, stock_version, bundle_sku, bundle_location, threshold, available, crossing)
            VALUES (p_sku, p_location, p_pool, p_version, t.sku, t.location, t.threshold, v, n);
        ELSIF v > t.threshold AND t.low THEN
            UPDATE bundle_thresholds SET low = false WHERE sku = t.sku AND location = t.location;
        END IF;
    END LOOP;
END;
$$;

-- bundle_low_check, at the commit of a change to a watched row: under the
-- lock, each statement reads the commits made before it took the lock.
CREATE OR REPLACE FUNCTION bundle_low_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('stockhold.bundle_low'));
    PERFORM bundle_low_decide(NEW.sku, NEW.location, NEW.pool, NEW.version);
    RETURN NULL;
END;
$$;

-- bundle_low_insert_check, at the commit of a main pool's creation: under
-- the lock, it watches the row if a threshold wants it now, and decides.
CREATE FUNCTION bundle_low_insert_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('stockhold.bundle_low'));
    IF NOT bundle_watch_want(NEW.sku, NEW.location) THEN
        RETURN NULL;
    END IF;
    UPDATE stock SET bundle_watch = true
    WHERE sku = NEW.sku AND location = NEW.location AND pool = NEW.pool AND NOT bundle_watch;
    PERFORM bundle_low_decide(NEW.sku, NEW.location, NEW.pool, NEW.version);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER stock_bundle_low_insert ON stock;
CREATE CONSTRAINT TRIGGER stock_bundle_low_insert AFTER INSERT ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.pool = 'main')
    EXECUTE FUNCTION bundle_low_insert_check();

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP TRIGGER stock_bundle_low_insert ON stock;
CREATE CONSTRAINT TRIGGER stock_bundle_low_insert AFTER INSERT ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.bundle_watch)
    EXECUTE FUNCTION bundle_low_check();
DROP FUNCTION bundle_low_insert_check();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION bundle_low_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    t record;
    v bigint;
    n bigint;
BEGIN
    IF NOT bundle_watch_want(NEW.sku, NEW.location) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('stockhold.bundle_low'));
    FOR t IN
        SELECT bt.sku, bt.location, bt.threshold, bt.low FROM bundle_thresholds bt
        JOIN bundles d ON d.sku = bt.sku
        JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE bc.sku = NEW.sku AND (bt.location = NEW.location OR bc.split)
        ORDER BY bt.sku, bt.location
    LOOP
        v := bundle_available(t.sku, t.location);
        IF v <= t.threshold AND NOT t.low THEN
            UPDATE bundle_thresholds SET low = true, crossings = crossings + 1
            WHERE sku = t.sku AND location = t.location
            RETURNING crossings INTO n;
            INSERT INTO bundle_lows (sku, location, pool, stock_version, bundle_sku, bundle_location, threshold, available, crossing)
            VALUES (NEW.sku, NEW.location, NEW.pool, NEW.version, t.sku, t.location, t.threshold, v, n);
        ELSIF v > t.threshold AND t.low THEN
            UPDATE bundle_thresholds SET low = false WHERE sku = t.sku AND location = t.location;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION bundle_low_decide(text, text, text, bigint);
