-- Stock adjustments in bulk (POST /v1/stock/adjustments and `stockhold
-- stock import`): set-based statements over parallel arrays, one per step
-- whatever the number of lines, and the record of CSV imports.

-- name: StockCreateMainMany :exec
-- StockCreateMainMany creates the main rows (sku at location) that do not
-- exist yet, empty, in the global lock order (byte-wise by SKU, then
-- location), so two bulk adjustments creating the same rows wait on each
-- other in one order instead of deadlocking. It changes nothing for rows
-- that exist.
INSERT INTO stock (sku, location, pool)
SELECT k.sku, k.location, 'main'
FROM (SELECT unnest(@skus::text[]) AS sku, unnest(@locations::text[]) AS location) k
ORDER BY k.sku COLLATE "C", k.location COLLATE "C"
ON CONFLICT (sku, location, pool) DO NOTHING;

-- name: StockLockForAdjust :many
-- StockLockForAdjust locks the stock rows named by the parallel arrays skus,
-- locations and pools in the global lock order, (sku, location, pool)
-- byte-wise, and returns them. Rows that do not exist are left out.
SELECT s.*
FROM stock s
JOIN (SELECT unnest(@skus::text[]) AS sku, unnest(@locations::text[]) AS location, unnest(@pools::text[]) AS pool) k
  ON s.sku = k.sku AND s.location = k.location AND s.pool = k.pool
ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C"
FOR UPDATE OF s;

-- name: StockAdjustMany :many
-- StockAdjustMany adds each delta to its row's total and available and
-- writes one ledger row per change (kind stock_in for a positive delta,
-- adjust for a negative one) with the version it produced and the counters
-- and event feed position after it, in one
-- statement. The caller has locked the rows and checked that available
-- covers every negative delta; the CHECK constraints refuse the statement
-- otherwise. refs holds each line's own ref ('' for none: the ref given).
WITH d AS (
    SELECT unnest(@skus::text[]) AS sku, unnest(@locations::text[]) AS location, unnest(@pools::text[]) AS pool,
           unnest(@deltas::bigint[]) AS delta, unnest(@refs::text[]) AS ref
), moved AS (
    UPDATE stock s
    SET total = s.total + d.delta,
        available = s.available + d.delta,
        version = s.version + 1,
        feed_xid = greatest(s.feed_xid, pg_current_xact_id()),
        updated_at = now()
    FROM d
    WHERE s.sku = d.sku AND s.location = d.location AND s.pool = d.pool
    RETURNING s.sku, s.location, s.pool, s.version, d.delta, d.ref, s.feed_xid, s.total, s.available, s.reserved, s.sold,
              s.quality_control, s.damaged, s.safety_stock, s.incoming
)
INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    stock_version, actor, actor_key, reason, ref,
                    feed_xid, total_after, available_after, reserved_after, sold_after,
                    quality_control_after, damaged_after, safety_stock_after, incoming_after)
SELECT m.sku, m.location, m.pool, CASE WHEN m.delta > 0 THEN 'stock_in' ELSE 'adjust' END,
       m.delta, m.delta, 0, 0, m.version, @actor::text, sqlc.narg('actor_key')::text, sqlc.narg('reason')::text,
       coalesce(nullif(m.ref, ''), sqlc.narg('ref')::text),
       m.feed_xid, m.total, m.available, m.reserved, m.sold, m.quality_control, m.damaged, m.safety_stock, m.incoming
FROM moved m
ORDER BY m.sku COLLATE "C", m.location COLLATE "C", m.pool COLLATE "C"
RETURNING id;

-- name: StockListBySKUs :many
-- StockListBySKUs returns every (location, pool) of the given SKUs, by SKU
-- (byte-wise), then as StockListBySKU orders one SKU's.
SELECT s.* FROM stock s
JOIN locations l ON l.id = s.location
WHERE s.sku = ANY(@skus::text[])
ORDER BY s.sku COLLATE "C", l.priority, s.location COLLATE "C", s.pool = 'main' DESC, s.pool COLLATE "C";

-- name: StockExportPage :many
-- StockExportPage returns up to lim stock rows after (after_sku,
-- after_location, after_pool) in the primary key's order: a keyset page
-- that walks the index, however many rows there are. Ended campaigns'
-- pools are left out, as in StockListBySKU.
SELECT * FROM stock
WHERE (sku, location, pool) > (@after_sku::text, @after_location::text, @after_pool::text)
  AND NOT (stock.pool <> 'main' AND stock.total = stock.sold AND stock.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = stock.pool AND c.status = 'rolled_back'))
ORDER BY sku, location, pool
LIMIT @lim;

-- name: StockImportLatest :one
-- StockImportLatest returns the latest run of import id.
SELECT * FROM stock_imports WHERE id = @id ORDER BY run DESC LIMIT 1;

-- name: StockImportsByContent :many
-- StockImportsByContent returns the latest run of every other import that
-- read the same rows, one per id: the import warns that they may be the
-- same restock.
SELECT DISTINCT ON (id) * FROM stock_imports
WHERE content_sha256 = @content_sha256 AND id <> @id
ORDER BY id, run DESC;

-- name: StockImportStart :one
-- StockImportStart records run of import id before its first chunk.
INSERT INTO stock_imports (id, run, file_name, format, total_rows, content_sha256, actor, actor_key)
VALUES (@id, @run, @file_name, @format, @total_rows, @content_sha256, @actor, sqlc.narg('actor_key'))
RETURNING *;

-- name: StockImportResume :one
-- StockImportResume records that a run goes on with the file just read,
-- whose first applied_rows rows are the ones it applied (the rows after
-- them may differ from the last attempt's, or be new): a finished run
-- given rows appended is unfinished again until they are applied, and an
-- unfinished one that had applied every row (it stopped just after its
-- last chunk) is finished.
UPDATE stock_imports
SET file_name = @file_name, format = @format, total_rows = @total_rows, content_sha256 = @content_sha256,
    actor = @actor, actor_key = sqlc.narg('actor_key'), updated_at = now(),
    finished_at = CASE WHEN applied_rows = @total_rows THEN coalesce(finished_at, now()) END
WHERE id = @id AND run = @run AND applied_rows <= @total_rows
RETURNING *;

-- name: StockImportAdvance :execrows
-- StockImportAdvance records, in a chunk's own transaction, that rows
-- from_row+1..to_row of run are applied, and finishes the run with its
-- last. It changes nothing unless exactly from_row rows were applied
-- before, so no row is applied twice in one run.
UPDATE stock_imports
SET applied_rows = @to_row, applied_sha256 = @applied_sha256, updated_at = now(),
    finished_at = CASE WHEN @to_row::integer = total_rows THEN now() END
WHERE id = @id AND run = @run AND applied_rows = @from_row AND finished_at IS NULL;

-- name: StockImportLock :one
-- StockImportLock takes the session lock that lets one CSV import run at a
-- time (false: another holds it). Imports that overlap must not apply the
-- same rows at once; the lock goes with the connection.
SELECT pg_try_advisory_lock(hashtext('stockhold.stock_import'));

-- name: StockImportWait :exec
-- StockImportWait waits for the import lock.
SELECT pg_advisory_lock(hashtext('stockhold.stock_import'));

-- name: StockImportUnlock :exec
SELECT pg_advisory_unlock(hashtext('stockhold.stock_import'));
