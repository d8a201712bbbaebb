-- Archiving an old month of the ledger (stockhold ledger archive): the
-- month's partition is written to a compressed file, checked, and replaced
-- by a small partition of the same range that keeps what the books still
-- read, every row summed to the same totals:
--   - one row of kind carried per (sku, location, pool): the sum of the
--     month's rows it replaces, with the greatest id and stock_version of
--     them (so a checkpoint that summed them all leaves it out, as it left
--     them out) and no feed position (it is not an event);
--   - the rows kept as they were: the last row naming each unit of a
--     serialized pool (what reconciliation reads of units), and every row
--     of a hold the month did not close (its sum of delta_reserved there
--     is not 0: the hold goes on in a later month, whose rows pair with
--     these) or one of whose rows is kept (per hold, the ledger still
--     sums to its line).
-- Summed per stock row, the new partition equals the old one, so every
-- sum of the ledger (reconciliation, stock_health, a repair, the resume
-- gate) is unchanged. ledger_archives records each archive: its file and
-- checksums, the month's range, its greatest id and feed position (the
-- event feed and the ledger by SKU answer 410 for a cursor before them,
-- the daily report for a day before to_at).

-- +goose Up
SET LOCAL lock_timeout = '5s';

ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short',
        'inbound', 'inbound_receive', 'inbound_short', 'inbound_cancel', 'carried')) NOT VALID;

CREATE TABLE ledger_archives (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition     text        NOT NULL UNIQUE,
    from_at       timestamptz,
    to_at         timestamptz NOT NULL UNIQUE,
    rows          bigint      NOT NULL,
    kept          bigint      NOT NULL,
    carried       bigint      NOT NULL,
    max_id        bigint      NOT NULL,
    feed_xid      xid8        NOT NULL,
    feed_id       bigint      NOT NULL,
    file          text        NOT NULL,
    file_sha256   text        NOT NULL,
    data_sha256   text        NOT NULL,
    archived_by   text        NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    dropped_at    timestamptz
);
COMMENT ON TABLE ledger_archives IS 'Each month of the ledger archived to a file (stockhold ledger archive): its partition replaced by carried balances and the rows still read.';
COMMENT ON COLUMN ledger_archives.from_at IS 'Start of the archived range; null: from the beginning.';
COMMENT ON COLUMN ledger_archives.max_id IS 'The greatest ledger id archived (0: none): GET /v1/skus/{sku}/ledger answers 410 for a cursor at or below it.';
COMMENT ON COLUMN ledger_archives.feed_xid IS 'With feed_id, the greatest event feed position archived ((0, 0): none): the feed answers 410 for a cursor before it.';
COMMENT ON COLUMN ledger_archives.data_sha256 IS 'SHA-256 of the rows as written (CSV, before compression); file_sha256 of the file.';
COMMENT ON COLUMN ledger_archives.dropped_at IS 'When the archived partition was dropped; null while it is only detached.';

-- +goose StatementBegin
CREATE FUNCTION ledger_archive_build(part text, from_at timestamptz, to_at timestamptz) RETURNS TABLE (kept bigint, carried bigint)
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
CREATE FUNCTION ledger_archive_swap(part text, from_at timestamptz, to_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
-- Detaches part and attaches <part>_carried in its place, in the caller's
-- transaction: ACCESS EXCLUSIVE on the ledger for a moment (the caller sets
-- lock_timeout and retries).
BEGIN
    EXECUTE format('ALTER TABLE ledger DETACH PARTITION %I', part);
    IF from_at IS NULL THEN
        EXECUTE format('ALTER TABLE ledger ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', part || '_carried', to_at);
    ELSE
        EXECUTE format('ALTER TABLE ledger ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part || '_carried', from_at, to_at);
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ledger_archive_drop(part text) RETURNS void LANGUAGE plpgsql AS $$
-- Drops an archived partition once it is detached (never one attached).
BEGIN
    IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(part)) THEN
        RAISE EXCEPTION '% is still a partition of the ledger', part;
    END IF;
    EXECUTE format('DROP TABLE IF EXISTS %I', part);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ledger_restore_table(part text) RETURNS text LANGUAGE plpgsql AS $$
-- Makes (again) the empty table an archive of part is loaded into,
-- ledger_restored_<part>: the ledger's columns, no partition of it.
DECLARE
    name text := 'ledger_restored_' || part;
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I', name);
    EXECUTE format('CREATE TABLE %I (LIKE ledger INCLUDING DEFAULTS)', name);
    EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY IF EXISTS', name);
    RETURN name;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ledger_restore_check(part text, from_at timestamptz, to_at timestamptz) RETURNS TABLE (rows bigint, differ bigint)
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

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP FUNCTION ledger_restore_check;
DROP FUNCTION ledger_restore_table;
DROP FUNCTION ledger_archive_drop;
DROP FUNCTION ledger_archive_swap;
DROP FUNCTION ledger_archive_build;
DROP TABLE ledger_archives;
ALTER TABLE ledger
    DROP CONSTRAINT ledger_kind,
    ADD CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
        'rollback', 'transfer', 'pause', 'resume', 'repair',
        'move', 'loss', 'count', 'transfer_out', 'transfer_in', 'receive', 'transfer_cancel',
        'shortfall', 'sold_short',
        'inbound', 'inbound_receive', 'inbound_short', 'inbound_cancel')) NOT VALID;
