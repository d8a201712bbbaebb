-- stock_health.sql: do the books balance, per SKU and pool?
--
--   psql "$DATABASE_URL" -X -f sql/stock_health.sql
--   psql "$DATABASE_URL" -X -v sku=A1 -f sql/stock_health.sql      (one SKU)
--   psql "$DATABASE_URL" -X -v limit=5000 -f sql/stock_health.sql
--
-- Read only, but it reads the stock_health view (migration 00009), which
-- sums every line of every hold and the WHOLE ledger: on a big database run
-- it on a replica or off peak, or for one SKU. The periodic reconciliation
-- does the same checks cheaply from checkpoints; this file is for people.
--
-- How to read it (per (sku, pool), from the view):
--   counters_ok  total = available + reserved + sold, nothing negative
--                (the CHECK constraints make a false here impossible).
--   lines_ok     reserved = the lines of `held` holds (lines_held) and
--                sold = the lines of `confirmed` holds (lines_confirmed).
--   ledger_ok    each counter = the sum of its ledger deltas (ledger_*).
--   ok           all three.
--   1. Summary: rows, rows not ok by invariant, paused rows.
--   2. Every row, the ones that are not ok first, then paused ones, then the
--      rest by sku and pool (`limit` rows, default 200). `paused_reason`
--      says who paused a pool and why (reconciliation pauses a pool whose
--      books disagree).
--
-- What to do next with a row that is not ok:
--   - Do not "fix" counters by hand: the ledger is append-only and the
--     difference is the evidence. Pause the pool if it is not paused yet
--     (POST /v1/skus/{sku}/pause), keeping new holds out.
--   - ledger_for_hold.sql explains every unit of one hold; the ledger of the
--     SKU is `GET /v1/skus/{sku}/ledger` or
--     SELECT * FROM ledger WHERE sku = '...' AND pool = '...' ORDER BY id;
--   - Find the open alert for it in open_alerts.sql (kind and subject
--     'sku:<sku>/<pool>') and the reconciliation's finding
--     (GET /v1/reconciliations/latest).
--   - Once explained and corrected (an adjustment with a reason, through the
--     API so it is in the ledger), resume the pool with a reason.

\if :{?sku} \else \set sku '' \endif
\if :{?limit} \else \set limit 200 \endif

\echo '== 1. Summary =='
SELECT count(*)                              AS stock_rows,
       count(*) FILTER (WHERE NOT ok)          AS not_ok,
       count(*) FILTER (WHERE NOT counters_ok) AS counters_not_ok,
       count(*) FILTER (WHERE NOT lines_ok)    AS lines_not_ok,
       count(*) FILTER (WHERE NOT ledger_ok)   AS ledger_not_ok,
       count(*) FILTER (WHERE status = 'paused') AS paused
FROM stock_health
WHERE :'sku' = '' OR sku = :'sku';

\echo '== 2. Per SKU and pool, not ok first =='
SELECT h.sku, h.pool, h.ok, h.counters_ok, h.lines_ok, h.ledger_ok, h.status,
       h.total, h.available, h.reserved, h.sold,
       h.lines_held, h.lines_confirmed,
       h.ledger_total, h.ledger_available, h.ledger_reserved, h.ledger_sold,
       s.paused_reason, date_trunc('second', s.updated_at) AS updated_at
FROM stock_health h
JOIN stock s ON s.sku = h.sku AND s.pool = h.pool
WHERE :'sku' = '' OR h.sku = :'sku'
ORDER BY h.ok, h.status = 'on_sale', h.sku, h.pool
LIMIT :limit;

-- Forget the values, so that the next \i of this file in the same session
-- starts from the defaults again.
\unset sku
\unset limit
