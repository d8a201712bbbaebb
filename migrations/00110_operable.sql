-- Operable: the protection switch for
-- everything (stop-sale), owners of alerts, repairs in the ledger, and the
-- reconciliations that follow an operator's action.

-- +goose Up

-- stop_sale is the switch for everything: while active, every new hold is
-- refused (503 stop_sale) and confirms, releases and reads go on. One row.
-- A hold batch takes pg_advisory_xact_lock_shared(hashtext('stockhold.stop_sale'))
-- and then reads this row in a later statement; flipping it takes the lock
-- exclusively, so once a flip has committed no batch that read the old
-- value is still running.
CREATE TABLE stop_sale (
    id         boolean     PRIMARY KEY DEFAULT true,
    active     boolean     NOT NULL DEFAULT false,
    reason     text,
    actor      text,
    actor_key  text,
    -- rule names the automatic trip that set it; null when a person did.
    rule       text,
    changed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stop_sale_one_row CHECK (id),
    CONSTRAINT stop_sale_reason CHECK (NOT active OR reason IS NOT NULL)
);
INSERT INTO stop_sale (id) VALUES (true);

COMMENT ON TABLE stop_sale IS 'The switch for everything: while active, new holds are refused (503 stop_sale); confirms, releases and reads go on. One row: who flipped it last, why, and the automatic rule if one did.';

-- Who handles an alert: take assigns an owner without closing the alert.
ALTER TABLE alerts
    ADD COLUMN owner text,
    ADD COLUMN owner_key text,
    ADD COLUMN taken_at timestamptz;

COMMENT ON COLUMN alerts.owner_key IS 'The API key that authenticated whoever took the alert, beside the owner they named.';
COMMENT ON COLUMN alerts.owner IS 'Who is handling the alert (POST /v1/alerts/{id}/take, or the console''s take); acknowledging sets it too when nobody had.';

-- Repairs of a pool whose counters disagree with its ledger are ledger rows
-- of their own. The old list is a subset of the new one, so the rows
-- already there need no check.
ALTER TABLE ledger DROP CONSTRAINT ledger_kind;
ALTER TABLE ledger ADD CONSTRAINT ledger_kind CHECK (kind IN (
    'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
    'rollback', 'transfer', 'pause', 'resume', 'repair')) NOT VALID;

-- A second reconciliation of a pool follows every repair, resume, manual
-- rollback and adjustment, recorded with what asked for it.
ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_trigger;
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_trigger CHECK (trigger IN (
    'periodic', 'http', 'cli', 'campaign_end', 'resume', 'repair', 'rollback', 'adjustment'));

-- A manual rollback's reconciliation of the SKUs it covered, recorded when
-- its last batch finishes, so its page can show the result.
ALTER TABLE rollback_requests ADD COLUMN reconcile_run_id bigint;
COMMENT ON COLUMN rollback_requests.reconcile_run_id IS 'The reconciliation of the SKUs a manual rollback covered, asked for by its last batch.';

-- Holds about to expire, soonest first (GET /v1/reservations?expires_before=):
-- reservations_held_expires_at (expires_at) WHERE status = 'held' serves it.
-- The console's recent confirmed orders, newest first:
CREATE INDEX reservations_confirmed_at ON reservations (confirmed_at) WHERE status = 'confirmed';

-- +goose Down
DROP INDEX reservations_confirmed_at;
ALTER TABLE rollback_requests DROP COLUMN reconcile_run_id;
ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_trigger;
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_trigger CHECK (trigger IN (
    'periodic', 'http', 'cli', 'campaign_end')) NOT VALID;
ALTER TABLE ledger DROP CONSTRAINT ledger_kind;
ALTER TABLE ledger ADD CONSTRAINT ledger_kind CHECK (kind IN (
    'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
    'rollback', 'transfer', 'pause', 'resume')) NOT VALID;
ALTER TABLE alerts DROP COLUMN taken_at, DROP COLUMN owner_key, DROP COLUMN owner;
DROP TABLE stop_sale;
