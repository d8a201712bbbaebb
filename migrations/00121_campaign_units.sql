-- A campaign's allotment of a SKU of units with an identity may name the
-- units it carves out of main; without them it takes the first
-- available in seat order.

-- +goose Up
ALTER TABLE campaign_allotments ADD COLUMN units jsonb;
ALTER TABLE campaign_allotments ADD CONSTRAINT campaign_allotments_units
    CHECK (units IS NULL OR (jsonb_typeof(units) = 'array' AND jsonb_array_length(units) = quantity));
COMMENT ON COLUMN campaign_allotments.units IS 'The units (ids, a JSON array) the allotment carves out of main, for a SKU of units with an identity; null: quantity units in seat order.';

-- +goose Down
ALTER TABLE campaign_allotments DROP COLUMN units;
