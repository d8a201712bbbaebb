-- A pool's available units in seat order, byte-wise (group COLLATE "C",
-- then position, then id), as every read in seat order asks for them
-- (UnitsFree, UnitsRuns, UnitsMovePool): those reads walk the index and
-- stop as soon as they have what they need, where units_available, in the
-- database's collation, made them sort every available unit of the pool
-- first unless that collation is "C". units_pool_status goes:
-- the counters-vs-units check it served counts no more (00138), and the
-- planner took it, over the primary key, to find a unit a change moves,
-- reading every held unit of the pool for each. Built and dropped
-- CONCURRENTLY, so holds go on meanwhile; a build that fails leaves an
-- INVALID index: drop it and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS units_seat_order ON units (sku, pool, group_name COLLATE "C", position, id COLLATE "C")
    WHERE status = 'available';
DROP INDEX CONCURRENTLY IF EXISTS units_available;
DROP INDEX CONCURRENTLY IF EXISTS units_pool_status;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS units_pool_status ON units (sku, pool, status);
CREATE INDEX CONCURRENTLY IF NOT EXISTS units_available ON units (sku, pool, group_name, position, id) WHERE status = 'available';
DROP INDEX CONCURRENTLY IF EXISTS units_seat_order;
