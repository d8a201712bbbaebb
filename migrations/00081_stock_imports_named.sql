-- CSV stock imports are named, not hashed. An import was known by the
-- content of its file, so a weekly restock identical to last week's was
-- skipped as "imported before", and a file differing from an earlier one
-- inside a chunk re-applied that chunk's unchanged rows (only chunk-end
-- prefixes were recorded). An import is now known by its id (`--id`, by
-- default the file's name) and remembers how many of its rows it applied
-- and the hash of their content: a rerun resumes after them, and is refused
-- when they changed; a finished import applies nothing again unless asked
-- (`--again`, a new run). Each row is applied once per run.

-- +goose Up
CREATE TABLE stock_imports (
    id              text        NOT NULL,
    -- 1, then one more each time a finished import is imported again.
    run             integer     NOT NULL DEFAULT 1,
    -- The file the latest attempt read, and its rows.
    file_name       text        NOT NULL,
    format          text        NOT NULL,
    total_rows      integer     NOT NULL,
    -- SHA-256 of the rows' content (the format, then each row's sku, pool
    -- and value, each length-prefixed: not the bytes, so line endings and
    -- quoting do not matter).
    content_sha256  bytea       NOT NULL,
    -- Rows 1..applied_rows are applied, and applied_sha256 is the hash of
    -- the content through them (null while none is).
    applied_rows    integer     NOT NULL DEFAULT 0,
    applied_sha256  bytea,
    actor           text        NOT NULL,
    -- db:<user> for the command line (see ledger.actor_key).
    actor_key       text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (id, run),
    CONSTRAINT stock_imports_id CHECK (id <> ''),
    CONSTRAINT stock_imports_applied CHECK (applied_rows >= 0 AND (applied_rows = 0) = (applied_sha256 IS NULL)),
    CONSTRAINT stock_imports_finished CHECK (finished_at IS NULL OR applied_rows = total_rows)
);

COMMENT ON TABLE stock_imports IS 'CSV stock imports by id (--id, by default the file''s name), one row per run: how many rows are applied, and the hash of their content, so a rerun resumes after them or is refused when they changed.';

CREATE INDEX stock_imports_content ON stock_imports (content_sha256);

-- Imports recorded the old way become imports named after their file,
-- unfinished, with the rows covered by the longest recorded prefix of the
-- file (by its bytes) last imported under that name: a rerun of the same
-- file resumes after them (and, when that was every row, finishes with
-- nothing to apply).
INSERT INTO stock_imports (id, file_name, format, total_rows, content_sha256, applied_rows, applied_sha256,
                           actor, started_at, updated_at)
SELECT DISTINCT ON (c.id) c.id, c.file_name, 'unknown', c.last_row, c.prefix_sha256, c.last_row, c.prefix_sha256,
       c.actor, c.committed_at, c.committed_at
FROM (SELECT regexp_replace(file_name, '^.*/', '') AS id, * FROM stock_import_chunks) c
JOIN (SELECT DISTINCT ON (regexp_replace(file_name, '^.*/', '')) regexp_replace(file_name, '^.*/', '') AS id, file_sha256
      FROM stock_import_chunks
      ORDER BY regexp_replace(file_name, '^.*/', ''), committed_at DESC) latest
  ON latest.id = c.id AND latest.file_sha256 = c.file_sha256
WHERE c.id <> ''
ORDER BY c.id, c.last_row DESC;

DROP TABLE stock_import_chunks;

-- +goose Down
CREATE TABLE stock_import_chunks (
    prefix_sha256  bytea       PRIMARY KEY,
    file_sha256    bytea       NOT NULL,
    file_name      text        NOT NULL,
    first_row      integer     NOT NULL,
    last_row       integer     NOT NULL,
    changed        integer     NOT NULL,
    actor          text        NOT NULL,
    committed_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stock_import_chunks_rows CHECK (first_row BETWEEN 1 AND last_row)
);
CREATE INDEX stock_import_chunks_file ON stock_import_chunks (file_sha256);
DROP TABLE stock_imports;
