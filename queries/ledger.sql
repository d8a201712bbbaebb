-- name: LedgerAppend :execrows
-- LedgerAppend records a change the caller just made to a stock row in its
-- transaction: the row as it is now gives the version the change produced,
-- the counters after it and its event feed position (and, for a pool of
-- units with an identity, the units it moved).
INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                    delta_quality_control, delta_damaged, delta_safety_stock, delta_incoming, delta_short,
                    stock_version, reservation_id, actor, actor_key, reason, ref, units, refs,
                    feed_xid, total_after, available_after, reserved_after, sold_after,
                    quality_control_after, damaged_after, safety_stock_after, incoming_after)
SELECT s.sku, s.location, s.pool, @kind::text, @delta_total::bigint, @delta_available::bigint, @delta_reserved::bigint,
       @delta_sold::bigint, @delta_quality_control::bigint, @delta_damaged::bigint, @delta_safety_stock::bigint,
       @delta_incoming::bigint, @delta_short::bigint, s.version, sqlc.narg('reservation_id')::uuid, @actor::text, sqlc.narg('actor_key')::text,
       sqlc.narg('reason')::text, sqlc.narg('ref')::text, sqlc.narg('units')::text[], sqlc.narg('refs')::text[],
       s.feed_xid, s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming
FROM stock s
WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool;
