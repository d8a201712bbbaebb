-- The daily report: what the ledger recorded in a time range, per (sku,
-- location, pool) and kind, per pool name, per location and in all, and
-- the reconciliation runs of that range. The ledger is read through
-- ledger_at (BRIN on at).

-- name: ReportRows :many
-- ReportRows sums the ledger rows from from_at (included) to to_at
-- (excluded) per (sku, location, pool) and kind, for the first lim stock
-- rows in (sku, location, pool) byte order after (after_sku,
-- after_location, after_pool): each kind's rows, its change of every
-- state and of backordered, and (for moves) the units moved, the sum of what the states that
-- gained gained.
WITH g AS (
    SELECT g.sku, g.location, g.pool, g.kind,
           count(*)::bigint                        AS movements,
           sum(g.delta_total)::bigint              AS total,
           sum(g.delta_available)::bigint          AS available,
           sum(g.delta_reserved)::bigint           AS reserved,
           sum(g.delta_sold)::bigint               AS sold,
           sum(g.delta_quality_control)::bigint    AS quality_control,
           sum(g.delta_damaged)::bigint            AS damaged,
           sum(g.delta_safety_stock)::bigint       AS safety_stock,
           sum(g.delta_incoming)::bigint           AS incoming,
           sum(g.delta_short)::bigint              AS short,
           sum(g.delta_backordered)::bigint        AS backordered,
           sum(greatest(g.delta_available, 0) + greatest(g.delta_quality_control, 0)
               + greatest(g.delta_damaged, 0) + greatest(g.delta_safety_stock, 0))::bigint AS gained
    FROM ledger g
    WHERE g.at >= @from_at AND g.at < @to_at
      AND (g.sku COLLATE "C" > @after_sku::text
           OR (g.sku = @after_sku::text AND (g.location COLLATE "C" > @after_location::text
               OR (g.location = @after_location::text AND g.pool COLLATE "C" > @after_pool::text))))
    GROUP BY g.sku, g.location, g.pool, g.kind
), page AS (
    SELECT g.sku, g.location, g.pool FROM g
    GROUP BY g.sku, g.location, g.pool
    ORDER BY g.sku COLLATE "C", g.location COLLATE "C", g.pool COLLATE "C"
    LIMIT @lim
)
SELECT g.sku::text AS sku, g.location::text AS location, g.pool::text AS pool, g.kind::text AS kind,
       g.movements, g.total, g.available, g.reserved, g.sold, g.quality_control, g.damaged, g.safety_stock,
       g.incoming, g.short, g.backordered, g.gained
FROM g
JOIN page p ON p.sku = g.sku AND p.location = g.location AND p.pool = g.pool
ORDER BY g.sku COLLATE "C", g.location COLLATE "C", g.pool COLLATE "C", g.kind COLLATE "C";

-- name: ReportSums :many
-- ReportSums is ReportRows summed per kind over the whole range: per pool
-- name (main, and each campaign's pool) over its SKUs and locations (the
-- row's by_pool is true), per location over its SKUs and pools
-- (by_location), and over everything (neither), in one pass.
SELECT coalesce(g.pool, '')::text AS pool, coalesce(g.location, '')::text AS location, g.kind::text AS kind,
       (grouping(g.pool) = 0)::boolean     AS by_pool,
       (grouping(g.location) = 0)::boolean AS by_location,
       count(*)::bigint                        AS movements,
       sum(g.delta_total)::bigint              AS total,
       sum(g.delta_available)::bigint          AS available,
       sum(g.delta_reserved)::bigint           AS reserved,
       sum(g.delta_sold)::bigint               AS sold,
       sum(g.delta_quality_control)::bigint    AS quality_control,
       sum(g.delta_damaged)::bigint            AS damaged,
       sum(g.delta_safety_stock)::bigint       AS safety_stock,
       sum(g.delta_incoming)::bigint           AS incoming,
       sum(g.delta_short)::bigint              AS short,
       sum(g.delta_backordered)::bigint        AS backordered,
       sum(greatest(g.delta_available, 0) + greatest(g.delta_quality_control, 0)
           + greatest(g.delta_damaged, 0) + greatest(g.delta_safety_stock, 0))::bigint AS gained
FROM ledger g
WHERE g.at >= @from_at AND g.at < @to_at
GROUP BY GROUPING SETS ((g.pool, g.kind), (g.location, g.kind), (g.kind))
ORDER BY grouping(g.pool) DESC, grouping(g.location) DESC, g.pool COLLATE "C", g.location COLLATE "C", g.kind COLLATE "C";

-- name: ReportRuns :one
-- ReportRuns counts the reconciliation runs created from from_at to to_at
-- and what they found.
SELECT count(*)::bigint                                       AS runs,
       count(*) FILTER (WHERE status = 'failed')::bigint       AS failed,
       coalesce(sum(auto_fixed), 0)::bigint                    AS auto_fixed,
       coalesce(sum(retried), 0)::bigint                       AS retried,
       coalesce(sum(high_risk), 0)::bigint                     AS high_risk
FROM reconcile_runs
WHERE created_at >= @from_at AND created_at < @to_at;

-- name: ReportRunsWithFindings :many
-- ReportRunsWithFindings lists the runs created from from_at to to_at
-- that found something or failed, in order, up to lim.
SELECT id, trigger, status, created_at, finished_at, rows_checked, auto_fixed, retried, high_risk, error
FROM reconcile_runs
WHERE created_at >= @from_at AND created_at < @to_at
  AND (auto_fixed + retried + high_risk > 0 OR status = 'failed')
ORDER BY id
LIMIT @lim;

-- name: ReportFindings :many
-- ReportFindings lists the findings of runs, by run then id, up to lim
-- per run.
SELECT f.run_id, f.class, f.kind, f.sku, f.pool, f.reservation_id, f.job_id, f.action
FROM unnest(@run_ids::bigint[]) AS r(id)
CROSS JOIN LATERAL (
    SELECT x.id, x.run_id, x.class, x.kind, x.sku, x.pool, x.reservation_id, x.job_id, x.action
    FROM reconcile_findings x
    WHERE x.run_id = r.id
    ORDER BY x.id
    LIMIT @lim
) f
ORDER BY f.run_id, f.id;
