-- The (sku, location, pool) keys' indexes, built CONCURRENTLY so that reads
-- and writes go on while they build (see 00134 for the whole upgrade). A
-- build that fails leaves an INVALID index: drop it and migrate again
-- (docs/OPERATIONS.md, "Upgrading to locations").

-- +goose NO TRANSACTION
-- +goose Up
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS stock_key ON stock (sku, location, pool);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS reservation_lines_key ON reservation_lines (reservation_id, sku, location, pool);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ledger_checkpoints_key ON ledger_checkpoints (sku, location, pool);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS stock_thresholds_key ON stock_thresholds (sku, location, pool, from_version);
CREATE INDEX CONCURRENTLY IF NOT EXISTS reservation_lines_row ON reservation_lines (sku, location, pool);
CREATE INDEX CONCURRENTLY IF NOT EXISTS ledger_row_version ON ledger (sku, location, pool, stock_version);
-- The rows with stock in transit to them, which reconciliation compares
-- with the transfers in transit (StockTransitMismatch) on every run: empty
-- until the first transfer, and small after.
CREATE INDEX CONCURRENTLY IF NOT EXISTS stock_incoming ON stock (sku, location, pool) WHERE incoming <> 0;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS stock_incoming;
DROP INDEX CONCURRENTLY IF EXISTS ledger_row_version;
DROP INDEX CONCURRENTLY IF EXISTS reservation_lines_row;
DROP INDEX CONCURRENTLY IF EXISTS stock_thresholds_key;
DROP INDEX CONCURRENTLY IF EXISTS ledger_checkpoints_key;
DROP INDEX CONCURRENTLY IF EXISTS reservation_lines_key;
DROP INDEX CONCURRENTLY IF EXISTS stock_key;
