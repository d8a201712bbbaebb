-- name: LedgerAppend :execrows
-- LedgerAppend records a change the caller just made to a stock row in its
-- transaction: the row as it is now gives the version the change produced,
-- the counters after it and its event feed position (and, for a pool of
-- units with an identity, the units it moved).
INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    delta_quality_control, delta_damaged, delta_safety_stock, delta_incoming, delta_short, delta_backordered,
                    stock_version, reservation_id, actor, actor_key, reason, ref, units, refs,
                    feed_xid, total_after, available_after, reserved_after, sold_after,
                    quality_control_after, damaged_after, safety_stock_after, incoming_after)
SELECT s.sku, s.location, s.pool, @kind::text, @delta_total::bigint, @delta_available::bigint, @delta_reserved::bigint,
       @delta_sold::bigint, @delta_quality_control::bigint, @delta_damaged::bigint, @delta_safety_stock::bigint,
       @delta_incoming::bigint, @delta_short::bigint, @delta_backordered::bigint, s.version, sqlc.narg('reservation_id')::uuid, @actor::text, sqlc.narg('actor_key')::text,
       sqlc.narg('reason')::text, sqlc.narg('ref')::text, sqlc.narg('units')::text[], sqlc.narg('refs')::text[],
       s.feed_xid, s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming
FROM stock s
WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool;

-- name: LedgerMakePartitions :one
-- LedgerMakePartitions makes the ledger's monthly partitions through the
-- month ahead months after the current one (see
-- migrations/00149_ledger_partitioned.sql) and returns how many it made.
SELECT ledger_make_partitions(@ahead::int)::int AS made;

-- name: LedgerPartitions :many
-- LedgerPartitions lists the ledger's partitions in time order with their
-- bounds: from_at is 0001-01-01 UTC (Go's zero time) for the first, from
-- MINVALUE.
SELECT c.relname::text AS name,
       coalesce((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz,
                '0001-01-01 00:00:00+00')::timestamptz AS from_at,
       (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz AS to_at
FROM pg_catalog.pg_inherits i
JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'ledger'::regclass
ORDER BY 3;

-- name: LedgerArchiveBuild :one
-- LedgerArchiveBuild builds the partition that replaces an archived one
-- (see migrations/00150_ledger_archives.sql), not attached yet.
SELECT kept::bigint, carried::bigint FROM ledger_archive_build(@part::text, sqlc.narg('from_at')::timestamptz, @to_at::timestamptz);

-- name: LedgerArchiveSwap :exec
-- LedgerArchiveSwap puts the replacement in the archived partition's place;
-- the caller's transaction sets a short lock_timeout first.
SELECT ledger_archive_swap(@part::text, sqlc.narg('from_at')::timestamptz, @to_at::timestamptz);

-- name: LedgerArchiveDrop :exec
SELECT ledger_archive_drop(@part::text);

-- name: LockTimeoutLocal :exec
-- LockTimeoutLocal sets lock_timeout for the rest of the transaction.
SELECT set_config('lock_timeout', @timeout::text, true);

-- name: LedgerRangeSummary :one
-- LedgerRangeSummary counts the ledger rows from from_at (included) to
-- to_at (excluded) and gives their greatest id and greatest event feed
-- position ((0, 0): none).
SELECT count(*)::bigint AS rows,
       coalesce(max(g.id), 0)::bigint AS max_id,
       coalesce((SELECT f.feed_xid FROM ledger f WHERE f.at >= @from_at AND f.at < @to_at AND f.feed_xid IS NOT NULL
                 ORDER BY f.feed_xid DESC, f.id DESC LIMIT 1), '0'::xid8)::xid8 AS feed_xid,
       coalesce((SELECT f.id FROM ledger f WHERE f.at >= @from_at AND f.at < @to_at AND f.feed_xid IS NOT NULL
                 ORDER BY f.feed_xid DESC, f.id DESC LIMIT 1), 0)::bigint AS feed_id
FROM ledger g
WHERE g.at >= @from_at AND g.at < @to_at;

-- name: LedgerArchiveBlockers :one
-- LedgerArchiveBlockers counts what must end before the ledger up to to_at
-- is archived: transactions that began before it (they may still write
-- rows there), prepared ones, transfers in transit made before it (a
-- repair reads their ledger rows), and webhooks whose cursor is before the
-- feed position given (they would miss events).
SELECT (SELECT count(*) FROM pg_catalog.pg_stat_activity a
        WHERE a.datname = current_database() AND a.xact_start < @to_at::timestamptz AND a.pid <> pg_backend_pid())::bigint AS transactions,
       (SELECT count(*) FROM pg_catalog.pg_prepared_xacts p WHERE p.prepared < @to_at)::bigint AS prepared,
       (SELECT count(*) FROM transfers t WHERE t.status = 'in_transit' AND t.created_at < @to_at)::bigint AS transfers,
       (SELECT count(*) FROM webhooks w WHERE (w.cursor_xid, w.cursor_id) < (@feed_xid::xid8, @feed_id::bigint))::bigint AS webhooks;

-- name: LedgerArchiveRecord :one
INSERT INTO ledger_archives (partition, from_at, to_at, rows, kept, carried, max_id, feed_xid, feed_id,
                             file, file_sha256, data_sha256, archived_by)
VALUES (@partition, sqlc.narg('from_at'), @to_at, @rows, @kept, @carried, @max_id, @feed_xid, @feed_id,
        @file, @file_sha256, @data_sha256, @archived_by)
RETURNING *;

-- name: LedgerArchiveDropped :exec
UPDATE ledger_archives SET dropped_at = now() WHERE partition = @partition AND dropped_at IS NULL;

-- name: LedgerArchiveList :many
SELECT * FROM ledger_archives ORDER BY to_at;

-- name: LedgerArchived :one
-- LedgerArchived is how far the ledger is archived: the end of the newest
-- archived range, the greatest id and event feed position archived (zero
-- values: nothing is).
SELECT coalesce(max(a.to_at), '0001-01-01 00:00:00+00')::timestamptz AS to_at,
       coalesce(max(a.max_id), 0)::bigint AS max_id,
       coalesce((SELECT b.feed_xid FROM ledger_archives b ORDER BY b.feed_xid DESC, b.feed_id DESC LIMIT 1), '0'::xid8)::xid8 AS feed_xid,
       coalesce((SELECT b.feed_id FROM ledger_archives b ORDER BY b.feed_xid DESC, b.feed_id DESC LIMIT 1), 0)::bigint AS feed_id
FROM ledger_archives a;

-- name: LedgerRestoreTable :one
-- LedgerRestoreTable makes (again) the empty table an archive of part is
-- loaded into, and returns its name.
SELECT ledger_restore_table(@part::text)::text AS name;

-- name: LedgerRestoreCheck :one
-- LedgerRestoreCheck counts a loaded archive's rows and the stock rows
-- whose sums differ from the ledger's over the archived range.
SELECT rows::bigint, differ::bigint FROM ledger_restore_check(@part::text, sqlc.narg('from_at')::timestamptz, @to_at::timestamptz);

-- name: LedgerArchiveGet :one
SELECT * FROM ledger_archives WHERE partition = @partition;

-- name: LedgerCarriedPage :many
-- LedgerCarriedPage lists the balances an archive carried forward (rows of
-- kind carried, at the end of its range less a microsecond), by stock row,
-- after the stock row of the carried row after_id, of one SKU when sku is
-- given.
SELECT g.* FROM ledger g
WHERE g.at = @at::timestamptz AND g.kind = 'carried'
  AND (sqlc.narg('sku')::text IS NULL OR g.sku = sqlc.narg('sku')::text)
  AND (sqlc.narg('after_id')::bigint IS NULL
       OR (g.sku, g.location, g.pool) > (SELECT a.sku, a.location, a.pool FROM ledger a
                                         WHERE a.id = sqlc.narg('after_id')::bigint AND a.at = @at::timestamptz))
ORDER BY g.sku, g.location, g.pool
LIMIT @lim;
