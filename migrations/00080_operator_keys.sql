-- Operator actions record the credential that authenticated them beside the
-- operator the caller claims: any ops key could send {"operator": "alice"},
-- and only the claim was kept. The value is the API key's name (the API and
-- the console), or "db:" and the PostgreSQL user for the command line; null
-- for plain SQL jobs and the service acting on its own (reconciliation, a
-- campaign ending on time). Every column is nullable with no default, so
-- adding them rewrites nothing, the ledger included.

-- +goose Up
ALTER TABLE rollback_requests
    ADD COLUMN operator_key text,
    ADD COLUMN resumed_key text;
ALTER TABLE campaigns ADD COLUMN ended_key text;
ALTER TABLE alerts ADD COLUMN acked_key text;
ALTER TABLE ledger ADD COLUMN actor_key text;

COMMENT ON COLUMN rollback_requests.operator_key IS 'The API key (its name) that asked for the rollback, beside the operator it claimed; db:<user> from the CLI; null for a plain SQL job or a campaign''s end on time.';
COMMENT ON COLUMN rollback_requests.resumed_key IS 'The API key (its name) behind the last resume, beside resumed_by; db:<user> from the CLI; null when reconciliation resumed it.';
COMMENT ON COLUMN campaigns.ended_key IS 'The API key (its name) that ended the campaign early, beside ended_by; null when it ended on time.';
COMMENT ON COLUMN alerts.acked_key IS 'The API key (its name) that acknowledged the alert, beside acked_by.';
COMMENT ON COLUMN ledger.actor_key IS 'For adjustments, pauses and resumes: the API key (its name) that authenticated the change, beside actor; db:<user> for a CSV import from the CLI; null otherwise.';

-- +goose Down
ALTER TABLE ledger DROP COLUMN actor_key;
ALTER TABLE alerts DROP COLUMN acked_key;
ALTER TABLE campaigns DROP COLUMN ended_key;
ALTER TABLE rollback_requests
    DROP COLUMN resumed_key,
    DROP COLUMN operator_key;
