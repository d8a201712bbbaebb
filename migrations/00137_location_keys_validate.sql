-- The constraints 00134 and 00136 added NOT VALID are validated (a scan
-- under SHARE UPDATE EXCLUSIVE: reads and writes go on), and the indexes
-- the old keys needed are dropped CONCURRENTLY. See 00134.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE stock VALIDATE CONSTRAINT stock_balanced;
ALTER TABLE stock VALIDATE CONSTRAINT stock_states_nonnegative;
ALTER TABLE stock VALIDATE CONSTRAINT stock_location_fkey;
ALTER TABLE reservation_lines VALIDATE CONSTRAINT reservation_lines_stock_fkey;
ALTER TABLE units VALIDATE CONSTRAINT units_stock_fkey;
ALTER TABLE stock_thresholds VALIDATE CONSTRAINT stock_thresholds_stock_fkey;
DROP INDEX CONCURRENTLY IF EXISTS ledger_sku_pool_version;
DROP INDEX CONCURRENTLY IF EXISTS reservation_lines_sku_pool;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS reservation_lines_sku_pool ON reservation_lines (sku, pool);
CREATE INDEX CONCURRENTLY IF NOT EXISTS ledger_sku_pool_version ON ledger (sku, pool, stock_version);
