-- name: OpsSessionCreate :exec
INSERT INTO ops_sessions (token_sha256, api_key_id, csrf_token, expires_at)
VALUES (@token_sha256, @api_key_id, @csrf_token, now() + interval '1 second' * @ttl_seconds::bigint);

-- name: OpsSessionGet :one
-- OpsSessionGet returns a live session with the key it acts as: an expired
-- session, or one whose key was revoked (its grace period over), is no
-- session. It is read on every request, so a revocation ends a session at
-- once on every instance.
SELECT k.id AS api_key_id, k.name, k.role, s.csrf_token, s.expires_at
FROM ops_sessions s
JOIN api_keys k ON k.id = s.api_key_id
WHERE s.token_sha256 = @token_sha256 AND s.expires_at > now() AND (k.revoked_at IS NULL OR k.revoked_at > now());

-- name: OpsSessionDelete :exec
DELETE FROM ops_sessions WHERE token_sha256 = @token_sha256;

-- name: OpsSessionsDeleteExpired :exec
DELETE FROM ops_sessions WHERE expires_at <= now();

-- name: LedgerPageBySKU :many
-- LedgerPageBySKU returns a SKU's movements newest first, older than
-- before_id when it is given.
SELECT * FROM ledger
WHERE sku = @sku AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id')::bigint)
ORDER BY id DESC
LIMIT @lim;

-- name: LedgerBundleLines :many
-- LedgerBundleLines is the component lines of the holds ids that were held
-- for a bundle line (a hold's lines are one per sku, location and pool):
-- what a movement of one of those lines came from.
SELECT reservation_id, sku, location, pool, bundle_sku::text AS bundle_sku,
       bundle_quantity::bigint AS bundle_quantity, bundle_version::bigint AS bundle_version
FROM reservation_lines
WHERE reservation_id = ANY(@ids::uuid[]) AND bundle_sku IS NOT NULL;

-- name: LedgerListByReservation :many
SELECT * FROM ledger WHERE reservation_id = @reservation_id ORDER BY id;

-- name: ReservationsByOrderRef :many
SELECT * FROM reservations WHERE order_ref = @order_ref ORDER BY created_at DESC LIMIT @lim;

-- name: CampaignList :many
-- CampaignList returns campaigns, those still running or rolling back
-- first, then the newest.
SELECT * FROM campaigns
ORDER BY status IN ('active', 'ended') DESC, starts_at DESC
LIMIT @lim;

-- name: RollbackList :many
-- RollbackList returns rollback requests, unfinished ones first, then the
-- newest.
SELECT * FROM rollback_requests
ORDER BY status IN ('pending', 'running') DESC, id DESC
LIMIT @lim;

-- name: ReconcileRunList :many
SELECT * FROM reconcile_runs ORDER BY id DESC LIMIT @lim;

-- name: UnitsMap :many
-- UnitsMap returns up to lim units of sku in seat order (pool, group,
-- position, id): the console's seat map.
SELECT location, pool, group_name, position, id, status, reservation_id
FROM units
WHERE sku = @sku
ORDER BY location COLLATE "C", pool COLLATE "C", group_name COLLATE "C" NULLS LAST, position NULLS LAST, id COLLATE "C"
LIMIT @lim;

-- name: ConsoleBundlesPage :many
-- ConsoleBundlesPage lists the bundles whose SKU starts with pattern
-- (LIKE-escaped by the caller; '%' for all), in SKU order, up to lim.
SELECT sku FROM bundles WHERE sku LIKE @pattern::text ORDER BY sku LIMIT @lim;

-- name: ConsoleBundlesUsing :many
-- ConsoleBundlesUsing is the bundles whose current definition has sku as
-- a component, with what one bundle takes of it.
SELECT b.sku AS bundle_sku, c.quantity, c.split
FROM bundles b
JOIN bundle_components c ON c.bundle_sku = b.sku AND c.version = b.version
WHERE c.sku = @sku
ORDER BY b.sku;
