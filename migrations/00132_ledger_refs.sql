-- Repairs name what they fix: a repair and a resume carry the
-- references of what they are about (order refs, hold ids, ledger ids, a
-- ticket), stored on their ledger row.

-- +goose Up

-- A nullable column with no default is added to the catalogue only: no
-- row is rewritten, and the ACCESS EXCLUSIVE lock on the ledger lasts a
-- moment, however large it is.
ALTER TABLE ledger ADD COLUMN refs text[];
COMMENT ON COLUMN ledger.refs IS 'What a repair or a resume is about, as the operator named it: order refs, hold ids, ledger ids, a ticket (POST /v1/skus/{sku}/repair and /resume, "refs").';

-- +goose Down
ALTER TABLE ledger DROP COLUMN refs;
