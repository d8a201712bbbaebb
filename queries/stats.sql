-- name: StatsHoldsCreated :one
-- StatsHoldsCreated counts the holds created in the last window_seconds by
-- the status they have now (the BRIN index on created_at keeps the scan to
-- the window).
SELECT count(*)::bigint                                     AS created,
       count(*) FILTER (WHERE status = 'held')::bigint      AS held,
       count(*) FILTER (WHERE status = 'confirmed')::bigint AS confirmed,
       count(*) FILTER (WHERE status = 'released')::bigint  AS released,
       count(*) FILTER (WHERE status = 'expired')::bigint   AS expired
FROM reservations
WHERE created_at >= now() - make_interval(secs => @window_seconds::float8);

-- name: StatsHoldsOpen :one
-- StatsHoldsOpen counts the holds held now, and those among them more than
-- stuck_after_seconds past their expiry (the partial index on held holds
-- keeps it cheap). as_of is the transaction's clock, the "now" of both
-- stats queries when they share a transaction.
SELECT now()::timestamptz                                  AS as_of,
       count(*)::bigint                                    AS open,
       count(*) FILTER (WHERE expires_at < now() - make_interval(secs => @stuck_after_seconds::float8))::bigint AS stuck
FROM reservations
WHERE status = 'held';
