-- One index on the ledger that leads with the SKU instead of two.
-- ledger_row_version (sku, location, pool, stock_version) and
-- ledger_sku_id (sku, id) each took an entry for every ledger row, and
-- over a large catalogue each entry lands on a leaf page no other row
-- touched since the last checkpoint, which PostgreSQL then writes whole to
-- WAL: about one full-page image per hold each. The readers of
-- ledger_row_version read ledger_sku_id now:
--   - the event feed finds the rows of one stock version (which share a
--     feed_xid) by a range of ids: from the first id of that feed_xid to
--     the row (ledger_feed gives the first and the last);
--   - the latest pause of a pool is its greatest id among its pauses (a
--     stock row's ledger ids grow with its versions: each is taken under
--     the row's lock).
--
-- DROP INDEX on a partitioned table cannot be CONCURRENTLY; it takes
-- ACCESS EXCLUSIVE on the ledger and its partitions for as long as it
-- takes to unlink the files. The lock is asked for 100 ms at a time
-- (holds wait behind the request for no longer), retried for up to about
-- 30 s, as the partitioning upgrade does.

-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    tries integer := 0;
BEGIN
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
    DROP INDEX IF EXISTS ledger_row_version;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- Not online: built on every partition under SHARE, which holds wait for.
CREATE INDEX IF NOT EXISTS ledger_row_version ON ledger (sku, location, pool, stock_version);

-- The first partition's index gets the name the partitioning's own Down
-- renames back.
-- +goose StatementBegin
DO $$
DECLARE
    legacy text;
    child text;
BEGIN
    SELECT c.relname INTO legacy FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'ledger'::regclass AND pg_get_expr(c.relpartbound, c.oid) LIKE 'FOR VALUES FROM (MINVALUE)%';
    IF legacy IS NULL THEN
        RETURN;
    END IF;
    SELECT c.relname INTO child FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'ledger_row_version'::regclass AND x.indrelid = legacy::regclass;
    IF child IS NOT NULL AND child <> legacy || '_row_version' THEN
        EXECUTE format('ALTER INDEX %I RENAME TO %I', child, legacy || '_row_version');
    END IF;
END;
$$;
-- +goose StatementEnd
