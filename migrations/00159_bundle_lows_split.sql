-- A split component of a bundle counts at every location together
-- (bundle_available), so a change to it at one location moves the
-- bundle's availability at every location: its crossings are looked for at
-- each location where the bundle has a threshold, and its main pools are
-- watched at every location. A crossing records the bundle's location
-- (bundle_lows.bundle_location), which a split component's change may
-- not share.
--
-- bundle_lows is small (one row per crossing): its key is rebuilt in
-- place, under a short lock timeout.

-- +goose Up
SET LOCAL lock_timeout = '5s';

ALTER TABLE bundle_lows ADD COLUMN bundle_location text;
UPDATE bundle_lows SET bundle_location = location;
ALTER TABLE bundle_lows ALTER COLUMN bundle_location SET NOT NULL;
ALTER TABLE bundle_lows DROP CONSTRAINT bundle_lows_pkey;
ALTER TABLE bundle_lows ADD PRIMARY KEY (sku, location, pool, stock_version, bundle_sku, bundle_location);
COMMENT ON COLUMN bundle_lows.bundle_location IS 'Where the bundle crossed its threshold (the threshold''s location); location is the changed component row''s.';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION bundle_watch_want(p_sku text, p_location text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM bundle_thresholds t
        JOIN bundles d ON d.sku = t.sku
        JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE bc.sku = p_sku AND (t.location = p_location OR bc.split))
$$;

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

-- +goose Down
SET LOCAL lock_timeout = '5s';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION bundle_watch_want(p_sku text, p_location text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM bundle_thresholds t
        JOIN bundles d ON d.sku = t.sku
        JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
        WHERE bc.sku = p_sku AND t.location = p_location)
$$;

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
DELETE FROM bundle_lows WHERE bundle_location <> location;
ALTER TABLE bundle_lows DROP CONSTRAINT bundle_lows_pkey;
ALTER TABLE bundle_lows ADD PRIMARY KEY (sku, location, pool, stock_version, bundle_sku);
ALTER TABLE bundle_lows DROP COLUMN bundle_location;
