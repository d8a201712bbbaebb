-- A hold's record of the units it took moves onto its lines:
-- reservation_lines.units, the ids of the units the line holds (or held,
-- or bought), byte-wise, written by the same INSERT as the line. A seat
-- held and given back wrote a row of reservation_units with two index
-- entries and two foreign-key checks, and rewrote it on release. Three
-- alternated runs of `make bench BENCH_FLAGS='-scenarios seats'` each:
-- seat holds made 0.24x to 0.25x a hot SKU's holds (2,000 seats) and 0.23x
-- to 0.25x (50,000) with it, 0.26x to 0.31x and 0.24x to 0.32x without.
--
-- What reservation_units guaranteed stays guaranteed elsewhere:
--   - a unit is held or bought by one hold at a time: a unit is one row
--     of units (its primary key) naming one hold (reservation_id, whose
--     foreign key stays), and the state machine trigger refuses giving a
--     held or sold unit another hold;
--   - which units a hold has: units.reservation_id while it holds or
--     bought them; which it took, once they went back: its lines' units,
--     and the ledger rows that name them (as before);
--   - a line of units has as many as its quantity: a CHECK on the line
--     (cardinality 0 for a line of quantities). It is added NOT VALID: the
--     lines already there got their units from reservation_units, where
--     reconciliation and the health check counted them; new and changed
--     lines are checked.
-- A partial release takes the units it gives back out of the line, as it
-- marked them part_released before; a line a partial release gives back
-- whole goes, its units named by the release_partial ledger row.
--
-- The new column has a constant default (a catalog change); the UPDATE
-- touches only the lines of units.

-- +goose Up
ALTER TABLE reservation_lines ADD COLUMN units text[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN reservation_lines.units IS 'The units with an identity this line holds (or held, or bought), their ids byte-wise; empty for a line of quantities. A partial release takes out those it gave back.';
UPDATE reservation_lines l SET units = u.units
FROM (SELECT ru.reservation_id, ru.sku, ru.location, ru.pool, array_agg(ru.unit_id ORDER BY ru.unit_id COLLATE "C") AS units
      FROM reservation_units ru WHERE NOT ru.part_released
      GROUP BY ru.reservation_id, ru.sku, ru.location, ru.pool) u
WHERE l.reservation_id = u.reservation_id AND l.sku = u.sku AND l.location = u.location AND l.pool = u.pool;
ALTER TABLE reservation_lines ADD CONSTRAINT reservation_lines_units CHECK (cardinality(units) IN (0, quantity)) NOT VALID;
DROP TABLE reservation_units;

-- +goose Down
CREATE TABLE reservation_units (
    reservation_id  uuid    NOT NULL REFERENCES reservations (id),
    sku             text    NOT NULL,
    unit_id         text    NOT NULL,
    pool            text    NOT NULL,
    live            boolean NOT NULL DEFAULT true,
    part_released   boolean NOT NULL DEFAULT false,
    location        text    NOT NULL DEFAULT 'default',
    PRIMARY KEY (reservation_id, sku, unit_id),
    FOREIGN KEY (sku, unit_id) REFERENCES units (sku, id)
);
COMMENT ON TABLE reservation_units IS 'Which units each hold took; live while it holds or bought them. A unit is live in at most one hold (reservation_units_live).';
ALTER TABLE reservation_units ADD CONSTRAINT reservation_units_part_released CHECK (NOT (live AND part_released));
CREATE UNIQUE INDEX reservation_units_live ON reservation_units (sku, unit_id) WHERE live;
-- What was given back by partial releases is not on the lines any more:
-- each line's units come back as the hold's, live while it holds or
-- bought them.
INSERT INTO reservation_units (reservation_id, sku, unit_id, pool, location, live)
SELECT l.reservation_id, l.sku, x.id, l.pool, l.location, r.status IN ('held', 'confirmed')
FROM reservation_lines l
JOIN reservations r ON r.id = l.reservation_id
CROSS JOIN LATERAL unnest(l.units) AS x(id);
ALTER TABLE reservation_lines DROP CONSTRAINT reservation_lines_units;
ALTER TABLE reservation_lines DROP COLUMN units;
