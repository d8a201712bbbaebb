-- API key names are unique among keys in use: a name is the owner that
-- holds and idempotency keys are scoped to, so two live keys with one name
-- were one owner with two tokens, and `make run` made another dev-shop and
-- dev-ops on every run. A key can now be revoked at a time to come, so a
-- rotation leaves the old token working for a grace period (`stockhold
-- apikey rotate --grace`).

-- +goose Up
-- Where several live keys share a name, the newest keeps it; the older ones
-- keep working for seven days, then stop (`stockhold apikey list` shows
-- when). Nothing is cut off by the upgrade itself.
UPDATE api_keys k
SET revoked_at = now() + interval '7 days'
WHERE k.revoked_at IS NULL
  AND EXISTS (SELECT 1 FROM api_keys n WHERE n.name = k.name AND n.revoked_at IS NULL AND n.id > k.id);

CREATE UNIQUE INDEX api_keys_live_name ON api_keys (name) WHERE revoked_at IS NULL;

COMMENT ON COLUMN api_keys.revoked_at IS 'When the key stops working; null while it is in use. A time to come is a rotated key''s grace period. Live names are unique.';

-- +goose Down
DROP INDEX api_keys_live_name;
COMMENT ON COLUMN api_keys.revoked_at IS NULL;
