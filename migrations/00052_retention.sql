-- Retention: the indexes the periodic retention job needs to find, a small
-- batch at a time, what is older than STOCKHOLD_RETENTION: ended holds
-- (released or expired) and idempotency records.

-- +goose Up
-- Only ended holds not yet deleted are in it, so it stays the size of the
-- retention period's releases; a release already changes an indexed column
-- (status), so it costs no HOT update.
CREATE INDEX reservations_ended_released_at ON reservations (released_at) WHERE status IN ('released', 'expired');
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- +goose Down
DROP INDEX idempotency_keys_created_at;
DROP INDEX reservations_ended_released_at;
