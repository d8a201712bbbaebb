-- Low-stock thresholds (PUT /v1/skus/{sku}/threshold).

-- name: StockThresholdSet :one
-- StockThresholdSet sets (or, with a null threshold, clears) a pool's
-- low-stock threshold. It locks the stock row, so no change to the row is
-- in flight, and records the threshold as applying from the row's next
-- version on: a change already in the feed keeps the threshold it had.
WITH s AS (
    UPDATE stock t
    SET low_threshold = sqlc.narg('threshold')::bigint
    WHERE t.sku = @sku AND t.location = @location AND t.pool = @pool
    RETURNING t.sku, t.location, t.pool, t.version
)
INSERT INTO stock_thresholds (sku, location, pool, from_version, threshold, set_by)
SELECT s.sku, s.location, s.pool, s.version + 1, sqlc.narg('threshold')::bigint, @set_by::text FROM s
ON CONFLICT (sku, location, pool, from_version) DO UPDATE
SET threshold = excluded.threshold, set_by = excluded.set_by, set_at = now()
RETURNING stock_thresholds.sku, stock_thresholds.location, stock_thresholds.pool, stock_thresholds.threshold;

-- Low-stock thresholds of bundles (migrations/00158_bundle_thresholds.sql):
-- on a bundle's availability at a location, computed from its components.

-- name: BundleLowLock :exec
-- BundleLowLock waits for every transaction deciding a bundle's crossing
-- (at its commit) and keeps the next from deciding until this one ends:
-- what it sets is what they decide by.
SELECT pg_advisory_xact_lock(hashtext('stockhold.bundle_low'));

-- name: BundleThresholdSet :one
-- BundleThresholdSet sets bundle sku's threshold at location; it is low
-- from now if the bundle makes no more than the threshold there now, so
-- setting a threshold it is already under sends nothing until it rises
-- above it again. Under BundleLowLock.
INSERT INTO bundle_thresholds (sku, location, threshold, low, set_by)
VALUES (@sku, @location, @threshold::bigint, bundle_available(@sku, @location) <= @threshold::bigint, @set_by)
ON CONFLICT (sku, location) DO UPDATE
SET threshold = excluded.threshold, low = excluded.low, set_by = excluded.set_by, set_at = now()
RETURNING *;

-- name: BundleThresholdDelete :exec
DELETE FROM bundle_thresholds WHERE sku = @sku AND location = @location;

-- name: BundleThresholdsDeleteAll :exec
-- BundleThresholdsDeleteAll removes a deleted bundle's thresholds.
DELETE FROM bundle_thresholds WHERE sku = @sku;

-- name: BundleThresholdsReset :exec
-- BundleThresholdsReset decides again whether bundle sku is low at each
-- location with a threshold, by its current definition, sending nothing
-- (a new definition). Under BundleLowLock, after BundleWatchCatchUp.
UPDATE bundle_thresholds SET low = bundle_available(sku, location) <= threshold WHERE sku = @sku;

-- name: BundleThresholdsOf :many
-- BundleThresholdsOf is the thresholds of those of skus that are bundles.
SELECT sku, location, threshold FROM bundle_thresholds
WHERE sku = ANY(@skus::text[])
ORDER BY sku, location;

-- name: BundleComponentsAt :one
-- BundleComponentsAt reports whether a component of bundle sku's current
-- definition has a main pool at location.
SELECT EXISTS (
    SELECT 1 FROM bundles d
    JOIN bundle_components bc ON bc.bundle_sku = d.sku AND bc.version = d.version
    JOIN stock s ON s.sku = bc.sku AND s.location = @location AND s.pool = 'main'
    WHERE d.sku = @sku)::boolean;

-- name: BundleWatchTrim :exec
-- BundleWatchTrim ends the watch of the main pools of skus that no bundle's
-- threshold needs (a threshold removed, a component of an earlier
-- definition). Under BundleLowLock, so it reads every threshold and
-- definition written: it waits for no row (a row in use keeps its watch,
-- which costs a look at the thresholds at the commit of its changes).
UPDATE stock s SET bundle_watch = false
FROM (SELECT x.sku, x.location, x.pool FROM stock x
      WHERE x.sku = ANY(@skus::text[]) AND x.pool = 'main' AND x.bundle_watch
        AND NOT bundle_watch_want(x.sku, x.location)
      ORDER BY x.sku COLLATE "C", x.location COLLATE "C"
      FOR UPDATE SKIP LOCKED) w
WHERE s.sku = w.sku AND s.location = w.location AND s.pool = w.pool;

-- name: BundleWatchAt :exec
-- BundleWatchAt watches the main pools of skus at location, and of
-- split_skus (split components, counted at every location) everywhere: the
-- rows a threshold of their bundle at location needs. Before
-- BundleLowLock, it waits for the changes in flight on the rows it
-- changes, locking them in the global lock order.
UPDATE stock s SET bundle_watch = true
FROM (SELECT x.sku, x.location, x.pool FROM stock x
      WHERE x.sku = ANY(@skus::text[]) AND x.pool = 'main' AND NOT x.bundle_watch
        AND (x.location = @location OR x.sku = ANY(@split_skus::text[]))
      ORDER BY x.sku COLLATE "C", x.location COLLATE "C"
      FOR UPDATE) w
WHERE s.sku = w.sku AND s.location = w.location AND s.pool = w.pool AND NOT s.bundle_watch;

-- name: BundleWatchCatchUp :execrows
-- BundleWatchCatchUp watches, under BundleLowLock, the main pools of skus
-- that a threshold (this transaction's too) needs and that are not watched
-- yet: rows created since the watch before the lock. It does not wait
-- (a row lock under the bundles' lock could wait for a change that waits
-- for that lock): a row in use fails it with lock_not_available, and the
-- caller tries its transaction again.
UPDATE stock s SET bundle_watch = true
FROM (SELECT x.sku, x.location, x.pool FROM stock x
      WHERE x.sku = ANY(@skus::text[]) AND x.pool = 'main' AND NOT x.bundle_watch
        AND bundle_watch_want(x.sku, x.location)
      ORDER BY x.sku COLLATE "C", x.location COLLATE "C"
      FOR UPDATE NOWAIT) w
WHERE s.sku = w.sku AND s.location = w.location AND s.pool = w.pool;

-- name: BundleThresholdDecide :exec
-- BundleThresholdDecide decides again whether bundle sku is low at
-- location, sending nothing. Under BundleLowLock, after
-- BundleWatchCatchUp: it reads every change to the rows now watched.
UPDATE bundle_thresholds SET low = bundle_available(sku, location) <= threshold WHERE sku = @sku AND location = @location;

-- name: BundleWatchAdd :exec
-- BundleWatchAdd watches the main pools of skus at every location (a split
-- component counts at all of them) when bundle sku has a threshold (a
-- definition of it about to be set), locking only the rows it changes, in
-- the global lock order.
UPDATE stock s SET bundle_watch = true
FROM (SELECT x.sku, x.location, x.pool FROM stock x
      WHERE x.sku = ANY(@skus::text[]) AND x.pool = 'main' AND NOT x.bundle_watch
        AND EXISTS (SELECT 1 FROM bundle_thresholds t WHERE t.sku = @sku)
      ORDER BY x.sku COLLATE "C", x.location COLLATE "C"
      FOR UPDATE) w
WHERE s.sku = w.sku AND s.location = w.location AND s.pool = w.pool AND NOT s.bundle_watch;

-- name: BundleComponentsEver :many
-- BundleComponentsEver is every SKU that any version of bundle sku has
-- had as a component: the rows whose watch a new definition may end.
SELECT DISTINCT sku FROM bundle_components WHERE bundle_sku = @sku ORDER BY sku;
