-- name: APIKeyCreate :one
-- APIKeyCreate issues a key; locations binds its holds to those locations
-- (null: every location).
INSERT INTO api_keys (name, role, token_sha256, locations, strategy)
VALUES (@name, @role, @token_sha256, sqlc.narg('locations')::text[], sqlc.narg('strategy')::text)
RETURNING id, name, role, created_at;

-- name: APIKeyGetByHash :one
-- APIKeyGetByHash returns the key of a token while it works: not revoked,
-- or revoked at a time still to come (a rotated key's grace period).
SELECT id, name, role, revoked_at, locations, strategy FROM api_keys
WHERE token_sha256 = @token_sha256 AND (revoked_at IS NULL OR revoked_at > now());

-- name: APIKeyList :many
SELECT id, name, role, created_at, revoked_at, locations, strategy FROM api_keys ORDER BY name, id;

-- name: APIKeyLockLive :one
-- APIKeyLockLive locks the key in use under a name, for a rotation.
SELECT id, name, role, created_at, revoked_at, locations, strategy FROM api_keys
WHERE name = @name AND revoked_at IS NULL
FOR UPDATE;

-- name: APIKeysRevoke :many
-- APIKeysRevoke makes every key named name stop working at now() + grace:
-- the key in use, and any still in a grace period that would end later.
UPDATE api_keys
SET revoked_at = now() + make_interval(secs => @grace_seconds::double precision)
WHERE name = @name
  AND (revoked_at IS NULL OR revoked_at > now() + make_interval(secs => @grace_seconds::double precision))
RETURNING id, revoked_at;

-- name: OpsSessionsDeleteForKeys :exec
-- OpsSessionsDeleteForKeys ends the console sessions of revoked keys.
DELETE FROM ops_sessions WHERE api_key_id = ANY(@key_ids::bigint[]);
