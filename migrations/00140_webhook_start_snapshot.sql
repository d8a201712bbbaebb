-- A webhook remembers the snapshot it was created in, so that it is not
-- sent events whose transactions had committed before it existed: its
-- cursor starts at the feed's horizon (the oldest transaction still
-- running), and rows committed before the webhook but held back behind an
-- older open transaction come after that cursor. Null (webhooks made
-- before this migration) filters nothing. webhooks is a small table: the
-- new nullable column is a catalog change only.

-- +goose Up
ALTER TABLE webhooks ADD COLUMN start_snapshot text;
COMMENT ON COLUMN webhooks.start_snapshot IS 'pg_current_snapshot() (as text, read back as pg_snapshot) of the transaction that created the webhook: a ledger row whose writing transaction it shows as committed happened before the webhook and is not delivered.';

-- +goose Down
ALTER TABLE webhooks DROP COLUMN start_snapshot;
