-- Bundles: a SKU defined by its components, held as them.
--
--   bundles            a bundle SKU's current definition: its version,
--                      why it was set, by whom and when. A row only while
--                      the bundle is defined; a bundle has no stock of its
--                      own.
--   bundle_components  every version of every definition, kept after it
--                      is replaced or deleted, so that the version a hold
--                      used can be read back: per version, each component
--                      SKU, how many of it one bundle takes, and whether a
--                      hold may take it from several locations (split).
--                      The next version of a bundle is one more than the
--                      greatest it ever had.
--
-- Catalog-only changes under a short lock timeout: new tables.

-- +goose Up
SET LOCAL lock_timeout = '5s';

CREATE TABLE IF NOT EXISTS bundles (
    sku      text        PRIMARY KEY,
    version  bigint      NOT NULL,
    reason   text        NOT NULL,
    set_by   text        NOT NULL,
    set_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT bundles_version CHECK (version >= 1),
    CONSTRAINT bundles_reason CHECK (char_length(reason) BETWEEN 1 AND 500)
);

COMMENT ON TABLE bundles IS 'A bundle SKU''s current definition (its components are bundle_components at this version); a row only while defined.';

CREATE TABLE IF NOT EXISTS bundle_components (
    bundle_sku  text    NOT NULL,
    version     bigint  NOT NULL,
    sku         text    NOT NULL,
    quantity    bigint  NOT NULL,
    split       boolean NOT NULL DEFAULT false,
    position    int     NOT NULL,
    PRIMARY KEY (bundle_sku, version, sku),
    CONSTRAINT bundle_components_quantity CHECK (quantity BETWEEN 1 AND 1000000),
    CONSTRAINT bundle_components_not_itself CHECK (sku <> bundle_sku),
    CONSTRAINT bundle_components_version CHECK (version >= 1),
    CONSTRAINT bundle_components_position CHECK (position BETWEEN 0 AND 19)
);

COMMENT ON TABLE bundle_components IS 'Every version of every bundle''s definition, kept after it is replaced or deleted: the version a hold line records can be read back.';

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP TABLE bundle_components;
DROP TABLE bundles;
