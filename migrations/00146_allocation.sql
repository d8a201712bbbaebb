-- Allocation strategies and pickup. A hold line that names no location is
-- allocated among its pool's locations by a strategy: priority (lowest
-- priority number first, as before), most_stock (the location with the
-- most available that fills the line) or nearest (the location closest to
-- the hold's ship_to; priority breaks ties). So:
--
--   locations.latitude, locations.longitude
--                  where a location is, in degrees (both or neither; CHECK
--                  on their ranges), for nearest;
--   locations.pickup
--                  whether shoppers may collect there (click and collect:
--                  GET /v1/skus/{sku}/pickup lists those with stock);
--   api_keys.strategy
--                  the strategy of the key's holds that name none (null:
--                  priority).
--
-- Catalog-only changes under a short lock timeout: nullable columns and a
-- constant default, the CHECKs NOT VALID (no row already there breaks
-- them: every new column is null or false).

-- +goose Up
SET LOCAL lock_timeout = '5s';

ALTER TABLE locations
    ADD COLUMN latitude double precision,
    ADD COLUMN longitude double precision,
    ADD COLUMN pickup boolean NOT NULL DEFAULT false;
ALTER TABLE locations ADD CONSTRAINT locations_coordinates CHECK (
    (latitude IS NULL) = (longitude IS NULL)
    AND (latitude IS NULL OR latitude BETWEEN -90 AND 90)
    AND (longitude IS NULL OR longitude BETWEEN -180 AND 180)) NOT VALID;
COMMENT ON COLUMN locations.latitude IS 'Where the location is, in degrees north (with longitude, east): the nearest strategy allocates by distance to a hold''s ship_to.';
COMMENT ON COLUMN locations.pickup IS 'Shoppers may collect orders here (GET /v1/skus/{sku}/pickup).';

ALTER TABLE api_keys ADD COLUMN strategy text;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_strategy CHECK (strategy IN ('priority', 'most_stock', 'nearest')) NOT VALID;
COMMENT ON COLUMN api_keys.strategy IS 'The allocation strategy of this key''s holds that name none; null: priority.';

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE api_keys DROP COLUMN strategy;
ALTER TABLE locations DROP COLUMN pickup, DROP COLUMN longitude, DROP COLUMN latitude;
