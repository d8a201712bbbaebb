-- The protection switch beyond one pool (stop-sale, a campaign's pools),
-- the checks before lifting it, and repairs of a pool's books.

-- name: StopSaleShare :batchexec
-- StopSaleShare is a hold batch's share of the stop-sale lock, held to the
-- end of its transaction; StopSaleRead, a later statement, then reads the
-- switch as the last flip committed it (see StopSaleLock). lock is
-- StopSaleLockName (a batch query needs a parameter). The share is waited
-- for under the lock_timeout the transaction set before (a flip waits for
-- the batches running, and the batches that ask after it wait for it);
-- once it is granted, lock_timeout becomes timeout, the bound of the
-- batch's waits for rows (the subquery is evaluated first: its row is
-- what the outer SELECT projects).
SELECT set_config('lock_timeout', @timeout::text, true)
FROM (SELECT pg_advisory_xact_lock_shared(hashtext(@lock::text)) OFFSET 0) share;

-- name: StopSaleRead :batchmany
-- StopSaleRead reads the switch for everything (an empty client) and the active
-- switches of clients among a batch's clients.
SELECT ''::text AS client, s.active, s.reason FROM stop_sale s
UNION ALL
SELECT c.client, c.active, c.reason FROM stop_sale_clients c
WHERE c.active AND c.client = ANY(@clients::text[]);

-- name: StopSaleGet :one
SELECT * FROM stop_sale;

-- name: StopSaleLock :exec
-- StopSaleLock waits for the hold batches running now to end and keeps new
-- ones from starting until the caller's transaction ends: a flip that has
-- committed is seen by every batch after it, and by none before.
SELECT pg_advisory_xact_lock(hashtext('stockhold.stop_sale'));

-- name: StopSaleSet :one
UPDATE stop_sale
SET active = @active, reason = sqlc.narg('reason'), actor = @actor, actor_key = sqlc.narg('actor_key'),
    rule = sqlc.narg('rule'), changed_at = now()
RETURNING *;

-- name: StopSaleClientSet :one
-- StopSaleClientSet flips one client's switch (after StopSaleLock).
INSERT INTO stop_sale_clients (client, active, reason, actor, actor_key, rule, changed_at)
VALUES (@client, @active, sqlc.narg('reason'), @actor, sqlc.narg('actor_key'), sqlc.narg('rule'), now())
ON CONFLICT (client) DO UPDATE
SET active = excluded.active, reason = excluded.reason, actor = excluded.actor, actor_key = excluded.actor_key,
    rule = excluded.rule, changed_at = excluded.changed_at
RETURNING *;

-- name: StopSaleClientGet :one
SELECT * FROM stop_sale_clients WHERE client = @client;

-- name: StopSaleClientList :many
-- StopSaleClientList is every client's switch, by client.
SELECT * FROM stop_sale_clients ORDER BY client COLLATE "C";

-- name: APIKeyNameExists :one
-- APIKeyNameExists reports whether any key, revoked or not, has ever had
-- name: the clients a stop-sale may name.
SELECT EXISTS (SELECT 1 FROM api_keys WHERE name = @name)::boolean;

-- name: StockPoolSKUs :many
-- StockPoolSKUs lists the SKUs that have a row in pool, in lock order.
SELECT sku FROM stock WHERE pool = @pool ORDER BY sku COLLATE "C";

-- name: StockPoolRows :many
-- StockPoolRows lists the (sku, location) rows of pool, in lock order.
SELECT sku, location FROM stock WHERE pool = @pool ORDER BY sku COLLATE "C", location COLLATE "C";

-- name: StockBooks :one
-- StockBooks is one pool's counters beside its ledger (the checkpoint plus
-- the ledger rows written after it, as reconciliation sums it), the lines
-- of its held and confirmed holds, what the transfers in transit to it
-- and the open inbound lines at it carry (what its incoming must be), the
-- units its holds' lines were promised and not yet filled (what backordered
-- must be), its backorder policy (what backordered may be) and, for a pool of units with an
-- identity, its units by status. Read after the row is locked (StockLock),
-- in a later statement, nothing can move them until the transaction ends.
SELECT s.sku, s.location, s.pool, s.status, s.paused_reason, s.version, s.serialized,
       s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short,
       s.backordered, s.backorder_limit, s.backorder_horizon_days,
       u.available::bigint AS units_available, u.held::bigint AS units_held, u.sold::bigint AS units_sold,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.total END) + m.total)::bigint AS ledger_total,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.available END) + m.available)::bigint AS ledger_available,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.reserved END) + m.reserved)::bigint AS ledger_reserved,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.sold END) + m.sold)::bigint AS ledger_sold,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.quality_control END) + m.quality_control)::bigint AS ledger_quality_control,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.damaged END) + m.damaged)::bigint AS ledger_damaged,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.safety_stock END) + m.safety_stock)::bigint AS ledger_safety_stock,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.incoming END) + m.incoming)::bigint AS ledger_incoming,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.short END) + m.short)::bigint AS ledger_short,
       ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.backordered END) + m.backordered)::bigint AS ledger_backordered,
       l.held::bigint      AS lines_held,
       l.confirmed::bigint AS lines_confirmed,
       l.promised::bigint  AS lines_backordered,
       (SELECT coalesce(sum(e.incoming), 0) FROM incoming_expected e
        WHERE e.sku = s.sku AND e.location = s.location AND e.pool = s.pool)::bigint AS in_transit
FROM stock s
LEFT JOIN ledger_checkpoints c ON c.sku = s.sku AND c.location = s.location AND c.pool = s.pool
CROSS JOIN LATERAL (
    SELECT coalesce(sum(g.delta_total), 0)::bigint           AS total,
           coalesce(sum(g.delta_available), 0)::bigint       AS available,
           coalesce(sum(g.delta_reserved), 0)::bigint        AS reserved,
           coalesce(sum(g.delta_sold), 0)::bigint            AS sold,
           coalesce(sum(g.delta_quality_control), 0)::bigint AS quality_control,
           coalesce(sum(g.delta_damaged), 0)::bigint         AS damaged,
           coalesce(sum(g.delta_safety_stock), 0)::bigint    AS safety_stock,
           coalesce(sum(g.delta_incoming), 0)::bigint        AS incoming,
           coalesce(sum(g.delta_short), 0)::bigint           AS short,
           coalesce(sum(g.delta_backordered), 0)::bigint     AS backordered
    FROM ledger g
    WHERE g.sku = s.sku AND g.id > coalesce(c.ledger_id, 0) AND g.location = s.location AND g.pool = s.pool
) m
CROSS JOIN LATERAL (
    SELECT coalesce(sum(x.quantity - x.backordered) FILTER (WHERE r.status = 'held'), 0)      AS held,
           coalesce(sum(x.quantity - x.backordered) FILTER (WHERE r.status = 'confirmed'), 0) AS confirmed,
           coalesce(sum(x.backordered), 0)                                                    AS promised
    FROM reservation_lines x
    JOIN reservations r ON r.id = x.reservation_id
    WHERE x.sku = s.sku AND x.location = s.location AND x.pool = s.pool AND r.status IN ('held', 'confirmed')
) l
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE v.status = 'available') AS available,
           count(*) FILTER (WHERE v.status = 'held') AS held,
           count(*) FILTER (WHERE v.status = 'sold') AS sold
    FROM units v
    WHERE s.serialized AND v.sku = s.sku AND v.location = s.location AND v.pool = s.pool
) u
WHERE s.sku = @sku AND s.location = @location AND s.pool = @pool;

-- name: StockRepairSet :one
-- StockRepairSet sets a locked pool's counters (a repair to the ledger; a
-- repair to the counters gives them unchanged) and bumps its version, which
-- the repair's ledger row then carries.
UPDATE stock
SET total = @total, available = @available, reserved = @reserved, sold = @sold,
    quality_control = @quality_control, damaged = @damaged, safety_stock = @safety_stock, incoming = @incoming, short = @short,
    backordered = @backordered,
    version = version + 1,
    feed_xid = greatest(feed_xid, pg_current_xact_id()),
    updated_at = now()
WHERE sku = @sku AND location = @location AND pool = @pool
RETURNING *;

-- name: StockPausedList :many
-- StockPausedList is every paused pool with its latest pause's actor and
-- time: the switches in force, for the console. An ended campaign's
-- pool, paused for good, is its history, not a switch (see StockListBySKU).
SELECT s.sku, s.location, s.pool, s.paused_reason, s.updated_at,
       p.actor AS paused_by, p.at AS paused_at
FROM stock s
LEFT JOIN LATERAL (
    SELECT g.actor, g.at FROM ledger g
    WHERE g.sku = s.sku AND g.location = s.location AND g.pool = s.pool AND g.kind = 'pause'
    ORDER BY g.id DESC LIMIT 1
) p ON true
WHERE s.status = 'paused'
  AND NOT (s.pool <> 'main' AND s.total = s.sold AND s.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = s.pool AND c.status = 'rolled_back'))
ORDER BY s.pool = 'main' DESC, s.pool COLLATE "C", s.sku COLLATE "C", s.location COLLATE "C"
LIMIT @lim;

-- name: StockLowest :many
-- StockLowest lists pools by what they have left, lowest first: those at
-- or below their low-stock threshold before the others. It scans the stock
-- table (the console's overview; no index on a counter every hold moves).
-- Ended campaigns' pools are left out (see StockListBySKU).
SELECT s.sku, s.location, s.pool, s.total, s.available, s.reserved, s.sold, s.status, s.low_threshold, s.serialized,
       (s.low_threshold IS NOT NULL AND s.available <= s.low_threshold)::boolean AS low
FROM stock s
WHERE NOT (s.pool <> 'main' AND s.total = s.sold AND s.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = s.pool AND c.status = 'rolled_back'))
ORDER BY (s.low_threshold IS NOT NULL AND s.available <= s.low_threshold) DESC, s.available, s.sku COLLATE "C",
         s.location COLLATE "C", s.pool COLLATE "C"
LIMIT @lim;

-- name: StockPoolsPage :many
-- StockPoolsPage lists pools one by one (never summed across pools: a
-- campaign's units are not main's, nor one location's another's), by SKU,
-- location then pool, whose SKU starts with pattern (LIKE-escaped by the
-- caller); ended campaigns' pools are left out (see StockListBySKU).
SELECT s.sku, s.location, s.pool, s.total, s.available, s.reserved, s.sold, s.status, s.low_threshold, s.serialized
FROM stock s
WHERE s.sku LIKE @pattern::text
  AND NOT (s.pool <> 'main' AND s.total = s.sold AND s.incoming = 0
     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = s.pool AND c.status = 'rolled_back'))
ORDER BY s.sku, s.location, s.pool
LIMIT @lim;

-- name: ReservationsExpiring :many
-- ReservationsExpiring lists holds whose expiry is before expires_before,
-- soonest first, after the hold after_id (a previous page's last) in that
-- order, filtered like ReservationsList.
SELECT r.* FROM reservations r
WHERE r.expires_at < @expires_before
  AND (sqlc.narg('after_id')::uuid IS NULL OR (r.expires_at, r.id) > (
        SELECT a.expires_at, a.id FROM reservations a WHERE a.id = sqlc.narg('after_id')::uuid))
  AND (sqlc.narg('client')::text IS NULL OR r.client = sqlc.narg('client')::text)
  AND (sqlc.narg('order_ref')::text IS NULL OR r.order_ref = sqlc.narg('order_ref')::text)
  AND (sqlc.narg('status')::text IS NULL OR r.status = sqlc.narg('status')::text)
  AND (sqlc.narg('sku')::text IS NULL OR EXISTS (
        SELECT 1 FROM reservation_lines l WHERE l.reservation_id = r.id AND l.sku = sqlc.narg('sku')::text))
ORDER BY r.expires_at, r.id
LIMIT @lim;

-- name: RollbackSKUs :many
-- RollbackSKUs lists the SKUs a rollback's scope covers: the lines of its
-- holds, its campaign's allotments, or its SKU (a scope of a location
-- alone covers every SKU there: the caller reconciles them all).
SELECT DISTINCT x.sku FROM (
    SELECT l.sku FROM reservation_lines l WHERE l.reservation_id = ANY(@ids::uuid[])
    UNION ALL
    SELECT a.sku FROM campaign_allotments a WHERE a.campaign = sqlc.narg('campaign')::text
    UNION ALL
    SELECT sqlc.narg('sku')::text WHERE sqlc.narg('sku')::text IS NOT NULL
) x
ORDER BY x.sku;

-- name: AlertTake :one
-- AlertTake makes operator the owner of an alert that is not resolved.
UPDATE alerts
SET owner = @operator, owner_key = sqlc.narg('owner_key'), taken_at = now()
WHERE id = @id AND status <> 'resolved'
RETURNING *;

-- name: StockListByPool :many
-- StockListByPool is every row of one pool, by SKU and location.
SELECT * FROM stock WHERE pool = @pool ORDER BY sku COLLATE "C", location COLLATE "C";

-- name: RollbackReconcileSet :exec
-- RollbackReconcileSet records the reconciliation a finished manual
-- rollback asked for.
UPDATE rollback_requests SET reconcile_run_id = @run_id WHERE id = @id;

-- name: HoldsOverdueCount :one
-- HoldsOverdueCount counts held holds past their expiry, up to lim (the
-- expiry backlog; the partial index on held holds' expiry serves it).
SELECT count(*)::bigint FROM (
    SELECT 1 FROM reservations WHERE status = 'held' AND expires_at < now() LIMIT @lim
) x;

-- name: ReservationsConfirmedRecent :many
-- ReservationsConfirmedRecent is the latest confirmed orders, newest
-- first (the console's overview).
SELECT * FROM reservations WHERE status = 'confirmed' ORDER BY confirmed_at DESC LIMIT @lim;

-- name: StockRecent :many
-- StockRecent lists the pools that changed last, one row per pool (the
-- console's SKU list before any search).
SELECT s.sku, s.location, s.pool, s.total, s.available, s.reserved, s.sold, s.status, s.low_threshold, s.serialized
FROM stock s
ORDER BY s.updated_at DESC, s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C"
LIMIT @lim;

-- name: ReservationsLiveOnPool :many
-- ReservationsLiveOnPool lists the held and confirmed holds with a line on
-- one pool at one location, newest first, up to lim: the holds a books
-- alert affects.
SELECT r.id, r.order_ref, r.status, x.quantity
FROM reservation_lines x
JOIN reservations r ON r.id = x.reservation_id
WHERE x.sku = @sku AND x.location = @location AND x.pool = @pool AND r.status IN ('held', 'confirmed')
ORDER BY r.id DESC
LIMIT @lim;

-- name: TripCountsAdd :exec
-- TripCountsAdd records what one instance saw in a period, adding to what
-- it recorded for that period before.
INSERT INTO trip_counts (period, rule, instance, sku, location, pool, n, total)
SELECT @period::timestamptz, unnest(@rules::text[]), @instance::text, unnest(@skus::text[]), unnest(@locations::text[]),
       unnest(@pools::text[]), unnest(@ns::bigint[]), unnest(@totals::bigint[])
ON CONFLICT (period, rule, instance, sku, location, pool) DO UPDATE
SET n = trip_counts.n + excluded.n, total = trip_counts.total + excluded.total;

-- name: TripCountsSum :many
-- TripCountsSum is what every instance saw of rule in a period, per stock
-- row (sku, location and pool empty: the rule's count for all), most
-- first.
SELECT sku, location, pool, sum(n)::bigint AS n, sum(total)::bigint AS total, count(DISTINCT instance)::bigint AS instances
FROM trip_counts
WHERE period = @period AND rule = @rule
GROUP BY sku, location, pool
ORDER BY sum(n) DESC, sku COLLATE "C", location COLLATE "C", pool COLLATE "C"
LIMIT @lim;

-- name: TripPeriodDecide :one
-- TripPeriodDecide records a rule's verdict on a period unless another
-- instance did: a row back means this caller decided, and acts.
INSERT INTO trip_periods (period, rule, over, details, decided_by)
VALUES (@period, @rule, @over, @details, @decided_by)
ON CONFLICT (rule, period) DO NOTHING
RETURNING rule;

-- name: TripPeriodsOver :one
-- TripPeriodsOver counts the periods of rule from since to until
-- (included) that were over target.
SELECT count(*)::bigint FROM trip_periods
WHERE rule = @rule AND over AND period >= @since AND period <= @until;

-- name: TripCountsDeleteOld :exec
-- TripCountsDeleteOld deletes the counts and verdicts of periods before
-- older_than.
WITH counts AS (DELETE FROM trip_counts c WHERE c.period < @older_than::timestamptz)
DELETE FROM trip_periods p WHERE p.period < @older_than::timestamptz;

-- name: HoldsOverdueByPool :many
-- HoldsOverdueByPool is the pools of the lim held holds longest past their
-- expiry (sampled: how many holds that is), with how many of them each
-- has a line on, most first.
WITH r AS (
    SELECT id FROM reservations WHERE status = 'held' AND expires_at < now() ORDER BY expires_at LIMIT @lim
)
SELECT l.sku, l.location, l.pool, count(*)::bigint AS holds, (SELECT count(*) FROM r)::bigint AS sampled
FROM r
JOIN reservation_lines l ON l.reservation_id = r.id
GROUP BY l.sku, l.location, l.pool
ORDER BY count(*) DESC, l.sku COLLATE "C", l.location COLLATE "C", l.pool COLLATE "C"
LIMIT 20;

-- name: LedgerLastPause :one
-- LedgerLastPause is the latest pause of a pool: who, with which key, why
-- and when (what a resume lifts).
SELECT actor, actor_key, reason, at FROM ledger
WHERE sku = @sku AND location = @location AND pool = @pool AND kind = 'pause'
ORDER BY id DESC
LIMIT 1;
