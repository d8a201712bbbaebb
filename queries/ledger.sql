-- name: LedgerAppend :exec
INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    stock_version, reservation_id, actor, reason, ref)
VALUES (@sku, @pool, @kind, @delta_total, @delta_available, @delta_reserved, @delta_sold,
        @stock_version, sqlc.narg('reservation_id'), @actor, sqlc.narg('reason'), sqlc.narg('ref'));

-- name: LedgerAppendLines :exec
-- LedgerAppendLines writes one ledger row per line of the given
-- reservations: each delta is the line's quantity times its per-unit factor,
-- and each row carries the version its stock row reached (versions are given
-- per sku and pool, as the parallel arrays vskus, vpools, versions). A null
-- actor means each reservation's own client.
INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    stock_version, reservation_id, actor, reason)
SELECT l.sku, l.pool, @kind::text,
       0, l.quantity * @per_available::bigint, l.quantity * @per_reserved::bigint, l.quantity * @per_sold::bigint,
       v.version, l.reservation_id, coalesce(sqlc.narg('actor')::text, r.client), sqlc.narg('reason')::text
FROM reservation_lines l
JOIN reservations r ON r.id = l.reservation_id
JOIN (SELECT unnest(@vskus::text[]) AS sku, unnest(@vpools::text[]) AS pool, unnest(@versions::bigint[]) AS version) v
  ON v.sku = l.sku AND v.pool = l.pool
WHERE l.reservation_id = ANY(@reservation_ids::uuid[])
ORDER BY l.reservation_id, l.sku, l.pool;
