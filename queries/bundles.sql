-- name: BundlesLock :exec
-- BundlesLock serialises the writes of bundle definitions (each checks
-- that no bundle contains another): reads and holds do not wait for it.
LOCK TABLE bundles IN SHARE ROW EXCLUSIVE MODE;

-- name: BundleNextVersion :one
-- BundleNextVersion is one more than the greatest version the bundle ever
-- had: a definition deleted and set again does not reuse a version.
SELECT (coalesce(max(version), 0) + 1)::bigint FROM bundle_components WHERE bundle_sku = @sku;

-- name: BundleSet :one
INSERT INTO bundles (sku, version, reason, set_by)
VALUES (@sku, @version, @reason, @set_by)
ON CONFLICT (sku) DO UPDATE
SET version = excluded.version, reason = excluded.reason, set_by = excluded.set_by, set_at = now()
RETURNING *;

-- name: BundleComponentsInsert :exec
INSERT INTO bundle_components (bundle_sku, version, sku, quantity, split, position)
SELECT @bundle_sku, @version, unnest(@skus::text[]), unnest(@quantities::bigint[]), unnest(@splits::boolean[]),
       generate_subscripts(@skus::text[], 1) - 1;

-- name: BundleGet :one
SELECT * FROM bundles WHERE sku = @sku;

-- name: BundleComponents :many
-- BundleComponents is the components of one version of a bundle, in the
-- order they were given.
SELECT sku, quantity, split FROM bundle_components
WHERE bundle_sku = @bundle_sku AND version = @version
ORDER BY position;

-- name: BundleDelete :execrows
DELETE FROM bundles WHERE sku = @sku;

-- name: BundlesContaining :many
-- BundlesContaining is the bundles whose current definition has sku as a
-- component.
SELECT b.sku FROM bundles b
JOIN bundle_components c ON c.bundle_sku = b.sku AND c.version = b.version
WHERE c.sku = @sku
ORDER BY b.sku;

-- name: BundlesAmong :many
-- BundlesAmong is those of skus that are bundles, with their current
-- components.
SELECT b.sku AS bundle_sku, c.sku AS component
FROM bundles b
JOIN bundle_components c ON c.bundle_sku = b.sku AND c.version = b.version
WHERE b.sku = ANY(@skus::text[])
ORDER BY b.sku, c.position;

-- name: StockSKUsExisting :many
-- StockSKUsExisting is those of skus that have a stock row (any location,
-- any pool).
SELECT DISTINCT sku FROM stock WHERE sku = ANY(@skus::text[]);

-- name: BundlesCurrent :many
-- BundlesCurrent is every bundle's current definition, one row per
-- component, in the order given: what a hold engine expands bundle lines
-- by.
SELECT b.sku AS bundle_sku, b.version, c.sku, c.quantity, c.split
FROM bundles b
JOIN bundle_components c ON c.bundle_sku = b.sku AND c.version = b.version
ORDER BY b.sku, c.position;

-- name: BundleVersions :batchmany
-- BundleVersions is the current version of each of skus that is a
-- bundle: a hold batch with bundle lines reads it with its locks, and a
-- hold expanded by a definition since replaced goes again.
SELECT sku, version FROM bundles WHERE sku = ANY(@skus::text[]);

-- name: BundlesScan :many
-- BundlesScan returns up to lim bundle SKUs after after ("" for the first)
-- and, with upto, at most upto, in the database's collation: the bundles
-- among a catalogue page's stretch of stock rows.
SELECT sku FROM bundles
WHERE sku > @after AND (sqlc.narg('upto')::text IS NULL OR sku <= sqlc.narg('upto')::text)
ORDER BY sku LIMIT @lim;

-- name: BundlesCurrentOf :many
-- BundlesCurrentOf is BundlesCurrent for those of skus that are bundles,
-- with when each was defined.
SELECT b.sku AS bundle_sku, b.version, b.set_at, c.sku, c.quantity, c.split
FROM bundles b
JOIN bundle_components c ON c.bundle_sku = b.sku AND c.version = b.version
WHERE b.sku = ANY(@skus::text[])
ORDER BY b.sku, c.position;

-- name: SKUsInOrder :many
-- SKUsInOrder is skus without repeats in the database's collation, the
-- order of the stock table's key: a catalogue page merges its bundles
-- among its SKUs in it.
SELECT DISTINCT s::text AS sku FROM unnest(@skus::text[]) AS s ORDER BY 1;
