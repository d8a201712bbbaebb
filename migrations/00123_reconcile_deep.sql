-- A ledger row written after a checkpoint is summed whatever stock_version
-- it names: a checkpoint records the greatest ledger id its
-- counters sum (ledger_id), and a run sums the checkpoint plus the ledger
-- rows of its stock row with a greater id. Ledger ids are an identity, so
-- a row inserted later always has a greater one; before, a run summed the
-- rows with a greater stock_version, and a row inserted by hand at an
-- already checkpointed version was found by no run. And a deep run sums
-- each row's whole ledger, trusting no checkpoint (scope deep).
--
-- Checkpoints written before this have no ledger_id and count as none: the
-- first run that checks a row sums its whole ledger once and writes its
-- checkpoint again (on a large catalogue the first full run after the
-- upgrade costs what a first run did). Adding a nullable column without a
-- default rewrites nothing; the constraint swap reads reconcile_runs, a
-- small table.

-- +goose Up
ALTER TABLE ledger_checkpoints ADD COLUMN ledger_id bigint;
COMMENT ON COLUMN ledger_checkpoints.ledger_id IS 'The greatest ledger id the checkpoint''s counters sum: every ledger row of the stock row with a greater id came after it. Null (a checkpoint written before checkpoints recorded it): none.';

ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_scope;
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_scope CHECK (scope IN ('full', 'incremental', 'skus', 'deep'));
COMMENT ON COLUMN reconcile_runs.scope IS 'full: every stock row; incremental: the rows whose ledger moved since the last clean run; skus: the rows of skus; deep: every row (or those of skus), each summed over its whole ledger. Null until the run ends.';

-- +goose Down
ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_scope;
UPDATE reconcile_runs SET scope = 'full' WHERE scope = 'deep';
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_scope CHECK (scope IN ('full', 'incremental', 'skus'));
ALTER TABLE ledger_checkpoints DROP COLUMN ledger_id;
