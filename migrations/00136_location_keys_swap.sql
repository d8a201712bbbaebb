-- The primary keys become (sku, location, pool) (see 00134 for the whole
-- upgrade): each swaps to the unique index 00135 built, with no scan (its
-- columns are NOT NULL already), and the foreign keys to stock come back
-- on the new key NOT VALID (00137 validates them without blocking
-- writes). Catalog changes only: each table is locked for a moment.

-- +goose Up
SET LOCAL lock_timeout = '5s';

ALTER TABLE reservation_lines DROP CONSTRAINT reservation_lines_sku_pool_fkey;
ALTER TABLE units DROP CONSTRAINT units_sku_pool_fkey;
ALTER TABLE stock_thresholds DROP CONSTRAINT stock_thresholds_sku_pool_fkey;

ALTER TABLE stock DROP CONSTRAINT stock_pkey, ADD CONSTRAINT stock_pkey PRIMARY KEY USING INDEX stock_key;
ALTER TABLE reservation_lines
    DROP CONSTRAINT reservation_lines_pkey, ADD CONSTRAINT reservation_lines_pkey PRIMARY KEY USING INDEX reservation_lines_key;
ALTER TABLE ledger_checkpoints
    DROP CONSTRAINT ledger_checkpoints_pkey, ADD CONSTRAINT ledger_checkpoints_pkey PRIMARY KEY USING INDEX ledger_checkpoints_key;
ALTER TABLE stock_thresholds
    DROP CONSTRAINT stock_thresholds_pkey, ADD CONSTRAINT stock_thresholds_pkey PRIMARY KEY USING INDEX stock_thresholds_key;

ALTER TABLE reservation_lines ADD CONSTRAINT reservation_lines_stock_fkey
    FOREIGN KEY (sku, location, pool) REFERENCES stock (sku, location, pool) NOT VALID;
ALTER TABLE units ADD CONSTRAINT units_stock_fkey
    FOREIGN KEY (sku, location, pool) REFERENCES stock (sku, location, pool) NOT VALID;
ALTER TABLE stock_thresholds ADD CONSTRAINT stock_thresholds_stock_fkey
    FOREIGN KEY (sku, location, pool) REFERENCES stock (sku, location, pool) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE stock_thresholds DROP CONSTRAINT stock_thresholds_stock_fkey;
ALTER TABLE units DROP CONSTRAINT units_stock_fkey;
ALTER TABLE reservation_lines DROP CONSTRAINT reservation_lines_stock_fkey;

CREATE UNIQUE INDEX stock_thresholds_old_key ON stock_thresholds (sku, pool, from_version);
ALTER TABLE stock_thresholds
    DROP CONSTRAINT stock_thresholds_pkey, ADD CONSTRAINT stock_thresholds_pkey PRIMARY KEY USING INDEX stock_thresholds_old_key;
CREATE UNIQUE INDEX ledger_checkpoints_old_key ON ledger_checkpoints (sku, pool);
ALTER TABLE ledger_checkpoints
    DROP CONSTRAINT ledger_checkpoints_pkey, ADD CONSTRAINT ledger_checkpoints_pkey PRIMARY KEY USING INDEX ledger_checkpoints_old_key;
CREATE UNIQUE INDEX reservation_lines_old_key ON reservation_lines (reservation_id, sku, pool);
ALTER TABLE reservation_lines
    DROP CONSTRAINT reservation_lines_pkey, ADD CONSTRAINT reservation_lines_pkey PRIMARY KEY USING INDEX reservation_lines_old_key;
CREATE UNIQUE INDEX stock_old_key ON stock (sku, pool);
ALTER TABLE stock DROP CONSTRAINT stock_pkey, ADD CONSTRAINT stock_pkey PRIMARY KEY USING INDEX stock_old_key;

ALTER TABLE stock_thresholds ADD CONSTRAINT stock_thresholds_sku_pool_fkey FOREIGN KEY (sku, pool) REFERENCES stock (sku, pool);
ALTER TABLE units ADD CONSTRAINT units_sku_pool_fkey FOREIGN KEY (sku, pool) REFERENCES stock (sku, pool);
ALTER TABLE reservation_lines ADD CONSTRAINT reservation_lines_sku_pool_fkey FOREIGN KEY (sku, pool) REFERENCES stock (sku, pool);
