-- CSV stock imports (`stockhold stock import`): the chunks that committed,
-- so a rerun after a failure resumes where the last one stopped instead of
-- applying rows twice.

-- +goose Up
-- One row per committed chunk of an import, written in the chunk's own
-- transaction. A chunk is known by the SHA-256 of the file's content from
-- its header through the chunk's last row (its columns, not its bytes, so
-- line endings and quoting do not matter): a recorded prefix means every row
-- of that prefix was applied once. A rerun of the same file, of the file
-- fixed after the row that failed, or of the file with rows appended,
-- resumes after the longest recorded prefix.
CREATE TABLE stock_import_chunks (
    prefix_sha256  bytea       PRIMARY KEY,
    -- SHA-256 of the whole file as read (bytes), to find an import again.
    file_sha256    bytea       NOT NULL,
    file_name      text        NOT NULL,
    -- The prefix's rows: the chunk is rows first_row..last_row (1-based,
    -- header not counted).
    first_row      integer     NOT NULL,
    last_row       integer     NOT NULL,
    -- Rows of the chunk that changed a pool (a set_total already met does not).
    changed        integer     NOT NULL,
    actor          text        NOT NULL,
    committed_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stock_import_chunks_rows CHECK (first_row BETWEEN 1 AND last_row)
);

COMMENT ON TABLE stock_import_chunks IS 'Committed chunks of CSV stock imports, by the SHA-256 of the file''s content through the chunk: a rerun skips what they cover.';

CREATE INDEX stock_import_chunks_file ON stock_import_chunks (file_sha256);

-- +goose Down
DROP TABLE stock_import_chunks;
