-- Preorders and backorders: a hold may promise units a (sku, location,
-- pool) does not have on hand yet, within its pool's backorder policy:
--
--   sku_backorders  per (sku, pool): below_zero, how many units each of the
--                   pool's stock rows may promise beyond what it has on
--                   hand whatever is on its way, and horizon_days (null:
--                   incoming is not counted), how far ahead the open
--                   inbound lines whose expected day falls within it, and
--                   the transfers in transit, may be promised too.
--   stock.backordered
--                   the units promised to held and confirmed holds that
--                   the row has not had on hand yet: not in total, nor in
--                   reserved or sold until a receipt fills them.
--   stock.backorder_limit, stock.backorder_horizon_days
--                   the pool's policy, kept on each of its rows (set with
--                   the policy; a row made later takes it from
--                   sku_backorders): the CHECK stock_backordered refuses,
--                   at any concurrency, a promise above below_zero plus
--                   (with a horizon) everything incoming, plus what is
--                   available (a hold takes what is available before it
--                   promises, so as it promises available is 0; a
--                   receipt's units wait there for holds it could not
--                   lock). The horizon is the hold batch's, under the
--                   row's lock.
--   ledger.delta_backordered, ledger.expected_on, ledger_checkpoints.backordered
--                   how each change moved backordered (a hold's promise, a
--                   release's return, a receipt's fill: kind
--                   backorder_fill, one row per hold filled), and the day
--                   a reserve's promised units are expected.
--   reservation_lines.backordered
--                   the line's units promised and not yet filled: the
--                   line holds (or sold) quantity - backordered of the
--                   row's reserved (sold).
--
-- Catalog-only changes under a short lock timeout: constant defaults, a
-- new table, the CHECKs NOT VALID (every row already there has 0
-- backordered; 00155 validates them without blocking writes).

-- +goose Up
SET LOCAL lock_timeout = '5s';

CREATE TABLE sku_backorders (
    sku          text        NOT NULL,
    pool         text        NOT NULL,
    below_zero   bigint      NOT NULL DEFAULT 0,
    horizon_days integer,
    set_by       text        NOT NULL,
    set_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, pool),
    CONSTRAINT sku_backorders_below_zero CHECK (below_zero BETWEEN 0 AND 1000000),
    CONSTRAINT sku_backorders_horizon CHECK (horizon_days BETWEEN 0 AND 366),
    CONSTRAINT sku_backorders_some CHECK (below_zero > 0 OR horizon_days IS NOT NULL)
);
COMMENT ON TABLE sku_backorders IS 'How far holds on a SKU''s pool may promise beyond what each of its stock rows has on hand: a row only while a policy is set.';

ALTER TABLE stock
    ADD COLUMN IF NOT EXISTS backordered bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS backorder_limit bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS backorder_horizon_days integer;
ALTER TABLE stock ADD CONSTRAINT stock_backordered CHECK (
    backordered >= 0 AND backorder_limit >= 0
    AND backordered <= backorder_limit + available + CASE WHEN backorder_horizon_days IS NULL THEN 0 ELSE incoming END) NOT VALID;
COMMENT ON COLUMN stock.backordered IS 'Units promised to held and confirmed holds that the row has not had on hand yet (not in total): receipts fill them, oldest confirmed first.';
COMMENT ON COLUMN stock.backorder_limit IS 'The pool''s backorder policy''s below_zero (sku_backorders), kept here for the CHECK stock_backordered.';
COMMENT ON COLUMN stock.backorder_horizon_days IS 'The pool''s backorder policy''s horizon (null: incoming is never promised), kept here for the CHECK stock_backordered.';

ALTER TABLE reservation_lines ADD COLUMN IF NOT EXISTS backordered bigint NOT NULL DEFAULT 0;
ALTER TABLE reservation_lines ADD CONSTRAINT reservation_lines_backordered
    CHECK (backordered >= 0 AND backordered <= quantity) NOT VALID;
COMMENT ON COLUMN reservation_lines.backordered IS 'Of the line''s quantity, the units promised and not yet on hand (stock.backordered): a receipt fills them.';

ALTER TABLE ledger
    ADD COLUMN IF NOT EXISTS delta_backordered bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS expected_on date;
ALTER TABLE ledger_checkpoints ADD COLUMN IF NOT EXISTS backordered bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN ledger.delta_backordered IS 'How the change moved stock.backordered: a hold''s promise (reserve), given back (release, expire, rollback), filled by a receipt (backorder_fill).';
COMMENT ON COLUMN ledger.expected_on IS 'A reserve that promised units: the day the delivery that fills its last promised unit is expected, as the hold was made (null: in transit, or promised below zero).';
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short',
        'inbound', 'inbound_receive', 'inbound_short', 'inbound_cancel', 'carried',
        'backorder_fill')) NOT VALID;

-- +goose StatementBegin
CREATE FUNCTION stock_backorder_policy() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lim bigint;
    horizon integer;
BEGIN
    SELECT b.below_zero, b.horizon_days INTO lim, horizon
    FROM sku_backorders b WHERE b.sku = NEW.sku AND b.pool = NEW.pool;
    IF FOUND THEN
        NEW.backorder_limit := lim;
        NEW.backorder_horizon_days := horizon;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER stock_backorder_policy BEFORE INSERT ON stock
    FOR EACH ROW EXECUTE FUNCTION stock_backorder_policy();

-- What a row may promise of what is on its way within days: the transfers
-- in transit to it (no expected day) and its open inbound lines expected
-- by then, each with what it has still to deliver.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stock_incoming_soon(p_sku text, p_location text, p_pool text, p_days integer)
RETURNS TABLE (expected_on date, quantity bigint) LANGUAGE sql STABLE AS $$
    SELECT NULL::date, t.quantity - t.received - t.lost
    FROM transfers t
    WHERE t.status = 'in_transit' AND t.sku = p_sku AND t.to_location = p_location AND t.pool = p_pool
    UNION ALL
    SELECT i.expected_on, l.quantity - l.received - l.short
    FROM inbound_lines l
    JOIN inbound i ON i.id = l.inbound_id
    WHERE i.status = 'open' AND l.sku = p_sku AND l.location = p_location AND l.pool = p_pool
      AND i.expected_on <= current_date + p_days
$$;
-- +goose StatementEnd

-- stock_health: held and confirmed lines count what they have on hand
-- (quantity - backordered); the promise counter is checked against the
-- lines' backordered, the ledger's delta_backordered and the policy.
DROP VIEW stock_health;
CREATE VIEW stock_health AS
WITH lines AS (
    SELECT l.sku, l.location, l.pool,
           coalesce(sum(l.quantity - l.backordered) FILTER (WHERE r.status = 'held'), 0)::bigint      AS held,
           coalesce(sum(l.quantity - l.backordered) FILTER (WHERE r.status = 'confirmed'), 0)::bigint AS confirmed,
           coalesce(sum(l.backordered) FILTER (WHERE r.status IN ('held', 'confirmed')), 0)::bigint AS promised
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
           sum(delta_short)::bigint           AS short,
           sum(delta_backordered)::bigint     AS backordered
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
           s.backordered,
           coalesce(l.promised, 0)         AS lines_backordered,
           coalesce(m.backordered, 0)      AS ledger_backordered,
           (s.total = s.available + s.reserved + s.sold + s.quality_control + s.damaged + s.safety_stock
            AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0 AND s.quality_control >= 0
            AND s.damaged >= 0 AND s.safety_stock >= 0 AND s.incoming >= 0
            AND s.short >= 0 AND s.short <= s.reserved)                                      AS counters_ok,
           (s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0))         AS lines_ok,
           ((s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short)
            = (coalesce(m.total, 0), coalesce(m.available, 0), coalesce(m.reserved, 0), coalesce(m.sold, 0),
               coalesce(m.quality_control, 0), coalesce(m.damaged, 0), coalesce(m.safety_stock, 0),
               coalesce(m.incoming, 0), coalesce(m.short, 0)))                                AS ledger_ok,
           (s.incoming = coalesce(t.incoming, 0))                                             AS transit_ok,
           (s.backordered = coalesce(l.promised, 0) AND s.backordered = coalesce(m.backordered, 0)
            AND s.backordered >= 0
            AND s.backordered <= s.backorder_limit + s.available
                                 + CASE WHEN s.backorder_horizon_days IS NULL THEN 0 ELSE s.incoming END)  AS promise_ok
    FROM stock s
    LEFT JOIN lines l ON l.sku = s.sku AND l.location = s.location AND l.pool = s.pool
    LEFT JOIN moves m ON m.sku = s.sku AND m.location = s.location AND m.pool = s.pool
    LEFT JOIN incoming_expected t ON t.sku = s.sku AND t.location = s.location AND t.pool = s.pool
)
SELECT h.*, (h.counters_ok AND h.lines_ok AND h.ledger_ok AND h.transit_ok AND h.promise_ok) AS ok
FROM health h;

-- An archived month carries each row's promises forward like its other
-- states, and keeps every row of a hold whose promise it did not close.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_archive_build(part text, from_at timestamptz, to_at timestamptz) RETURNS TABLE (kept bigint, carried bigint)
LANGUAGE plpgsql AS $$
-- Builds <part>_carried, the partition that replaces part (see above), not
-- attached: its rows, its primary key and an index for each of the
-- ledger's (so that attaching it builds nothing), and the CHECK of its
-- range (so that attaching it scans nothing). Made again if it exists.
DECLARE
    repl text := part || '_carried';
    i record;
    differ bigint;
    range text := CASE WHEN from_at IS NULL THEN format('at < %L::timestamptz', to_at)
                       ELSE format('at >= %L::timestamptz AND at < %L::timestamptz', from_at, to_at) END;
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I', repl);
    EXECUTE format('CREATE TABLE %I (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)', repl);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%s)', repl, repl || '_range', range);
    -- The rows kept: of holds the month did not close, and the last
    -- naming each unit.
    DROP TABLE IF EXISTS ledger_archive_kept;
    CREATE TEMPORARY TABLE ledger_archive_kept (id bigint PRIMARY KEY) ON COMMIT DROP;
    EXECUTE format($q$
        INSERT INTO ledger_archive_kept
        SELECT DISTINCT n.id FROM (
            SELECT DISTINCT ON (g.sku, g.location, g.pool, u.id) g.id
            FROM %1$I g CROSS JOIN LATERAL unnest(g.units) AS u(id)
            WHERE g.units IS NOT NULL
            ORDER BY g.sku, g.location, g.pool, u.id, g.stock_version DESC, g.id DESC) n$q$, part);
    -- With a hold's row, every row of that hold: per hold, the ledger
    -- still sums to what its line holds.
    EXECUTE format($q$
        INSERT INTO ledger_archive_kept
        SELECT g.id FROM %1$I g
        WHERE g.reservation_id IN (SELECT x.reservation_id FROM %1$I x WHERE x.reservation_id IS NOT NULL
                                   GROUP BY x.reservation_id HAVING sum(x.delta_reserved) <> 0 OR sum(x.delta_backordered) <> 0
                                   UNION
                                   SELECT x.reservation_id FROM %1$I x JOIN ledger_archive_kept k ON k.id = x.id
                                   WHERE x.reservation_id IS NOT NULL)
        ON CONFLICT (id) DO NOTHING$q$, part);
    EXECUTE format('INSERT INTO %I SELECT g.* FROM %I g WHERE EXISTS (SELECT 1 FROM ledger_archive_kept k WHERE k.id = g.id)', repl, part);
    GET DIAGNOSTICS kept = ROW_COUNT;
    EXECUTE format($q$
        INSERT INTO %I (id, at, sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                        delta_quality_control, delta_damaged, delta_safety_stock, delta_incoming, delta_short,
                        delta_backordered, stock_version, actor, reason, feed_xid)
        SELECT max(g.id), %L::timestamptz - interval '1 microsecond', g.sku, g.location, g.pool, 'carried',
               sum(g.delta_total), sum(g.delta_available), sum(g.delta_reserved), sum(g.delta_sold),
               sum(g.delta_quality_control), sum(g.delta_damaged), sum(g.delta_safety_stock), sum(g.delta_incoming),
               sum(g.delta_short), sum(g.delta_backordered), max(g.stock_version), 'system:archive',
               %L || count(*) || ' rows', NULL
        FROM %I g
        WHERE NOT EXISTS (SELECT 1 FROM ledger_archive_kept k WHERE k.id = g.id)
        GROUP BY g.sku, g.location, g.pool$q$, repl, to_at, 'carried forward from ' || part || ': ', part);
    GET DIAGNOSTICS carried = ROW_COUNT;
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id, at)', repl, repl || '_pkey');
    FOR i IN SELECT c.relname, pg_get_indexdef(x.indexrelid) AS def
             FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             WHERE x.indrelid = 'ledger'::regclass AND NOT x.indisprimary LOOP
        EXECUTE regexp_replace(i.def, '^CREATE (UNIQUE )?INDEX \S+ ON ONLY public\.ledger ',
                               format('CREATE \1INDEX %I ON %I ', repl || substr(i.relname, 7), repl));
    END LOOP;
    EXECUTE format('CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()', repl);
    -- Summed per stock row, the two are equal, or nothing is kept.
    EXECUTE format($q$
        SELECT count(*) FROM (
            (SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short), sum(delta_backordered)
             FROM %1$I GROUP BY 1, 2, 3
             EXCEPT
             SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short), sum(delta_backordered)
             FROM %2$I GROUP BY 1, 2, 3)
            UNION ALL
            (SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short), sum(delta_backordered)
             FROM %2$I GROUP BY 1, 2, 3
             EXCEPT
             SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short), sum(delta_backordered)
             FROM %1$I GROUP BY 1, 2, 3)) d$q$, part, repl) INTO differ;
    IF differ > 0 THEN
        RAISE EXCEPTION '% stock rows of % do not sum to what % carries', differ, part, repl;
    END IF;
    -- A checkpoint that summed only some of the rows a carried row sums
    -- would count the others twice: it sums the whole ledger next time.
    -- (Checkpoints written from now on sum every row: safe.)
    EXECUTE format($q$
        UPDATE ledger_checkpoints c SET ledger_id = NULL
        FROM %I k
        WHERE k.kind = 'carried' AND c.sku = k.sku AND c.location = k.location AND c.pool = k.pool AND c.ledger_id < k.id$q$, repl);
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_restore_check(part text, from_at timestamptz, to_at timestamptz) RETURNS TABLE (rows bigint, differ bigint)
LANGUAGE plpgsql AS $$
-- Checks a loaded archive against the ledger: its rows, summed per stock
-- row, against the ledger's rows of that range (the carried balances and
-- the rows kept), and counts the stock rows that differ.
DECLARE
    name text := 'ledger_restored_' || part;
    cols text := 'sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold), sum(delta_quality_control), '
                 'sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short), sum(delta_backordered)';
    live text := format('SELECT sku, location, pool, %s FROM ledger WHERE at >= %L AND at < %L GROUP BY 1, 2, 3',
                        cols, coalesce(from_at, '-infinity'), to_at);
    back text := format('SELECT sku, location, pool, %s FROM %I GROUP BY 1, 2, 3', cols, name);
BEGIN
    EXECUTE format('SELECT count(*) FROM %I', name) INTO rows;
    EXECUTE format('SELECT count(*) FROM ((%s EXCEPT %s) UNION ALL (%s EXCEPT %s)) d', live, back, back, live) INTO differ;
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd

-- +goose Down
SET LOCAL lock_timeout = '5s';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_archive_build(part text, from_at timestamptz, to_at timestamptz) RETURNS TABLE (kept bigint, carried bigint)
LANGUAGE plpgsql AS $$
-- Builds <part>_carried, the partition that replaces part (see above), not
-- attached: its rows, its primary key and an index for each of the
-- ledger's (so that attaching it builds nothing), and the CHECK of its
-- range (so that attaching it scans nothing). Made again if it exists.
DECLARE
    repl text := part || '_carried';
    i record;
    differ bigint;
    range text := CASE WHEN from_at IS NULL THEN format('at < %L::timestamptz', to_at)
                       ELSE format('at >= %L::timestamptz AND at < %L::timestamptz', from_at, to_at) END;
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I', repl);
    EXECUTE format('CREATE TABLE %I (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)', repl);
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%s)', repl, repl || '_range', range);
    -- The rows kept: of holds the month did not close, and the last
    -- naming each unit.
    DROP TABLE IF EXISTS ledger_archive_kept;
    CREATE TEMPORARY TABLE ledger_archive_kept (id bigint PRIMARY KEY) ON COMMIT DROP;
    EXECUTE format($q$
        INSERT INTO ledger_archive_kept
        SELECT DISTINCT n.id FROM (
            SELECT DISTINCT ON (g.sku, g.location, g.pool, u.id) g.id
            FROM %1$I g CROSS JOIN LATERAL unnest(g.units) AS u(id)
            WHERE g.units IS NOT NULL
            ORDER BY g.sku, g.location, g.pool, u.id, g.stock_version DESC, g.id DESC) n$q$, part);
    -- With a hold's row, every row of that hold: per hold, the ledger
    -- still sums to what its line holds.
    EXECUTE format($q$
        INSERT INTO ledger_archive_kept
        SELECT g.id FROM %1$I g
        WHERE g.reservation_id IN (SELECT x.reservation_id FROM %1$I x WHERE x.reservation_id IS NOT NULL
                                   GROUP BY x.reservation_id HAVING sum(x.delta_reserved) <> 0
                                   UNION
                                   SELECT x.reservation_id FROM %1$I x JOIN ledger_archive_kept k ON k.id = x.id
                                   WHERE x.reservation_id IS NOT NULL)
        ON CONFLICT (id) DO NOTHING$q$, part);
    EXECUTE format('INSERT INTO %I SELECT g.* FROM %I g WHERE EXISTS (SELECT 1 FROM ledger_archive_kept k WHERE k.id = g.id)', repl, part);
    GET DIAGNOSTICS kept = ROW_COUNT;
    EXECUTE format($q$
        INSERT INTO %I (id, at, sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                        delta_quality_control, delta_damaged, delta_safety_stock, delta_incoming, delta_short,
                        stock_version, actor, reason, feed_xid)
        SELECT max(g.id), %L::timestamptz - interval '1 microsecond', g.sku, g.location, g.pool, 'carried',
               sum(g.delta_total), sum(g.delta_available), sum(g.delta_reserved), sum(g.delta_sold),
               sum(g.delta_quality_control), sum(g.delta_damaged), sum(g.delta_safety_stock), sum(g.delta_incoming),
               sum(g.delta_short), max(g.stock_version), 'system:archive',
               %L || count(*) || ' rows', NULL
        FROM %I g
        WHERE NOT EXISTS (SELECT 1 FROM ledger_archive_kept k WHERE k.id = g.id)
        GROUP BY g.sku, g.location, g.pool$q$, repl, to_at, 'carried forward from ' || part || ': ', part);
    GET DIAGNOSTICS carried = ROW_COUNT;
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id, at)', repl, repl || '_pkey');
    FOR i IN SELECT c.relname, pg_get_indexdef(x.indexrelid) AS def
             FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             WHERE x.indrelid = 'ledger'::regclass AND NOT x.indisprimary LOOP
        EXECUTE regexp_replace(i.def, '^CREATE (UNIQUE )?INDEX \S+ ON ONLY public\.ledger ',
                               format('CREATE \1INDEX %I ON %I ', repl || substr(i.relname, 7), repl));
    END LOOP;
    EXECUTE format('CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()', repl);
    -- Summed per stock row, the two are equal, or nothing is kept.
    EXECUTE format($q$
        SELECT count(*) FROM (
            (SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short)
             FROM %1$I GROUP BY 1, 2, 3
             EXCEPT
             SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short)
             FROM %2$I GROUP BY 1, 2, 3)
            UNION ALL
            (SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short)
             FROM %2$I GROUP BY 1, 2, 3
             EXCEPT
             SELECT sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold),
                    sum(delta_quality_control), sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short)
             FROM %1$I GROUP BY 1, 2, 3)) d$q$, part, repl) INTO differ;
    IF differ > 0 THEN
        RAISE EXCEPTION '% stock rows of % do not sum to what % carries', differ, part, repl;
    END IF;
    -- A checkpoint that summed only some of the rows a carried row sums
    -- would count the others twice: it sums the whole ledger next time.
    -- (Checkpoints written from now on sum every row: safe.)
    EXECUTE format($q$
        UPDATE ledger_checkpoints c SET ledger_id = NULL
        FROM %I k
        WHERE k.kind = 'carried' AND c.sku = k.sku AND c.location = k.location AND c.pool = k.pool AND c.ledger_id < k.id$q$, repl);
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_restore_check(part text, from_at timestamptz, to_at timestamptz) RETURNS TABLE (rows bigint, differ bigint)
LANGUAGE plpgsql AS $$
-- Checks a loaded archive against the ledger: its rows, summed per stock
-- row, against the ledger's rows of that range (the carried balances and
-- the rows kept), and counts the stock rows that differ.
DECLARE
    name text := 'ledger_restored_' || part;
    cols text := 'sum(delta_total), sum(delta_available), sum(delta_reserved), sum(delta_sold), sum(delta_quality_control), '
                 'sum(delta_damaged), sum(delta_safety_stock), sum(delta_incoming), sum(delta_short)';
    live text := format('SELECT sku, location, pool, %s FROM ledger WHERE at >= %L AND at < %L GROUP BY 1, 2, 3',
                        cols, coalesce(from_at, '-infinity'), to_at);
    back text := format('SELECT sku, location, pool, %s FROM %I GROUP BY 1, 2, 3', cols, name);
BEGIN
    EXECUTE format('SELECT count(*) FROM %I', name) INTO rows;
    EXECUTE format('SELECT count(*) FROM ((%s EXCEPT %s) UNION ALL (%s EXCEPT %s)) d', live, back, back, live) INTO differ;
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd
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
DROP FUNCTION stock_incoming_soon(text, text, text, integer);
DROP TRIGGER stock_backorder_policy ON stock;
DROP FUNCTION stock_backorder_policy();
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short',
        'inbound', 'inbound_receive', 'inbound_short', 'inbound_cancel', 'carried')) NOT VALID;
ALTER TABLE ledger_checkpoints DROP COLUMN backordered;
ALTER TABLE ledger DROP COLUMN expected_on, DROP COLUMN delta_backordered;
ALTER TABLE reservation_lines DROP COLUMN backordered;
ALTER TABLE stock DROP CONSTRAINT stock_backordered,
    DROP COLUMN backorder_horizon_days, DROP COLUMN backorder_limit, DROP COLUMN backordered;
DROP TABLE sku_backorders;
