-- ledger_for_hold.sql: every movement of stock for one hold, and whether
-- they explain its every unit.
--
--   psql "$DATABASE_URL" -X -v id=<reservation uuid> -f sql/ledger_for_hold.sql
--
-- Without -v id, it shows the newest hold (edit the default below to pin
-- one). Read only; uses the ledger's index on reservation_id.
--
-- How to read it:
--   1. The hold: status, client, order, campaign, expiry, and who ended it
--      why (release_reason, released_by).
--   2. Its ledger rows in order: `reserve` moved each line from available
--      to reserved; then exactly one of `confirm` (reserved to sold),
--      `release` (a cancel), `expire` (its expiry job or the sweeper) or
--      `rollback` (a manual rollback or a campaign end; actor is the
--      operator). actor and reason say who and why.
--   3. Per line, what the ledger rows add up to next to what the hold's
--      status says they must: held: reserved +quantity; confirmed: sold
--      +quantity; released or expired: nothing left (the units went back
--      to available). `explained` is false where they differ.
--
-- What to do next:
--   - explained false, or a line with two hand-backs: the books are wrong
--     for that SKU; stock_health.sql shows the pool, and it should have been
--     paused by reconciliation (open_alerts.sql). Do not correct by hand.
--   - A held hold past its expiry: stuck_holds.sql.

\if :{?id} \else \set id '' \endif
-- The default: the newest hold (the nil UUID when there is none).
SELECT coalesce(nullif(:'id', ''),
                (SELECT id::text FROM reservations ORDER BY created_at DESC, id DESC LIMIT 1),
                '00000000-0000-0000-0000-000000000000') AS id \gset

\echo '== 1. The hold =='
SELECT id, status, client, order_ref, campaign,
       date_trunc('second', created_at)   AS created_at,
       date_trunc('second', expires_at)   AS expires_at,
       date_trunc('second', confirmed_at) AS confirmed_at,
       date_trunc('second', released_at)  AS released_at,
       release_reason, released_by
FROM reservations
WHERE id = :'id';

\echo '== 2. Its ledger rows =='
SELECT id, at, kind, sku, pool, delta_total, delta_available, delta_reserved, delta_sold,
       stock_version, actor, reason, ref
FROM ledger
WHERE reservation_id = :'id'
ORDER BY id;

\echo '== 3. Does the ledger explain every unit? =='
SELECT l.sku, l.pool, l.quantity, r.status,
       coalesce(g.available, 0) AS ledger_available,
       coalesce(g.reserved, 0)  AS ledger_reserved,
       coalesce(g.sold, 0)      AS ledger_sold,
       coalesce(g.total, 0)     AS ledger_total,
       g.moves,
       coalesce(g.available, 0) = CASE r.status WHEN 'held' THEN -l.quantity WHEN 'confirmed' THEN -l.quantity ELSE 0 END
       AND coalesce(g.reserved, 0) = CASE r.status WHEN 'held' THEN l.quantity ELSE 0 END
       AND coalesce(g.sold, 0) = CASE r.status WHEN 'confirmed' THEN l.quantity ELSE 0 END
       AND coalesce(g.total, 0) = 0 AS explained
FROM reservations r
JOIN reservation_lines l ON l.reservation_id = r.id
LEFT JOIN LATERAL (
    SELECT sum(delta_available) AS available, sum(delta_reserved) AS reserved,
           sum(delta_sold) AS sold, sum(delta_total) AS total,
           string_agg(kind, ' > ' ORDER BY id) AS moves
    FROM ledger
    WHERE reservation_id = r.id AND sku = l.sku AND pool = l.pool
) g ON true
WHERE r.id = :'id'
ORDER BY l.sku, l.pool;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset id
