-- Room on each page of stock and ledger_checkpoints for the next version
-- of its rows, so that a hold's update of its stock row (and a
-- reconciliation's of a checkpoint) is a HOT update: the new version on
-- the same page and no new entry in any index. Over a large catalogue an
-- index entry that a hold adds lands on a page no hold touched since the
-- last checkpoint, which PostgreSQL then writes whole to WAL; a full page
-- sends every update there. ALTER TABLE ... SET (fillfactor) takes SHARE
-- UPDATE EXCLUSIVE, which holds and reconciliation do not wait for, and
-- rewrites nothing: pages written from now on keep the room, rows already
-- packed get it as they move, or all at once by rewriting the table in a
-- quiet hour (see OPERATIONS.md, "A large catalogue").

-- +goose Up
ALTER TABLE stock SET (fillfactor = 90);
ALTER TABLE ledger_checkpoints SET (fillfactor = 90);

-- +goose Down
ALTER TABLE stock RESET (fillfactor);
ALTER TABLE ledger_checkpoints RESET (fillfactor);
