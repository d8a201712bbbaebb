-- Re-paging: an open alert that repeats after a quiet interval goes to the
-- webhook again. paged_at is when it last went out (or would have, with no
-- webhook configured); paged_occurrences is its occurrence count then, so
-- the raise that re-pages is the one whose count equals it.

-- +goose Up
ALTER TABLE alerts
    ADD COLUMN paged_at          timestamptz,
    ADD COLUMN paged_occurrences integer NOT NULL DEFAULT 1;
UPDATE alerts SET paged_at = first_seen_at;
ALTER TABLE alerts
    ALTER COLUMN paged_at SET NOT NULL,
    ALTER COLUMN paged_at SET DEFAULT now();

-- +goose Down
ALTER TABLE alerts
    DROP COLUMN paged_at,
    DROP COLUMN paged_occurrences;
