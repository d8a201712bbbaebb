-- The event feed: ledger rows in feed order, (feed_xid, id), each with what
-- its events need. See migrations/00060_events.sql for why that order never
-- skips a row and keeps each (sku, location, pool) in order.

-- name: EventRowsAfter :many
-- EventRowsAfter returns up to lim ledger rows of the feed at or after the
-- position (after_xid, after_id), in feed order, among those whose feed_xid
-- is older than every transaction still running: no row can appear later
-- before them. For the last row of each stock version (the rows one
-- statement wrote for one stock row share it) it adds the version's summed
-- deltas, the units with an identity it moved, and the low-stock
-- threshold that applied to it (-1: none), and the bundles whose
-- low-stock threshold that version took them to (bundle_lows: sku,
-- location, threshold, available, crossing; null: none); for a
-- hold's rows, the hold's order reference and client (null once retention
-- deleted the hold); for a transfer's rows, its two locations; for an
-- inbound notice's rows, its supplier reference and expected day.
-- The rows of one stock version (written by one statement for one stock
-- row) share its feed_xid, so they lie within the ids the ledger holds for
-- that feed_xid (ledger_feed's range of it, from its first id to its last):
-- each row's version is found by a range on ledger_sku_id between those
-- ids, a few rows whatever the SKU's history. Those ends are read in feed
-- order from the row's feed_xid (ORDER BY feed_xid, id ... LIMIT 1, which
-- only ledger_feed serves: one descent per partition), not as max(id) or
-- min(id) of the feed_xid, for which the planner may walk a partition's
-- primary key in id order instead and read the whole partition when it
-- holds no row of that feed_xid: a partition whose rows share few
-- feed_xids (a month loaded in one transaction, an archive's carried
-- balances) makes the planner expect one anywhere.
SELECT f.id, f.feed_xid, f.at, f.sku, f.location, f.pool, f.kind, f.delta_reserved, f.stock_version, f.reservation_id,
       f.actor, f.reason, f.ref, f.total_after, f.available_after, f.reserved_after, f.sold_after,
       f.quality_control_after, f.damaged_after, f.safety_stock_after, f.incoming_after, f.last_of_version,
       f.delta_total, f.delta_incoming, f.delta_backordered,
       CASE WHEN f.last_of_version THEN (
           SELECT ARRAY[sum(n.delta_total), sum(n.delta_available), sum(n.delta_reserved), sum(n.delta_sold),
                        sum(n.delta_quality_control), sum(n.delta_damaged), sum(n.delta_safety_stock),
                        sum(n.delta_incoming)]::bigint[]
           FROM ledger n
           WHERE n.sku = f.sku AND n.id >= v.first_id AND n.id <= f.id
             AND n.location = f.location AND n.pool = f.pool AND n.stock_version = f.stock_version AND n.feed_xid = f.feed_xid)
       END::bigint[] AS version_deltas,
       coalesce(CASE WHEN f.last_of_version THEN (
           SELECT h.threshold FROM stock_thresholds h
           WHERE h.sku = f.sku AND h.location = f.location AND h.pool = f.pool AND h.from_version <= f.stock_version
           ORDER BY h.from_version DESC
           LIMIT 1)
       END, -1)::bigint AS threshold,
       CASE WHEN f.last_of_version THEN (
           SELECT array_agg(u.id ORDER BY u.id COLLATE "C")
           FROM ledger n, unnest(n.units) AS u(id)
           WHERE n.sku = f.sku AND n.id >= v.first_id AND n.id <= f.id
             AND n.location = f.location AND n.pool = f.pool AND n.stock_version = f.stock_version AND n.feed_xid = f.feed_xid)
       END::text[] AS version_units,
       CASE WHEN f.last_of_version THEN (
           SELECT jsonb_agg(jsonb_build_object('sku', b.bundle_sku, 'location', b.bundle_location, 'threshold', b.threshold,
                                               'available', b.available, 'crossing', b.crossing)
                            ORDER BY b.bundle_sku, b.bundle_location)
           FROM bundle_lows b
           WHERE b.sku = f.sku AND b.location = f.location AND b.pool = f.pool AND b.stock_version = f.stock_version)
       END::jsonb AS bundle_lows,
       f.units, f.refs, f.ref, r.order_ref, r.client,
       t.from_location AS transfer_from, t.to_location AS transfer_to,
       i.supplier_ref AS inbound_supplier_ref, i.expected_on AS inbound_expected_on
FROM (
    SELECT l.id, l.feed_xid, l.at, l.sku, l.location, l.pool, l.kind, l.delta_reserved, l.stock_version, l.reservation_id,
           l.actor, l.reason, l.ref, l.units, l.refs, l.delta_total, l.delta_incoming, l.delta_backordered,
           l.total_after, l.available_after, l.reserved_after, l.sold_after,
           l.quality_control_after, l.damaged_after, l.safety_stock_after, l.incoming_after,
           NOT EXISTS (SELECT 1 FROM ledger n
                       WHERE n.sku = l.sku AND n.id > l.id
                         AND n.id <= (SELECT x.id FROM ledger x WHERE x.feed_xid <= l.feed_xid
                                      ORDER BY x.feed_xid DESC, x.id DESC LIMIT 1)
                         AND n.location = l.location AND n.pool = l.pool
                         AND n.stock_version = l.stock_version AND n.feed_xid = l.feed_xid) AS last_of_version
    FROM ledger l
    WHERE l.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
      AND (l.feed_xid, l.id) >= (@after_xid::xid8, @after_id::bigint)
    ORDER BY l.feed_xid, l.id
    LIMIT @lim
) f
LEFT JOIN LATERAL (
    SELECT x.id AS first_id FROM ledger x WHERE f.last_of_version AND x.feed_xid >= f.feed_xid
    ORDER BY x.feed_xid, x.id LIMIT 1
) v ON true
LEFT JOIN reservations r ON r.id = f.reservation_id
LEFT JOIN transfers t ON f.kind IN ('transfer_out', 'receive', 'loss', 'transfer_cancel')
                     AND t.id = CASE WHEN f.ref ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN f.ref::uuid END
LEFT JOIN inbound i ON f.kind IN ('inbound', 'inbound_receive', 'inbound_short', 'inbound_cancel')
                   AND i.id = CASE WHEN f.ref ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN f.ref::uuid END
ORDER BY f.feed_xid, f.id;

-- name: EventFeedStart :one
-- EventFeedStart is the feed position "now": every row served from now on
-- has a feed_xid at or above the oldest transaction still running. A new
-- webhook starts there.
SELECT pg_snapshot_xmin(pg_current_snapshot())::xid8 AS xmin;
