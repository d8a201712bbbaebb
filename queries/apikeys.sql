-- name: APIKeyCreate :one
INSERT INTO api_keys (name, role, token_sha256) VALUES (@name, @role, @token_sha256)
RETURNING id, name, role, created_at;

-- name: APIKeyGetByHash :one
SELECT id, name, role FROM api_keys WHERE token_sha256 = @token_sha256 AND revoked_at IS NULL;
