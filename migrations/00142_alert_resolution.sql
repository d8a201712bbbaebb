-- An alert says how it was resolved: a books_out_of_balance alert is
-- resolved when its pool is resumed through the gate with its books
-- balanced, and says who resumed it and why; a webhook_failing alert when
-- a delivery succeeds again. A nullable column: a catalog change only.

-- +goose Up
ALTER TABLE alerts ADD COLUMN resolution text;
COMMENT ON COLUMN alerts.resolution IS 'How the alert was resolved (what fixed it, who, why), set when its status became resolved; null while open or acknowledged, and for alerts resolved before this column.';

-- +goose Down
ALTER TABLE alerts DROP COLUMN resolution;
