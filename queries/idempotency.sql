-- name: IdempotencyKeyClaim :one
-- IdempotencyKeyClaim inserts a placeholder for a new key; no row means the
-- key exists. A concurrent twin waits here until the first transaction ends.
INSERT INTO idempotency_keys (client, key, request_hash, status_code, response)
VALUES (@client, @key, @request_hash, 0, '')
ON CONFLICT (client, key) DO NOTHING
RETURNING client;

-- name: IdempotencyKeyGet :one
SELECT * FROM idempotency_keys WHERE client = @client AND key = @key;

-- name: IdempotencyKeyStore :exec
UPDATE idempotency_keys SET status_code = @status_code, response = @response
WHERE client = @client AND key = @key;
