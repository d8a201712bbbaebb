-- The CHECK 00143 added NOT VALID is validated: a scan under SHARE
-- UPDATE EXCLUSIVE, which blocks neither reads nor writes.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE stock VALIDATE CONSTRAINT stock_short;

-- +goose Down
SELECT 1;
