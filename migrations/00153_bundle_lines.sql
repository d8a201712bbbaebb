-- Hold lines taken for a bundle (see 00151): each component line records
-- the bundle line it came from, so that the answer says it, and the
-- definition it used stays readable whatever the bundle's definition
-- becomes.
--
--   reservation_lines.bundle_sku       the bundle the hold asked for
--   reservation_lines.bundle_quantity  how many bundles the hold asked for
--   reservation_lines.bundle_version   the version of the bundle's
--                                      definition the hold used
--                                      (bundle_components)
--
-- All three or none. Catalog-only changes under a short lock timeout:
-- nullable columns without defaults, and a check on new rows only (every
-- existing line has none).

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE reservation_lines ADD COLUMN IF NOT EXISTS bundle_sku text,
    ADD COLUMN IF NOT EXISTS bundle_quantity bigint,
    ADD COLUMN IF NOT EXISTS bundle_version bigint;
ALTER TABLE reservation_lines ADD CONSTRAINT reservation_lines_bundle CHECK (
    num_nulls(bundle_sku, bundle_quantity, bundle_version) IN (0, 3)
    AND bundle_quantity >= 1 AND bundle_version >= 1 AND bundle_sku <> sku) NOT VALID;
COMMENT ON COLUMN reservation_lines.bundle_sku IS 'The bundle this component line was held for (null: a line of the SKU itself); bundle_quantity and bundle_version say how many and by which definition.';

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE reservation_lines DROP COLUMN bundle_version, DROP COLUMN bundle_quantity, DROP COLUMN bundle_sku;
