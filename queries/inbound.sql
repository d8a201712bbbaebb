-- Supplier inbound (POST/GET /v1/inbound): a notice from a supplier and
-- its lines, incoming at their stock rows while it is open.

-- name: InboundCreate :one
INSERT INTO inbound (id, supplier_ref, location, expected_on, reason, actor, actor_key)
VALUES (@id, @supplier_ref, @location, @expected_on, @reason, @actor, sqlc.narg('actor_key'))
RETURNING *;

-- name: InboundLineCreate :exec
INSERT INTO inbound_lines (inbound_id, sku, location, pool, quantity)
VALUES (@inbound_id, @sku, @location, @pool, @quantity);

-- name: InboundGet :one
SELECT * FROM inbound WHERE id = @id;

-- name: InboundLock :one
-- InboundLock locks a notice before the stock rows its lines move, the
-- order every change of a notice takes its locks in.
SELECT * FROM inbound WHERE id = @id FOR UPDATE;

-- name: InboundLines :many
-- InboundLines lists a notice's lines in lock order.
SELECT * FROM inbound_lines WHERE inbound_id = @inbound_id
ORDER BY sku COLLATE "C", pool COLLATE "C";

-- name: InboundLinesOf :many
-- InboundLinesOf lists the lines of the notices given, in lock order.
SELECT * FROM inbound_lines WHERE inbound_id = ANY(@ids::uuid[])
ORDER BY inbound_id, sku COLLATE "C", pool COLLATE "C";

-- name: InboundLineSet :exec
-- InboundLineSet records what arrived of a line and what a close wrote
-- off of it.
UPDATE inbound_lines SET received = @received, short = @short
WHERE inbound_id = @inbound_id AND sku = @sku AND pool = @pool;

-- name: InboundSet :one
-- InboundSet records a notice's status and, when it finishes, who
-- finished it and why.
UPDATE inbound
SET status = @status, updated_at = now(),
    finished_at = CASE WHEN @status::text <> 'open' THEN now() END,
    finished_by = CASE WHEN @status::text <> 'open' THEN sqlc.narg('finished_by')::text END,
    finish_reason = CASE WHEN @status::text <> 'open' THEN sqlc.narg('finish_reason')::text END
WHERE id = @id
RETURNING *;

-- name: InboundPage :many
-- InboundPage lists up to lim notices by the day they are expected, the
-- earliest (the late ones) first, after the one given (a keyset on
-- (expected_on, created_at, id)). Filters: status, location, a SKU on one
-- of its lines.
SELECT i.* FROM inbound i
WHERE (sqlc.narg('status')::text IS NULL OR i.status = sqlc.narg('status')::text)
  AND (sqlc.narg('location')::text IS NULL OR i.location = sqlc.narg('location')::text)
  AND (sqlc.narg('sku')::text IS NULL OR EXISTS (
        SELECT 1 FROM inbound_lines l WHERE l.inbound_id = i.id AND l.sku = sqlc.narg('sku')::text))
  AND (sqlc.narg('after_id')::uuid IS NULL OR (i.expected_on, i.created_at, i.id) > (
        SELECT a.expected_on, a.created_at, a.id FROM inbound a WHERE a.id = sqlc.narg('after_id')::uuid))
ORDER BY i.expected_on, i.created_at, i.id
LIMIT @lim;

-- name: IncomingExpectedAt :one
-- IncomingExpectedAt is what a stock row's incoming must be: what the
-- transfers in transit to it and the open inbound lines at it have not
-- yet delivered or written off (the view incoming_expected).
SELECT coalesce((SELECT e.incoming FROM incoming_expected e
                 WHERE e.sku = @sku AND e.location = @location AND e.pool = @pool), 0)::bigint AS incoming;

-- name: InboundOutstandingAt :one
-- InboundOutstandingAt is what the open inbound lines at a stock row have
-- not yet delivered or written off.
SELECT coalesce(sum(l.quantity - l.received - l.short), 0)::bigint AS outstanding
FROM inbound_lines l
JOIN inbound i ON i.id = l.inbound_id
WHERE l.sku = @sku AND l.location = @location AND l.pool = @pool AND i.status = 'open';
