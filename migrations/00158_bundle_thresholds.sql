-- Low-stock thresholds on bundles. A bundle has no stock row of its own:
-- its availability at a location is computed from its components' main
-- pools there (bundle_available, the figure GET /v1/skus/{sku} shows). Its
-- threshold fires on that value: stock.low is sent once each time a change
-- to a component takes it from above the threshold to at or below it.
--
--   bundle_thresholds  a bundle's threshold at a location, and whether it
--                      is low now (at or below since its last crossing):
--                      the state that makes an event once per crossing.
--   bundle_lows        each crossing, on the change that made it: the
--                      component's stock row and the version that change
--                      produced. The event feed serves it after that
--                      change's own events (app/events).
--   stock.bundle_watch true on the main pool of a component of a bundle
--                      with a threshold at that location: only those rows'
--                      changes are looked at, so a hold of any other SKU
--                      pays nothing but the trigger's WHEN.
--
-- Crossings are decided at commit (a deferred trigger), one transaction at
-- a time (a transaction-scoped advisory lock, taken only by transactions
-- that changed a watched row, at commit, after every row lock they take):
-- each sees the commits before it, so two racing holds of two components
-- of one bundle cannot both take it low. The lock is taken last and alone,
-- so it cannot deadlock.
--
-- Catalog-only changes under a short lock timeout: a column with a
-- constant default (no rewrite), new tables, functions and triggers.

-- +goose Up
SET LOCAL lock_timeout = '5s';

ALTER TABLE stock ADD COLUMN bundle_watch boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN stock.bundle_watch IS 'True on the main pool of a component of a bundle with a low-stock threshold at this location: its changes are checked for the bundle''s crossings (bundle_low_check).';

CREATE TABLE bundle_thresholds (
    sku        text        NOT NULL,
    location   text        NOT NULL,
    threshold  bigint      NOT NULL,
    -- At or below the threshold since the last crossing (or since it was
    -- set): no stock.low until it rises above again.
    low        boolean     NOT NULL,
    -- Crossings down so far: the version of the next stock.low is one more.
    crossings  bigint      NOT NULL DEFAULT 0,
    set_by     text        NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, location),
    CONSTRAINT bundle_thresholds_threshold CHECK (threshold >= 0)
);

COMMENT ON TABLE bundle_thresholds IS 'Low-stock thresholds of bundles, per location, on the availability computed from their components; low: at or below since the last crossing.';

CREATE TABLE bundle_lows (
    sku            text        NOT NULL,
    location       text        NOT NULL,
    pool           text        NOT NULL,
    stock_version  bigint      NOT NULL,
    bundle_sku     text        NOT NULL,
    threshold      bigint      NOT NULL,
    available      bigint      NOT NULL,
    crossing       bigint      NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, location, pool, stock_version, bundle_sku)
);

COMMENT ON TABLE bundle_lows IS 'Each crossing of a bundle''s low-stock threshold, on the component change (its stock row and the version it produced) that made it: a stock.low of the bundle in the event feed.';

-- +goose StatementBegin
-- bundle_available is what bundle b's current definition makes at location
-- loc: the least over its components of what is available of the
-- component's main pool there (a split component: at every location
-- together) divided by its quantity, rounded down; a paused pool has none,
-- and a location where no component has a main pool on sale, nothing.
-- As app/stock's bundleStock computes it for GET /v1/skus/{sku}.
CREATE FUNCTION bundle_available(b text, loc text) RETURNS bigint LANGUAGE sql STABLE AS $$
    WITH c AS (
        SELECT bc.sku, bc.quantity, bc.split
        FROM bundles d JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE d.sku = b
    ), r AS (
        SELECT s.sku, s.location, s.available FROM stock s
        WHERE s.sku IN (SELECT sku FROM c) AND s.pool = 'main' AND s.status = 'on_sale'
    )
    SELECT greatest(coalesce(min(coalesce(
        (SELECT sum(r.available) FROM r WHERE r.sku = c.sku AND (c.split OR r.location = loc)), 0)::bigint / c.quantity), 0), 0)::bigint
    FROM c
    WHERE EXISTS (SELECT 1 FROM r WHERE r.location = loc)
$$;

-- bundle_watch_want is whether the main pool of sku at loc is a component
-- of a bundle (its current definition) with a threshold at loc.
CREATE FUNCTION bundle_watch_want(p_sku text, p_location text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM bundle_thresholds t
        JOIN bundles d ON d.sku = t.sku
        JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE bc.sku = p_sku AND t.location = p_location)
$$;

CREATE FUNCTION stock_bundle_watch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.bundle_watch := bundle_watch_want(NEW.sku, NEW.location);
    RETURN NEW;
END;
$$;

-- bundle_low_check, at commit, for a change to a watched row: each bundle
-- with a threshold at its location that it is a component of is computed
-- again; from above the threshold to at or below it, a crossing is
-- recorded on this change; above it again, the bundle may cross again.
CREATE FUNCTION bundle_low_check() RETURNS trigger LANGUAGE plpgsql AS $$
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
        SELECT bt.sku, bt.threshold, bt.low FROM bundle_thresholds bt
        JOIN bundles d ON d.sku = bt.sku
        JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE bc.sku = NEW.sku AND bt.location = NEW.location
        ORDER BY bt.sku
    LOOP
        v := bundle_available(t.sku, NEW.location);
        IF v <= t.threshold AND NOT t.low THEN
            UPDATE bundle_thresholds SET low = true, crossings = crossings + 1
            WHERE sku = t.sku AND location = NEW.location
            RETURNING crossings INTO n;
            INSERT INTO bundle_lows (sku, location, pool, stock_version, bundle_sku, threshold, available, crossing)
            VALUES (NEW.sku, NEW.location, NEW.pool, NEW.version, t.sku, t.threshold, v, n);
        ELSIF v > t.threshold AND t.low THEN
            UPDATE bundle_thresholds SET low = false WHERE sku = t.sku AND location = NEW.location;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER stock_bundle_watch BEFORE INSERT ON stock
    FOR EACH ROW WHEN (NEW.pool = 'main') EXECUTE FUNCTION stock_bundle_watch();
CREATE CONSTRAINT TRIGGER stock_bundle_low_insert AFTER INSERT ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.bundle_watch)
    EXECUTE FUNCTION bundle_low_check();
CREATE CONSTRAINT TRIGGER stock_bundle_low_update AFTER UPDATE ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.bundle_watch AND (OLD.available, OLD.status) IS DISTINCT FROM (NEW.available, NEW.status))
    EXECUTE FUNCTION bundle_low_check();

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP TRIGGER stock_bundle_low_update ON stock;
DROP TRIGGER stock_bundle_low_insert ON stock;
DROP TRIGGER stock_bundle_watch ON stock;
DROP FUNCTION bundle_low_check();
DROP FUNCTION stock_bundle_watch();
DROP FUNCTION bundle_watch_want(text, text);
DROP FUNCTION bundle_available(text, text);
DROP TABLE bundle_lows;
DROP TABLE bundle_thresholds;
ALTER TABLE stock DROP COLUMN bundle_watch;
