-- Incremental reconciliation. A run records its scope and the
-- xmin of the snapshot it checked: every ledger row it did not see was
-- written by a transaction at or above that xmin, so the next run finds
-- what moved since in ledger_feed (feed_xid, id), a range at the index's
-- right end, instead of probing the ledger once per stock row. A run
-- checks either the stock rows whose ledger moved since the last clean
-- run (incremental), or every row (full, on a slower schedule), or the
-- rows of some SKUs (a campaign's).

-- +goose Up
ALTER TABLE reconcile_runs
    ADD COLUMN scope text,
    ADD COLUMN snapshot_xmin xid8,
    ADD COLUMN since_xmin xid8,
    ADD CONSTRAINT reconcile_runs_scope CHECK (scope IN ('full', 'incremental', 'skus'));

COMMENT ON COLUMN reconcile_runs.scope IS 'full: every stock row; incremental: the rows whose ledger moved since the last clean run; skus: the rows of skus. Null until the run ends.';
COMMENT ON COLUMN reconcile_runs.snapshot_xmin IS 'xmin of the snapshot the run checked: a clean run''s watermark, from which the next run looks for ledger rows it did not see.';
COMMENT ON COLUMN reconcile_runs.since_xmin IS 'The watermark this run started from (the last clean run''s snapshot_xmin); null when it probed each row''s ledger from its checkpoint.';

-- The last clean run (over every SKU, no high-risk finding) is looked up
-- before each run.
CREATE INDEX reconcile_runs_clean ON reconcile_runs (finished_at DESC)
    WHERE status = 'succeeded' AND high_risk = 0 AND skus IS NULL AND snapshot_xmin IS NOT NULL;

-- +goose Down
DROP INDEX reconcile_runs_clean;
ALTER TABLE reconcile_runs
    DROP CONSTRAINT reconcile_runs_scope,
    DROP COLUMN since_xmin,
    DROP COLUMN snapshot_xmin,
    DROP COLUMN scope;
