-- The CHECKs 00154 added NOT VALID are validated: scans under SHARE
-- UPDATE EXCLUSIVE, which block neither reads nor writes. The lines with
-- units promised are indexed by stock row, for the receipts that fill
-- them (built concurrently: the table is large).

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE stock VALIDATE CONSTRAINT stock_backordered;
ALTER TABLE reservation_lines VALIDATE CONSTRAINT reservation_lines_backordered;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reservation_lines_promised ON reservation_lines (sku, location, pool)
    WHERE backordered > 0;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reservation_lines_promised;
