-- The daily report: what the ledger recorded in a time range, per (sku,
-- pool), per pool name and in all, and the reconciliation runs of that
-- range. The ledger is read through ledger_at (BRIN on at).

-- name: ReportPools :many
-- ReportPools sums the ledger rows from from_at (included) to to_at
-- (excluded) per (sku, pool), in (sku, pool) byte order after the pool
-- (after_sku, after_pool), up to lim pools. Units: held is what holds
-- reserved, confirmed what was sold, released what cancels gave back
-- (whole or part), expired what expiries gave back, rolled_back what
-- rollbacks gave back; adjusted is the net change of total by adjustments
-- and stock-ins, transferred by campaign transfers; repairs counts repairs.
SELECT g.sku::text AS sku, g.pool::text AS pool,
       coalesce(sum(g.delta_reserved) FILTER (WHERE g.kind = 'reserve'), 0)::bigint                         AS held,
       coalesce(sum(g.delta_sold) FILTER (WHERE g.kind = 'confirm'), 0)::bigint                             AS confirmed,
       coalesce(-sum(g.delta_reserved) FILTER (WHERE g.kind IN ('release', 'release_partial')), 0)::bigint AS released,
       coalesce(-sum(g.delta_reserved) FILTER (WHERE g.kind = 'expire'), 0)::bigint                         AS expired,
       coalesce(-sum(g.delta_reserved) FILTER (WHERE g.kind = 'rollback'), 0)::bigint                       AS rolled_back,
       coalesce(sum(g.delta_total) FILTER (WHERE g.kind IN ('adjust', 'stock_in')), 0)::bigint             AS adjusted,
       coalesce(sum(g.delta_total) FILTER (WHERE g.kind = 'transfer'), 0)::bigint                           AS transferred,
       count(*) FILTER (WHERE g.kind = 'repair')::bigint                                                   AS repairs,
       count(*)::bigint                                                                                    AS movements
FROM ledger g
WHERE g.at >= @from_at AND g.at < @to_at
  AND (g.sku COLLATE "C" > @after_sku::text OR (g.sku = @after_sku::text AND g.pool COLLATE "C" > @after_pool::text))
GROUP BY g.sku, g.pool
ORDER BY g.sku COLLATE "C", g.pool COLLATE "C"
LIMIT @lim;

-- name: ReportByPool :many
-- ReportByPool is ReportPools summed per pool name over its SKUs (main,
-- and each campaign's pool: a campaign's figures), and over everything
-- (the row whose everything is true), in one pass over the range.
SELECT coalesce(g.pool, '')::text AS pool, (grouping(g.pool) = 1)::boolean AS everything,
       coalesce(sum(g.delta_reserved) FILTER (WHERE g.kind = 'reserve'), 0)::bigint                         AS held,
       coalesce(sum(g.delta_sold) FILTER (WHERE g.kind = 'confirm'), 0)::bigint                             AS confirmed,
       coalesce(-sum(g.delta_reserved) FILTER (WHERE g.kind IN ('release', 'release_partial')), 0)::bigint AS released,
       coalesce(-sum(g.delta_reserved) FILTER (WHERE g.kind = 'expire'), 0)::bigint                         AS expired,
       coalesce(-sum(g.delta_reserved) FILTER (WHERE g.kind = 'rollback'), 0)::bigint                       AS rolled_back,
       coalesce(sum(g.delta_total) FILTER (WHERE g.kind IN ('adjust', 'stock_in')), 0)::bigint             AS adjusted,
       coalesce(sum(g.delta_total) FILTER (WHERE g.kind = 'transfer'), 0)::bigint                           AS transferred,
       count(*) FILTER (WHERE g.kind = 'repair')::bigint                                                   AS repairs,
       count(*)::bigint                                                                                    AS movements
FROM ledger g
WHERE g.at >= @from_at AND g.at < @to_at
GROUP BY GROUPING SETS ((g.pool), ())
ORDER BY grouping(g.pool) DESC, g.pool COLLATE "C";

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
