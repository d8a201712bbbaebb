-- The ledger becomes a table partitioned by month on `at` (PostgreSQL's
-- declarative partitioning), so that an old month can be archived and
-- dropped as a whole (detach, then drop: no row deleted) and each month's
-- indexes stay a month's size.
--
-- How the upgrade keeps serving holds: the table as it is becomes the
-- first partition, covering everything before a bound, and no row is
-- copied. In order, each step its own statement:
--   1. a unique index on (id, at), built CONCURRENTLY: a partitioned
--      table's primary key must include the partition key, so the new
--      primary key is (id, at) (ids stay unique: they come from one
--      identity);
--   2. CHECK (at < bound) NOT VALID, where bound is the first day of the
--      month after next (UTC): rows written while the upgrade runs stay
--      inside it. A constraint left from an interrupted upgrade whose
--      bound is less than 14 days away is replaced;
--   3. VALIDATE of that CHECK: a scan under SHARE UPDATE EXCLUSIVE, which
--      blocks neither reads nor writes; with it, attaching the table as
--      the partition (MINVALUE, bound) needs no scan;
--   4. the swap, in one short transaction under ACCESS EXCLUSIVE (taken
--      with lock_timeout 100 ms, retried for up to about 30 s, so that
--      holds wait at most 100 ms at a time behind the request): the table
--      is renamed ledger_before_YYYY_MM, its indexes renamed, its primary
--      key swapped to the (id, at) index, its identity handed to the new
--      partitioned `ledger` (same columns, defaults, comments, CHECKs,
--      indexes and triggers), to which it is attached: each of its
--      indexes matches the parent's and is attached, not rebuilt. The
--      months from the bound on get partitions of their own
--      (ledger_make_partitions). On an empty table (a new install) the
--      bound is moved back to the start of the current month, so that
--      monthly partitions start at once.
-- A view that reads the ledger (stock_health) is defined again on the
-- partitioned ledger. No foreign key points at the ledger; its readers (the event feed by
-- (feed_xid, id), the ledger by SKU, reconciliation, the daily report by
-- time, the console) read the parent and see every partition.
--
-- Partitions are made ahead, three months, by ledger_make_partitions: here
-- and by the periodic job ledger_partitions (at every start and every six
-- hours). There is no default partition: creating a partition next to a
-- default one scans the default under ACCESS EXCLUSIVE (every month, and
-- for as long as the default has rows, a long lock), and a table with a
-- default partition cannot DETACH CONCURRENTLY. A missing partition would
-- fail writes, so the job's failures raise alerts (a discarded job)
-- months before.
--
-- A build of step 1 that fails leaves an INVALID index ledger_id_at: drop
-- it and migrate again (docs/OPERATIONS.md). A swap that cannot take its
-- lock for 30 s (a long transaction reading the ledger) fails and changes
-- nothing: migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ledger_id_at ON ledger (id, at);

-- +goose StatementBegin
DO $$
DECLARE
    bound timestamptz := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months') AT TIME ZONE 'UTC';
    old timestamptz;
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    SELECT (regexp_match(pg_get_constraintdef(oid), '''([^'']+)'''))[1]::timestamptz INTO old
    FROM pg_constraint WHERE conrelid = 'ledger'::regclass AND conname = 'ledger_legacy_bound';
    IF old IS NOT NULL AND old >= now() + interval '14 days' THEN
        RETURN;
    END IF;
    IF old IS NOT NULL THEN
        ALTER TABLE ledger DROP CONSTRAINT ledger_legacy_bound;
    END IF;
    EXECUTE format('ALTER TABLE ledger ADD CONSTRAINT ledger_legacy_bound CHECK (at < %L::timestamptz) NOT VALID', bound);
END;
$$;
-- +goose StatementEnd

ALTER TABLE ledger VALIDATE CONSTRAINT ledger_legacy_bound;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_make_partitions(ahead integer) RETURNS integer LANGUAGE plpgsql AS $$
-- Makes the ledger's monthly partitions (ledger_YYYY_MM, months in UTC)
-- from the end of the last one through the month `ahead` months after the
-- current one, and returns how many it made. Each is created empty beside
-- the ledger, then attached: SHARE UPDATE EXCLUSIVE on the ledger, which
-- blocks neither reads nor writes.
DECLARE
    this_month timestamptz := date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    upto timestamptz := (date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => ahead + 1)) AT TIME ZONE 'UTC';
    m timestamptz;
    next timestamptz;
    name text;
    made integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('stockhold.ledger_partitions'));
    PERFORM set_config('lock_timeout', '5s', true);
    SELECT max((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz) INTO m
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'ledger'::regclass;
    m := greatest(coalesce(m, this_month), this_month);
    WHILE m < upto LOOP
        next := ((m AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
        name := 'ledger_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
        EXECUTE format('CREATE TABLE %I (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)', name);
        EXECUTE format('CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()', name);
        EXECUTE format('ALTER TABLE ledger ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, m, next);
        made := made + 1;
        m := next;
    END LOOP;
    RETURN made;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    bound timestamptz;
    legacy text;
    seq bigint;
    c record;
    v record;
    tries integer := 0;
BEGIN
    -- ACCESS EXCLUSIVE, asked for 100 ms at a time so that holds queue
    -- behind the request for no longer.
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            LOCK TABLE ledger IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            IF tries >= 100 THEN
                RAISE EXCEPTION 'the ledger stayed locked by other transactions for 30 s; migrate again';
            END IF;
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', '0', true);

    SELECT (regexp_match(pg_get_constraintdef(oid), '''([^'']+)'''))[1]::timestamptz INTO bound
    FROM pg_constraint WHERE conrelid = 'ledger'::regclass AND conname = 'ledger_legacy_bound' AND convalidated;
    IF bound IS NULL THEN
        RAISE EXCEPTION 'ledger_legacy_bound is missing or not validated';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ledger) THEN
        -- Nothing to keep apart: monthly partitions from this month.
        bound := date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
        ALTER TABLE ledger DROP CONSTRAINT ledger_legacy_bound;
        EXECUTE format('ALTER TABLE ledger ADD CONSTRAINT ledger_legacy_bound CHECK (at < %L::timestamptz)', bound);
    END IF;
    legacy := 'ledger_before_' || to_char(bound AT TIME ZONE 'UTC', 'YYYY_MM');

    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO seq FROM ledger_id_seq;
    ALTER TABLE ledger DROP CONSTRAINT ledger_pkey;
    ALTER TABLE ledger ADD CONSTRAINT ledger_legacy_pkey PRIMARY KEY USING INDEX ledger_id_at;
    ALTER TABLE ledger ALTER COLUMN id DROP IDENTITY;
    DROP TRIGGER ledger_append_only ON ledger;
    DROP TRIGGER ledger_no_truncate ON ledger;
    EXECUTE format('ALTER TABLE ledger RENAME TO %I', legacy);
    EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT ledger_legacy_pkey TO %I', legacy, legacy || '_pkey');
    EXECUTE format('ALTER INDEX ledger_at RENAME TO %I', legacy || '_at');
    EXECUTE format('ALTER INDEX ledger_feed RENAME TO %I', legacy || '_feed');
    EXECUTE format('ALTER INDEX ledger_reservation RENAME TO %I', legacy || '_reservation');
    EXECUTE format('ALTER INDEX ledger_row_version RENAME TO %I', legacy || '_row_version');
    EXECUTE format('ALTER INDEX ledger_sku_id RENAME TO %I', legacy || '_sku_id');

    EXECUTE format('CREATE TABLE ledger (LIKE %I INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS) PARTITION BY RANGE (at)', legacy);
    EXECUTE format('ALTER TABLE ledger ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME ledger_id_seq START WITH %s)', seq + 1);
    FOR c IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
             WHERE conrelid = legacy::regclass AND contype = 'c' AND conname <> 'ledger_legacy_bound' ORDER BY conname LOOP
        EXECUTE format('ALTER TABLE ledger ADD CONSTRAINT %I %s', c.conname, c.def);
    END LOOP;
    ALTER TABLE ledger ADD CONSTRAINT ledger_pkey PRIMARY KEY (id, at);
    CREATE INDEX ledger_at ON ledger USING brin (at);
    CREATE INDEX ledger_feed ON ledger (feed_xid, id) WHERE feed_xid IS NOT NULL;
    CREATE INDEX ledger_reservation ON ledger (reservation_id) WHERE reservation_id IS NOT NULL;
    CREATE INDEX ledger_row_version ON ledger (sku, location, pool, stock_version);
    CREATE INDEX ledger_sku_id ON ledger (sku, id);
    CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
        FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
    CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
        FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
    EXECUTE format('CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()', legacy);
    COMMENT ON TABLE ledger IS 'Append-only: one row per change to a stock row. Summed per (sku, location, pool), the deltas equal the counters. Partitioned by month on at (ledger_make_partitions).';
    EXECUTE format('ALTER TABLE ledger ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', legacy, bound);
    -- A view names the relation it reads (stock_health, the ledger
    -- summed): it would read the first partition alone. Each reads the
    -- ledger again.
    FOR v IN SELECT DISTINCT r.ev_class::regclass AS name FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
             WHERE d.refobjid = legacy::regclass AND r.ev_class <> legacy::regclass LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', v.name,
                       rtrim(regexp_replace(pg_get_viewdef(v.name), '\m' || legacy || '\M', 'ledger', 'g'), ';'));
    END LOOP;
    PERFORM ledger_make_partitions(3);
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- Back to one table, not online: the rows of the monthly partitions are
-- copied into the first partition, which becomes the table again.
-- +goose StatementBegin
DO $$
DECLARE
    legacy text;
    seq bigint;
    v record;
BEGIN
    LOCK TABLE ledger IN ACCESS EXCLUSIVE MODE;
    SELECT c.relname INTO legacy FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'ledger'::regclass AND pg_get_expr(c.relpartbound, c.oid) LIKE 'FOR VALUES FROM (MINVALUE)%';
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO seq FROM ledger_id_seq;
    EXECUTE format('ALTER TABLE ledger DETACH PARTITION %I', legacy);
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT ledger_legacy_bound', legacy);
    EXECUTE format('INSERT INTO %I SELECT * FROM ledger', legacy);
    FOR v IN SELECT DISTINCT r.ev_class::regclass AS name FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
             WHERE d.refobjid = 'ledger'::regclass AND r.ev_class <> 'ledger'::regclass LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', v.name,
                       rtrim(regexp_replace(pg_get_viewdef(v.name), '\mledger\M', legacy, 'g'), ';'));
    END LOOP;
    DROP TABLE ledger;
    EXECUTE format('ALTER TABLE %I RENAME TO ledger', legacy);
    EXECUTE format('ALTER TABLE ledger ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME ledger_id_seq START WITH %s)', seq + 1);
    EXECUTE format('ALTER TABLE ledger DROP CONSTRAINT %I', legacy || '_pkey');
    ALTER TABLE ledger ADD CONSTRAINT ledger_pkey PRIMARY KEY (id);
    EXECUTE format('ALTER INDEX %I RENAME TO ledger_at', legacy || '_at');
    EXECUTE format('ALTER INDEX %I RENAME TO ledger_feed', legacy || '_feed');
    EXECUTE format('ALTER INDEX %I RENAME TO ledger_reservation', legacy || '_reservation');
    EXECUTE format('ALTER INDEX %I RENAME TO ledger_row_version', legacy || '_row_version');
    EXECUTE format('ALTER INDEX %I RENAME TO ledger_sku_id', legacy || '_sku_id');
    DROP TRIGGER IF EXISTS ledger_append_only ON ledger;
    DROP TRIGGER IF EXISTS ledger_no_truncate ON ledger;
    CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
        FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
    CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
        FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
    COMMENT ON TABLE ledger IS 'Append-only: one row per change to a stock row. Summed per (sku, location, pool), the deltas equal the counters.';
END;
$$;
-- +goose StatementEnd

DROP FUNCTION ledger_make_partitions;
