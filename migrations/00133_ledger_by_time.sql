-- The daily report reads a day of the ledger by time.

-- +goose NO TRANSACTION
-- +goose Up

-- A BRIN index: the ledger is append-only and `at` is its transaction's
-- start, so rows lie on disk in nearly the order of `at`, and a summary per
-- 128 pages finds a day's rows reading little else. It costs a hold next
-- to nothing (no index entry per row, only a summary widened now and then),
-- where a B-tree would add an insert per ledger row, which is a fair part of
-- a hold's cost. Built CONCURRENTLY, so writes to the ledger go on while
-- it is built, however large it is.
CREATE INDEX CONCURRENTLY IF NOT EXISTS ledger_at ON ledger USING brin (at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS ledger_at;
