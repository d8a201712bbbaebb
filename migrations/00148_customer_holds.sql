-- The holds of one customer, newest last: what a hold batch counts against
-- max_per_customer (see 00147), built CONCURRENTLY so that holds go on
-- while it builds. A build that fails leaves an INVALID index: drop it and
-- migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS reservations_customer ON reservations (customer_ref, created_at)
    WHERE customer_ref IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reservations_customer;
