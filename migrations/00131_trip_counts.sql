-- The protection switch's rules count across every instance:
-- each process writes what it saw in a period, and one of them decides.

-- +goose Up

-- trip_counts is what each instance saw in one period of
-- STOCKHOLD_TRIP_INTERVAL (periods start at multiples of it, so every
-- instance names a period alike): per stock row, the requests it answered
-- busy (rule lock_waits); and its confirms (total) with how many were
-- slower than the target (n; rule confirm_latency: one row for all, with
-- sku and pool empty, and one per pool the slow ones named). Rows older
-- than an hour are deleted as periods are decided. New, small tables: no
-- lock on anything large.
CREATE TABLE trip_counts (
    period   timestamptz NOT NULL,
    rule     text        NOT NULL,
    instance text        NOT NULL,
    sku      text        NOT NULL DEFAULT '',
    pool     text        NOT NULL DEFAULT '',
    n        bigint      NOT NULL,
    total    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (period, rule, instance, sku, pool)
);

-- trip_periods is each rule's verdict on each period, decided once by
-- whichever instance first inserts it (the others' inserts conflict and
-- they do nothing): whether it was over its target, what was measured, and
-- who decided. A rule that must be over for several periods in a row reads
-- the rows of the periods before.
CREATE TABLE trip_periods (
    period     timestamptz NOT NULL,
    rule       text        NOT NULL,
    over       boolean     NOT NULL,
    details    jsonb       NOT NULL DEFAULT '{}',
    decided_by text        NOT NULL,
    decided_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (rule, period)
);

COMMENT ON TABLE trip_counts IS 'What each instance saw in a period of the protection rules (busy answers per stock row, confirms and the slow ones), summed across instances when the period is decided.';
COMMENT ON TABLE trip_periods IS 'Each protection rule''s verdict on each period, decided once across every instance.';

-- +goose Down
DROP TABLE trip_periods;
DROP TABLE trip_counts;
