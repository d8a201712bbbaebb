-- Rollback cut-offs and resumes. Every rollback request records the instant
-- it was requested: it never touches a hold created at or after it, whatever
-- its scope (a SKU scope's held_before can only move the cut-off earlier).
-- A request whose chain of jobs was stranded (cancelled, deleted) and then
-- resumed, by reconciliation or by an operator, says how often, when and by
-- whom.

-- +goose Up
ALTER TABLE rollback_requests ADD COLUMN requested_at timestamptz;
-- Requests made before this migration were requested when they were created.
UPDATE rollback_requests SET requested_at = created_at;
ALTER TABLE rollback_requests
    ALTER COLUMN requested_at SET DEFAULT now(),
    ALTER COLUMN requested_at SET NOT NULL,
    ADD COLUMN resumes integer NOT NULL DEFAULT 0,
    ADD COLUMN resumed_at timestamptz,
    ADD COLUMN resumed_by text;

COMMENT ON COLUMN rollback_requests.requested_at IS 'When the rollback was asked for (a plain SQL job: when it was inserted). Holds created at or after it are never touched.';
COMMENT ON COLUMN rollback_requests.resumes IS 'How many times the request''s stranded chain of jobs was resumed (by reconciliation or POST /v1/rollbacks/{id}/resume).';

-- +goose Down
ALTER TABLE rollback_requests
    DROP COLUMN resumed_by,
    DROP COLUMN resumed_at,
    DROP COLUMN resumes,
    DROP COLUMN requested_at;
