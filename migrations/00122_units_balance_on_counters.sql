-- A serialized pool's counters-vs-units check (migration 00120) runs at
-- commit for a stock row only when the transaction changed its counters
-- (or made it serialized): a pause, a resume or any other change of its
-- status leaves the counters as they were, so it is no longer refused
-- because the pool's units disagree with them. Reconciliation pauses
-- precisely the pools whose books are broken: with the check
-- on every update of the row, a pool whose units were changed behind the
-- triggers (session_replication_role = replica) could not be paused, and
-- no change to its counters can commit while they disagree, so nothing
-- that the check stood for is lost. The units' own trigger still checks
-- every pool whose units a transaction changes.
--
-- Replacing a trigger takes a short ACCESS EXCLUSIVE lock on stock; no
-- row is read or written.

-- +goose Up
DROP TRIGGER stock_units_balance ON stock;

CREATE CONSTRAINT TRIGGER stock_units_balance AFTER INSERT ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.serialized) EXECUTE FUNCTION units_balance();

CREATE CONSTRAINT TRIGGER stock_units_balance_counters AFTER UPDATE ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.serialized AND (NOT OLD.serialized
        OR (OLD.available, OLD.reserved, OLD.sold) IS DISTINCT FROM (NEW.available, NEW.reserved, NEW.sold)))
    EXECUTE FUNCTION units_balance();

-- +goose Down
DROP TRIGGER stock_units_balance_counters ON stock;
DROP TRIGGER stock_units_balance ON stock;
CREATE CONSTRAINT TRIGGER stock_units_balance AFTER INSERT OR UPDATE ON stock
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.serialized) EXECUTE FUNCTION units_balance();
