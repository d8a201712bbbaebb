-- A pool's available units in seat order, byte-wise (group COLLATE "C",
-- then position, then id), as every read in seat order asks for them
-- (UnitsFree, UnitsRuns, UnitsMovePool): those reads walk the index and
-- stop as soon as they have what they need, where units_available, in the
-- database's collation, made them sort every available unit of the pool
-- first unless that collation is "C" (issue 28). Built CONCURRENTLY, so
-- holds go on while it builds; a build that fails leaves an INVALID index:
-- drop it and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS units_seat_order ON units (sku, pool, group_name COLLATE "C", position, id COLLATE "C")
    WHERE status = 'available';
DROP INDEX CONCURRENTLY IF EXISTS units_available;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS units_available ON units (sku, pool, group_name, position, id) WHERE status = 'available';
DROP INDEX CONCURRENTLY IF EXISTS units_seat_order;
