-- Reconciliation: the runs and their findings, the set-based checks of the
-- books (one statement each, whatever the number of SKUs) and the lock that
-- lets one run check at a time. The invariants cited by number are those of
-- docs/internals/ARCHITECTURE.md.

-- name: ReconcileRunCreate :one
-- ReconcileRunCreate records a run asked for; it is pending until a worker
-- (or the CLI) holds the reconciliation lock and starts it.
INSERT INTO reconcile_runs (trigger, skus)
VALUES (@trigger, sqlc.narg('skus')::text[])
RETURNING *;

-- name: ReconcileRunGet :one
SELECT * FROM reconcile_runs WHERE id = @id;

-- name: ReconcileRunLatest :one
SELECT * FROM reconcile_runs ORDER BY id DESC LIMIT 1;

-- name: ReconcileRunStart :one
-- ReconcileRunStart marks a run running. A run that already succeeded is
-- left alone (no row): a duplicated or retried job does not check again.
UPDATE reconcile_runs
SET status = 'running', started_at = coalesce(started_at, now()), error = NULL, finished_at = NULL
WHERE id = @id AND status <> 'succeeded'
RETURNING *;

-- name: ReconcileRunFinish :one
-- ReconcileRunFinish ends a run, counting its findings: holds released,
-- jobs re-enqueued (retried or stranded chains resumed) and high-risk
-- findings; it records the run's scope and watermarks.
UPDATE reconcile_runs r
SET status = @status,
    error = sqlc.narg('error'),
    rows_checked = @rows_checked,
    scope = sqlc.narg('scope'),
    snapshot_xmin = sqlc.narg('snapshot_xmin'),
    since_xmin = sqlc.narg('since_xmin'),
    auto_fixed = f.auto_fixed,
    retried = f.retried,
    high_risk = f.high_risk,
    finished_at = now()
FROM (
    SELECT count(*) FILTER (WHERE kind = 'stuck_hold')::int  AS auto_fixed,
           count(*) FILTER (WHERE kind IN ('job_retried', 'chain_resumed'))::int AS retried,
           count(*) FILTER (WHERE class = 'high_risk')::int  AS high_risk
    FROM reconcile_findings
    WHERE run_id = @id
) f
WHERE r.id = @id
RETURNING r.*;

-- name: ReconcileLock :exec
-- ReconcileLock waits for the lock that lets one reconciliation check (and
-- move ledger checkpoints) at a time. It is held until the end of the
-- caller's transaction, and released if its connection dies.
SELECT pg_advisory_xact_lock(hashtext('stockhold.reconcile'));

-- name: ReconcileWatermark :one
-- ReconcileWatermark is the snapshot xmin of the last clean run (over every
-- SKU, succeeded, no high-risk finding), when the last full (or deep) run
-- over every SKU finished, and when the last deep one did (the first run
-- ever made, when none did: the deep schedule starts there); no row means
-- no clean run yet. Every ledger row that
-- run did not see has a feed_xid at or above the watermark, so the rows
-- whose ledger moved since are found from it.
SELECT c.snapshot_xmin::xid8 AS snapshot_xmin,
       coalesce((SELECT max(f.finished_at) FROM reconcile_runs f
        WHERE f.status = 'succeeded' AND f.scope IN ('full', 'deep') AND f.skus IS NULL), 'epoch')::timestamptz AS last_full_at,
       coalesce((SELECT max(d.finished_at) FROM reconcile_runs d
        WHERE d.status = 'succeeded' AND d.scope = 'deep' AND d.skus IS NULL),
        (SELECT min(f.created_at) FROM reconcile_runs f))::timestamptz AS last_deep_at
FROM reconcile_runs c
WHERE c.status = 'succeeded' AND c.high_risk = 0 AND c.skus IS NULL AND c.snapshot_xmin IS NOT NULL
ORDER BY c.finished_at DESC
LIMIT 1;

-- name: ReconcileEverChecked :one
-- ReconcileEverChecked says whether a full or deep run over every SKU has
-- succeeded, clean or not: if none has, no stock row has a checkpoint
-- that run verified (a new install, or one whose first run never
-- finished).
SELECT EXISTS (SELECT 1 FROM reconcile_runs
               WHERE status = 'succeeded' AND skus IS NULL AND scope IN ('full', 'deep'))::bool AS checked;

-- name: ReconcileSnapshotXmin :one
-- ReconcileSnapshotXmin is the xmin of the caller's snapshot: every
-- transaction below it had ended when the snapshot was taken. Run first in
-- a REPEATABLE READ transaction, it takes the snapshot the run checks.
SELECT pg_snapshot_xmin(pg_current_snapshot())::xid8 AS xmin;

-- name: StockCount :one
-- StockCount counts the stock rows of skus, or all of them when skus is null.
SELECT count(*)::int AS rows
FROM stock
WHERE sqlc.narg('skus')::text[] IS NULL OR sku = ANY(sqlc.narg('skus')::text[]);

-- name: StockLinesMismatch :many
-- StockLinesMismatch lists the stock rows (of skus, or all when null) whose
-- reserved is not the sum of the lines of held reservations, or whose sold
-- is not the sum of the lines of confirmed ones, each line counting what
-- it has on hand (quantity - backordered), or whose backordered is not
-- the sum of those lines' backordered (invariant 2).
WITH lines AS (
    SELECT l.sku, l.location, l.pool,
           coalesce(sum(l.quantity - l.backordered) FILTER (WHERE r.status = 'held'), 0)::bigint      AS held,
           coalesce(sum(l.quantity - l.backordered) FILTER (WHERE r.status = 'confirmed'), 0)::bigint AS confirmed,
           coalesce(sum(l.backordered), 0)::bigint AS promised
    FROM reservation_lines l
    JOIN reservations r ON r.id = l.reservation_id
    WHERE r.status IN ('held', 'confirmed')
      AND (sqlc.narg('skus')::text[] IS NULL OR l.sku = ANY(sqlc.narg('skus')::text[]))
    GROUP BY l.sku, l.location, l.pool
)
SELECT s.sku, s.location, s.pool, s.reserved, s.sold,
       coalesce(l.held, 0)::bigint      AS lines_held,
       coalesce(l.confirmed, 0)::bigint AS lines_confirmed,
       s.backordered, coalesce(l.promised, 0)::bigint AS lines_backordered
FROM stock s
LEFT JOIN lines l ON l.sku = s.sku AND l.location = s.location AND l.pool = s.pool
WHERE (sqlc.narg('skus')::text[] IS NULL OR s.sku = ANY(sqlc.narg('skus')::text[]))
  AND (s.reserved <> coalesce(l.held, 0) OR s.sold <> coalesce(l.confirmed, 0) OR s.backordered <> coalesce(l.promised, 0))
ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C";

-- name: StockLedgerCheck :many
-- StockLedgerCheck compares stock rows with their ledger summed from each
-- row's checkpoint: the checkpoint's counters plus the deltas of the ledger
-- rows written after it, those with a greater id than the greatest it sums
-- (invariant 3), whatever stock_version they name: a row inserted by hand
-- at a version already checkpointed counts too. The run's scope says which
-- rows it checks:
--   - without since (a run over some SKUs, or the first full run): every
--     row of skus, or all of them when skus is null;
--   - with since (a full run that has a watermark): the
--     rows whose version or counters are not their checkpoint's (changed
--     since, or changed with no ledger row) and those whose ledger moved
--     since the watermark (a ledger row written behind the counters' back
--     shows there). A row in neither set has its checkpoint's counters and
--     nothing in its ledger after it: it balances.
-- (An incremental run checks the rows whose ledger moved since the
-- watermark with StockLedgerCheckMoved.)
-- The rows that moved are found in ledger_feed's range at the index's
-- right end, and each row is probed from its checkpoint, row by row,
-- whatever the planner guesses of how many moved. In the same statement
-- it moves the checkpoint of every row that balanced up to the row's
-- version, counters and greatest ledger id, so the next run sums only the
-- rows that came after and the cost does not grow with history. It
-- returns the rows that did not balance.
--
-- Read in one REPEATABLE READ snapshot this is exact: a stock row's new
-- version and the ledger rows carrying it commit together, the changes to
-- one row commit in version order, and their ledger ids grow with them
-- (each is taken under the row's lock). Only the holder of ReconcileLock
-- may run it, since it writes the checkpoints.
--
-- A new stock state goes into its seven lists: the candidates'
-- comparison, checked's counters and ledger sums, the probe, judged, and
-- the checkpoint's insert and update (StockLedgerMismatchDeep has seven).
WITH candidates AS (
    SELECT s.sku, s.location, s.pool
    FROM stock s
    WHERE sqlc.narg('since')::xid8 IS NULL
      AND (sqlc.narg('skus')::text[] IS NULL OR s.sku = ANY(sqlc.narg('skus')::text[]))
    UNION ALL (
        SELECT s.sku, s.location, s.pool
        FROM stock s
        LEFT JOIN ledger_checkpoints c ON c.sku = s.sku AND c.location = s.location AND c.pool = s.pool
        WHERE sqlc.narg('since')::xid8 IS NOT NULL
          AND (c.stock_version IS DISTINCT FROM s.version
               OR (c.total, c.available, c.reserved, c.sold, c.quality_control, c.damaged, c.safety_stock, c.incoming, c.short, c.backordered)
                  IS DISTINCT FROM (s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short, s.backordered)
               OR c.ledger_id IS NULL)
        UNION
        SELECT g.sku, g.location, g.pool FROM ledger g WHERE g.feed_xid >= sqlc.narg('since')::xid8
    )
), checked AS (
    SELECT s.sku, s.location, s.pool, s.version,
           s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short, s.backordered,
           c.stock_version AS checkpoint_version,
           c.ledger_id     AS checkpoint_ledger_id,
           greatest(coalesce(c.ledger_id, 0), coalesce(t.ledger_id, 0))::bigint AS ledger_id,
           -- A checkpoint written before checkpoints recorded their ledger
           -- id sums nothing: the row's whole ledger is probed.
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.total END) + t.total)::bigint                     AS ledger_total,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.available END) + t.available)::bigint             AS ledger_available,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.reserved END) + t.reserved)::bigint               AS ledger_reserved,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.sold END) + t.sold)::bigint                       AS ledger_sold,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.quality_control END) + t.quality_control)::bigint AS ledger_quality_control,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.damaged END) + t.damaged)::bigint                 AS ledger_damaged,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.safety_stock END) + t.safety_stock)::bigint       AS ledger_safety_stock,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.incoming END) + t.incoming)::bigint               AS ledger_incoming,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.short END) + t.short)::bigint                     AS ledger_short,
           ((CASE WHEN c.ledger_id IS NULL THEN 0 ELSE c.backordered END) + t.backordered)::bigint         AS ledger_backordered
    FROM candidates m
    JOIN stock s ON s.sku = m.sku AND s.location = m.location AND s.pool = m.pool
    LEFT JOIN ledger_checkpoints c ON c.sku = s.sku AND c.location = s.location AND c.pool = s.pool
    CROSS JOIN LATERAL (
        -- A range on ledger_sku_id: the rows written after the checkpoint,
        -- whatever stock_version they name (all of them without one).
        SELECT coalesce(sum(g.delta_total), 0)::bigint           AS total,
               coalesce(sum(g.delta_available), 0)::bigint       AS available,
               coalesce(sum(g.delta_reserved), 0)::bigint        AS reserved,
               coalesce(sum(g.delta_sold), 0)::bigint            AS sold,
               coalesce(sum(g.delta_quality_control), 0)::bigint AS quality_control,
               coalesce(sum(g.delta_damaged), 0)::bigint         AS damaged,
               coalesce(sum(g.delta_safety_stock), 0)::bigint    AS safety_stock,
               coalesce(sum(g.delta_incoming), 0)::bigint        AS incoming,
               coalesce(sum(g.delta_short), 0)::bigint           AS short,
               coalesce(sum(g.delta_backordered), 0)::bigint     AS backordered,
               max(g.id)                                         AS ledger_id
        FROM ledger g
        WHERE g.sku = s.sku AND g.id > coalesce(c.ledger_id, 0) AND g.location = s.location AND g.pool = s.pool
    ) t
), judged AS (
    SELECT ch.*,
           (ch.total, ch.available, ch.reserved, ch.sold, ch.quality_control, ch.damaged, ch.safety_stock, ch.incoming, ch.short, ch.backordered)
           = (ch.ledger_total, ch.ledger_available, ch.ledger_reserved, ch.ledger_sold, ch.ledger_quality_control,
              ch.ledger_damaged, ch.ledger_safety_stock, ch.ledger_incoming, ch.ledger_short, ch.ledger_backordered) AS balanced
    FROM checked ch
), advanced AS (
    INSERT INTO ledger_checkpoints AS lc (sku, location, pool, stock_version, ledger_id,
                                          total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short, backordered)
    SELECT j.sku, j.location, j.pool, j.version, j.ledger_id,
           j.total, j.available, j.reserved, j.sold, j.quality_control, j.damaged, j.safety_stock, j.incoming, j.short, j.backordered
    FROM judged j
    WHERE j.balanced
      AND (j.checkpoint_ledger_id IS NULL OR j.version > j.checkpoint_version OR j.ledger_id > j.checkpoint_ledger_id)
    ON CONFLICT (sku, location, pool) DO UPDATE
    SET (stock_version, ledger_id, checked_at,
         total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short, backordered)
      = (excluded.stock_version, excluded.ledger_id, now(),
         excluded.total, excluded.available, excluded.reserved, excluded.sold, excluded.quality_control,
         excluded.damaged, excluded.safety_stock, excluded.incoming, excluded.short, excluded.backordered)
    WHERE lc.ledger_id IS NULL OR lc.stock_version < excluded.stock_version OR lc.ledger_id < excluded.ledger_id
    RETURNING lc.sku
)
SELECT j.*
FROM judged j
WHERE NOT j.balanced
ORDER BY j.sku COLLATE "C", j.location COLLATE "C", j.pool COLLATE "C";

-- name: StockLedgerCheckMoved :many
-- StockLedgerCheckMoved is an incremental run's check of counters against
-- the ledger (StockLedgerCheck's, for the rows whose ledger moved since
-- the watermark since), set-based, so that its cost follows the rows that
-- moved, not the catalogue nor the ledger's history or partitions. Every
-- ledger row after a row's checkpoint is at or above the watermark (the
-- run that verified the checkpoint saw everything below it), so the rows
-- of ledger_feed's range from the watermark, read once at the index's
-- right end, are all there is to sum: each moved row's checkpoint plus
-- its rows of that range with a greater id than the checkpoint sums. A
-- row whose checkpoint sums nothing (none yet, one written before
-- checkpoints recorded their ledger id, or one an archive voided) is
-- probed for its whole ledger, as StockLedgerCheck does. A ledger row
-- written behind the counters' back with a feed_xid below the watermark
-- is a deep run's to find (ScopeDeep). It moves the checkpoint of every
-- row that balanced, as StockLedgerCheck does, and returns every row it
-- checked (balanced says which), with StockLedgerCheck's columns.
--
-- A new stock state goes into its lists here as in StockLedgerCheck.
WITH moved AS (
    -- Each row whose ledger moved, with its checkpoint (a probe per
    -- ledger row of the range: the range's few rows, a custom plan knows,
    -- from the index's right end) and the sums of its rows of the range
    -- after the checkpoint: one pass, grouped.
    SELECT g.sku, g.location, g.pool,
           c.stock_version AS checkpoint_version,
           c.ledger_id     AS checkpoint_ledger_id,
           c.total AS c_total, c.available AS c_available, c.reserved AS c_reserved, c.sold AS c_sold, c.quality_control AS c_quality_control, c.damaged AS c_damaged, c.safety_stock AS c_safety_stock, c.incoming AS c_incoming, c.short AS c_short, c.backordered AS c_backordered,
           coalesce(sum(g.delta_total) FILTER (WHERE g.id > c.ledger_id), 0)::bigint    AS after_total,
           coalesce(sum(g.delta_available) FILTER (WHERE g.id > c.ledger_id), 0)::bigint AS after_available,
           coalesce(sum(g.delta_reserved) FILTER (WHERE g.id > c.ledger_id), 0)::bigint AS after_reserved,
           coalesce(sum(g.delta_sold) FILTER (WHERE g.id > c.ledger_id), 0)::bigint     AS after_sold,
           coalesce(sum(g.delta_quality_control) FILTER (WHERE g.id > c.ledger_id), 0)::bigint AS after_quality_control,
           coalesce(sum(g.delta_damaged) FILTER (WHERE g.id > c.ledger_id), 0)::bigint  AS after_damaged,
           coalesce(sum(g.delta_safety_stock) FILTER (WHERE g.id > c.ledger_id), 0)::bigint AS after_safety_stock,
           coalesce(sum(g.delta_incoming) FILTER (WHERE g.id > c.ledger_id), 0)::bigint AS after_incoming,
           coalesce(sum(g.delta_short) FILTER (WHERE g.id > c.ledger_id), 0)::bigint    AS after_short,
           coalesce(sum(g.delta_backordered) FILTER (WHERE g.id > c.ledger_id), 0)::bigint AS after_backordered,
           max(g.id) FILTER (WHERE g.id > c.ledger_id) AS after_ledger_id
    FROM ledger g
    LEFT JOIN ledger_checkpoints c ON c.sku = g.sku AND c.location = g.location AND c.pool = g.pool
    WHERE g.feed_xid >= @since::xid8
    GROUP BY g.sku, g.location, g.pool, c.stock_version, c.ledger_id, c.total, c.available, c.reserved, c.sold, c.quality_control, c.damaged, c.safety_stock, c.incoming, c.short, c.backordered
), checked AS (
    SELECT s.sku, s.location, s.pool, s.version,
           s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short, s.backordered,
           m.checkpoint_version,
           m.checkpoint_ledger_id,
           greatest(coalesce(m.checkpoint_ledger_id, 0), coalesce(m.after_ledger_id, w.ledger_id, 0))::bigint AS ledger_id,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.total, 0) ELSE m.c_total + m.after_total END)::bigint AS ledger_total,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.available, 0) ELSE m.c_available + m.after_available END)::bigint AS ledger_available,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.reserved, 0) ELSE m.c_reserved + m.after_reserved END)::bigint AS ledger_reserved,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.sold, 0) ELSE m.c_sold + m.after_sold END)::bigint AS ledger_sold,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.quality_control, 0) ELSE m.c_quality_control + m.after_quality_control END)::bigint AS ledger_quality_control,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.damaged, 0) ELSE m.c_damaged + m.after_damaged END)::bigint AS ledger_damaged,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.safety_stock, 0) ELSE m.c_safety_stock + m.after_safety_stock END)::bigint AS ledger_safety_stock,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.incoming, 0) ELSE m.c_incoming + m.after_incoming END)::bigint AS ledger_incoming,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.short, 0) ELSE m.c_short + m.after_short END)::bigint AS ledger_short,
           (CASE WHEN m.checkpoint_ledger_id IS NULL THEN coalesce(w.backordered, 0) ELSE m.c_backordered + m.after_backordered END)::bigint AS ledger_backordered
    FROM moved m
    -- A probe per row (LIMIT 1 keeps it one, whatever the planner guesses
    -- of how many rows moved).
    CROSS JOIN LATERAL (
        SELECT x.* FROM stock x
        WHERE x.sku = m.sku AND x.location = m.location AND x.pool = m.pool
        LIMIT 1
    ) s
    LEFT JOIN LATERAL (
        -- The whole ledger of a row whose checkpoint sums nothing (a
        -- one-time filter: no probe for the others).
        SELECT sum(g.delta_total)::bigint           AS total,
               sum(g.delta_available)::bigint       AS available,
               sum(g.delta_reserved)::bigint        AS reserved,
               sum(g.delta_sold)::bigint            AS sold,
               sum(g.delta_quality_control)::bigint AS quality_control,
               sum(g.delta_damaged)::bigint         AS damaged,
               sum(g.delta_safety_stock)::bigint    AS safety_stock,
               sum(g.delta_incoming)::bigint        AS incoming,
               sum(g.delta_short)::bigint           AS short,
               sum(g.delta_backordered)::bigint     AS backordered,
               max(g.id)                            AS ledger_id
        FROM ledger g
        WHERE m.checkpoint_ledger_id IS NULL
          AND g.sku = m.sku AND g.location = m.location AND g.pool = m.pool
    ) w ON true
), judged AS (
    SELECT ch.*,
           (ch.total, ch.available, ch.reserved, ch.sold, ch.quality_control, ch.damaged, ch.safety_stock, ch.incoming, ch.short, ch.backordered)
           = (ch.ledger_total, ch.ledger_available, ch.ledger_reserved, ch.ledger_sold, ch.ledger_quality_control,
              ch.ledger_damaged, ch.ledger_safety_stock, ch.ledger_incoming, ch.ledger_short, ch.ledger_backordered) AS balanced
    FROM checked ch
), advanced AS (
    INSERT INTO ledger_checkpoints AS lc (sku, location, pool, stock_version, ledger_id,
                                          total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short, backordered)
    SELECT j.sku, j.location, j.pool, j.version, j.ledger_id,
           j.total, j.available, j.reserved, j.sold, j.quality_control, j.damaged, j.safety_stock, j.incoming, j.short, j.backordered
    FROM judged j
    WHERE j.balanced
      AND (j.checkpoint_ledger_id IS NULL OR j.version > j.checkpoint_version OR j.ledger_id > j.checkpoint_ledger_id)
    ON CONFLICT (sku, location, pool) DO UPDATE
    SET (stock_version, ledger_id, checked_at,
         total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short, backordered)
      = (excluded.stock_version, excluded.ledger_id, now(),
         excluded.total, excluded.available, excluded.reserved, excluded.sold, excluded.quality_control,
         excluded.damaged, excluded.safety_stock, excluded.incoming, excluded.short, excluded.backordered)
    WHERE lc.ledger_id IS NULL OR lc.stock_version < excluded.stock_version OR lc.ledger_id < excluded.ledger_id
    RETURNING lc.sku
)
SELECT j.*
FROM judged j
ORDER BY j.sku COLLATE "C", j.location COLLATE "C", j.pool COLLATE "C";

-- name: StockLinesMismatchMoved :many
-- StockLinesMismatchMoved is StockLinesMismatch for the stock rows whose
-- ledger moved since the watermark since. Each row's lines are summed
-- through reservation_lines_row, row by row: the planner cannot know
-- how many rows moved (the newest feed_xid values are past its
-- statistics), and per-row lookups cost what moved whatever it guesses.
WITH moved AS (
    SELECT DISTINCT g.sku, g.location, g.pool FROM ledger g WHERE g.feed_xid >= @since::xid8
)
SELECT s.sku, s.location, s.pool, s.reserved, s.sold,
       l.held::bigint      AS lines_held,
       l.confirmed::bigint AS lines_confirmed,
       s.backordered, l.promised::bigint AS lines_backordered
FROM moved m
JOIN stock s ON s.sku = m.sku AND s.location = m.location AND s.pool = m.pool
CROSS JOIN LATERAL (
    SELECT coalesce(sum(x.quantity - x.backordered) FILTER (WHERE r.status = 'held'), 0)      AS held,
           coalesce(sum(x.quantity - x.backordered) FILTER (WHERE r.status = 'confirmed'), 0) AS confirmed,
           coalesce(sum(x.backordered), 0)                                                   AS promised
    FROM reservation_lines x
    JOIN reservations r ON r.id = x.reservation_id
    WHERE x.sku = s.sku AND x.location = s.location AND x.pool = s.pool AND r.status IN ('held', 'confirmed')
) l
WHERE s.reserved <> l.held OR s.sold <> l.confirmed OR s.backordered <> l.promised
ORDER BY s.sku COLLATE "C", s.location COLLATE "C", s.pool COLLATE "C";

-- name: StockLedgerMismatchDeep :many
-- StockLedgerMismatchDeep is a deep run's check of counters against the
-- ledger: each stock row (of skus, or all when null) against the sum of
-- its whole ledger, trusting no checkpoint, so it finds what a checkpoint
-- hides: a ledger row changed or deleted behind the append-only trigger,
-- a checkpoint changed by hand, a row inserted with an id taken before a
-- checkpoint was. It writes the checkpoint of every row that balanced
-- anew from that sum, and drops the checkpoint of every row that did not,
-- so that every later run, resume gate and repair sums that row's whole
-- ledger too until it balances again. One pass over the ledger (grouped,
-- not a probe per row, which is why it is not StockLedgerCheck). It
-- returns the rows that did not balance, with StockLedgerCheck's columns.
WITH sums AS (
    SELECT g.sku, g.location, g.pool,
           sum(g.delta_total)::bigint           AS total,
           sum(g.delta_available)::bigint       AS available,
           sum(g.delta_reserved)::bigint        AS reserved,
           sum(g.delta_sold)::bigint            AS sold,
           sum(g.delta_quality_control)::bigint AS quality_control,
           sum(g.delta_damaged)::bigint         AS damaged,
           sum(g.delta_safety_stock)::bigint    AS safety_stock,
           sum(g.delta_incoming)::bigint        AS incoming,
           sum(g.delta_short)::bigint           AS short,
           sum(g.delta_backordered)::bigint     AS backordered,
           max(g.id)                            AS ledger_id
    FROM ledger g
    WHERE sqlc.narg('skus')::text[] IS NULL OR g.sku = ANY(sqlc.narg('skus')::text[])
    GROUP BY g.sku, g.location, g.pool
), checked AS (
    SELECT s.sku, s.location, s.pool, s.version,
           s.total, s.available, s.reserved, s.sold, s.quality_control, s.damaged, s.safety_stock, s.incoming, s.short, s.backordered,
           c.stock_version AS checkpoint_version,
           c.ledger_id     AS checkpoint_ledger_id,
           coalesce(m.ledger_id, 0)::bigint       AS ledger_id,
           coalesce(m.total, 0)::bigint           AS ledger_total,
           coalesce(m.available, 0)::bigint       AS ledger_available,
           coalesce(m.reserved, 0)::bigint        AS ledger_reserved,
           coalesce(m.sold, 0)::bigint            AS ledger_sold,
           coalesce(m.quality_control, 0)::bigint AS ledger_quality_control,
           coalesce(m.damaged, 0)::bigint         AS ledger_damaged,
           coalesce(m.safety_stock, 0)::bigint    AS ledger_safety_stock,
           coalesce(m.incoming, 0)::bigint        AS ledger_incoming,
           coalesce(m.short, 0)::bigint           AS ledger_short,
           coalesce(m.backordered, 0)::bigint     AS ledger_backordered
    FROM stock s
    LEFT JOIN sums m ON m.sku = s.sku AND m.location = s.location AND m.pool = s.pool
    LEFT JOIN ledger_checkpoints c ON c.sku = s.sku AND c.location = s.location AND c.pool = s.pool
    WHERE sqlc.narg('skus')::text[] IS NULL OR s.sku = ANY(sqlc.narg('skus')::text[])
), judged AS (
    SELECT ch.*,
           (ch.total, ch.available, ch.reserved, ch.sold, ch.quality_control, ch.damaged, ch.safety_stock, ch.incoming, ch.short, ch.backordered)
           = (ch.ledger_total, ch.ledger_available, ch.ledger_reserved, ch.ledger_sold, ch.ledger_quality_control,
              ch.ledger_damaged, ch.ledger_safety_stock, ch.ledger_incoming, ch.ledger_short, ch.ledger_backordered) AS balanced
    FROM checked ch
), rewritten AS (
    INSERT INTO ledger_checkpoints AS lc (sku, location, pool, stock_version, ledger_id,
                                          total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short, backordered)
    SELECT j.sku, j.location, j.pool, j.version, j.ledger_id,
           j.total, j.available, j.reserved, j.sold, j.quality_control, j.damaged, j.safety_stock, j.incoming, j.short, j.backordered
    FROM judged j
    WHERE j.balanced
    ON CONFLICT (sku, location, pool) DO UPDATE
    SET (stock_version, ledger_id, checked_at,
         total, available, reserved, sold, quality_control, damaged, safety_stock, incoming, short, backordered)
      = (excluded.stock_version, excluded.ledger_id, now(),
         excluded.total, excluded.available, excluded.reserved, excluded.sold, excluded.quality_control,
         excluded.damaged, excluded.safety_stock, excluded.incoming, excluded.short, excluded.backordered)
    WHERE (lc.stock_version, lc.ledger_id,
           lc.total, lc.available, lc.reserved, lc.sold, lc.quality_control, lc.damaged, lc.safety_stock, lc.incoming, lc.short, lc.backordered)
          IS DISTINCT FROM (excluded.stock_version, excluded.ledger_id,
                            excluded.total, excluded.available, excluded.reserved, excluded.sold, excluded.quality_control,
                            excluded.damaged, excluded.safety_stock, excluded.incoming, excluded.short, excluded.backordered)
    RETURNING lc.sku
), dropped AS (
    DELETE FROM ledger_checkpoints lc
    USING judged j
    WHERE lc.sku = j.sku AND lc.location = j.location AND lc.pool = j.pool AND NOT j.balanced
    RETURNING lc.sku
)
SELECT j.*
FROM judged j
WHERE NOT j.balanced
ORDER BY j.sku COLLATE "C", j.location COLLATE "C", j.pool COLLATE "C";

-- name: LedgerCheckpointGet :one
SELECT * FROM ledger_checkpoints WHERE sku = @sku AND location = @location AND pool = @pool;

-- name: ReservationsStuck :many
-- ReservationsStuck lists the holds still held more than grace_seconds past
-- their expiry (those with a line on one of skus, or all when null) that one
-- run may release: per SKU, the lim that expired first. A hold with lines on
-- several SKUs must be within the bound of each.
WITH stuck AS (
    SELECT r.id, r.expires_at
    FROM reservations r
    WHERE r.status = 'held'
      AND r.expires_at < now() - interval '1 second' * @grace_seconds::float8
      AND (sqlc.narg('skus')::text[] IS NULL OR EXISTS (
            SELECT 1 FROM reservation_lines x
            WHERE x.reservation_id = r.id AND x.sku = ANY(sqlc.narg('skus')::text[])))
), ranked AS (
    SELECT l.reservation_id, l.sku, l.location, l.pool,
           dense_rank() OVER (PARTITION BY l.sku ORDER BY s.expires_at, s.id) AS rank
    FROM stuck s
    JOIN reservation_lines l ON l.reservation_id = s.id
)
SELECT reservation_id,
       array_agg(sku ORDER BY sku COLLATE "C", location COLLATE "C", pool COLLATE "C")::text[]      AS skus,
       array_agg(location ORDER BY sku COLLATE "C", location COLLATE "C", pool COLLATE "C")::text[] AS locations,
       array_agg(pool ORDER BY sku COLLATE "C", location COLLATE "C", pool COLLATE "C")::text[]     AS pools
FROM ranked
GROUP BY reservation_id
HAVING max(rank) <= @lim::bigint
ORDER BY reservation_id;

-- name: ReservationsStuckCount :many
-- ReservationsStuckCount counts, per SKU (of skus, or all when null), the
-- holds still held more than grace_seconds past their expiry.
SELECT l.sku, count(DISTINCT r.id)::bigint AS holds
FROM reservations r
JOIN reservation_lines l ON l.reservation_id = r.id
WHERE r.status = 'held'
  AND r.expires_at < now() - interval '1 second' * @grace_seconds::float8
  AND (sqlc.narg('skus')::text[] IS NULL OR l.sku = ANY(sqlc.narg('skus')::text[]))
GROUP BY l.sku
ORDER BY l.sku COLLATE "C";

-- name: JobsDiscardedNeeded :many
-- JobsDiscardedNeeded lists the discarded River jobs whose work is still
-- needed: a rollback_batch whose request has not succeeded, a
-- manual_rollback whose request was never accepted, a campaign_start whose
-- campaign is still scheduled, a campaign_end whose campaign is not rolled
-- back yet (the campaign jobs are found by kind name and by the campaign
-- their args name; one whose campaign cannot be found is retried too). A
-- rollback job is left out unless it is the newest of its request's chain
-- and nothing of the chain is live: a chain that went on (resumed) needs no
-- second one, and one whose newest job was cancelled or deleted is
-- RollbacksStranded's.
SELECT j.id, j.kind, j.args, j.attempt, j.max_attempts, j.finalized_at,
       coalesce(j.errors[array_length(j.errors, 1)]::text, '')::text AS last_error,
       coalesce(rr.id, 0)::bigint    AS rollback_id,
       coalesce(rr.status, '')::text AS rollback_status
FROM river_job j
LEFT JOIN LATERAL (
    SELECT q.id, q.status
    FROM rollback_requests q
    WHERE j.kind IN ('rollback_batch', 'manual_rollback')
      AND (q.id = CASE WHEN j.args->>'rollback_id' ~ '^[0-9]{1,18}$' THEN (j.args->>'rollback_id')::bigint END
           OR (j.kind = 'manual_rollback' AND q.job_id = j.id))
    ORDER BY q.id
    LIMIT 1
) rr ON true
LEFT JOIN campaigns c
       ON j.kind IN ('campaign_start', 'campaign_end')
      AND c.id = coalesce(j.args->>'campaign', j.args->>'campaign_id')
WHERE j.state = 'discarded'
  AND CASE j.kind
        WHEN 'rollback_batch'  THEN rr.status IN ('pending', 'running', 'failed')
        WHEN 'manual_rollback' THEN rr.id IS NULL OR rr.status = 'pending'
        WHEN 'campaign_start'  THEN c.id IS NULL OR c.status = 'scheduled'
        WHEN 'campaign_end'    THEN c.id IS NULL OR c.status IN ('active', 'ended')
        ELSE false
      END
  AND (rr.id IS NULL OR NOT EXISTS (
        SELECT 1 FROM river_job x
        WHERE (x.id > j.id OR x.state IN ('available', 'pending', 'running', 'retryable', 'scheduled'))
          AND x.kind IN ('rollback_batch', 'manual_rollback')
          AND x.args @> jsonb_build_object('rollback_id', rr.id)))
ORDER BY j.id;

-- name: JobDiscardedLock :one
-- JobDiscardedLock locks a River job that is still discarded; no row means
-- someone retried or removed it meanwhile.
SELECT id, kind, attempt, max_attempts
FROM river_job
WHERE id = @id AND state = 'discarded'
FOR UPDATE;

-- name: ReconcileFindingAdd :exec
INSERT INTO reconcile_findings (run_id, class, kind, sku, location, pool, reservation_id, job_id, details, action)
VALUES (@run_id, @class, @kind, sqlc.narg('sku'), sqlc.narg('location'), sqlc.narg('pool'), sqlc.narg('reservation_id'),
        sqlc.narg('job_id'), @details, @action);

-- name: ReconcileFindingsAddReleased :exec
-- ReconcileFindingsAddReleased records one auto_fix finding per hold among
-- ids, with its lines, expiry and release time; sku and pool are set when
-- the hold has one line.
INSERT INTO reconcile_findings (run_id, class, kind, sku, location, pool, reservation_id, details, action)
SELECT @run_id::bigint, 'auto_fix', 'stuck_hold',
       CASE WHEN x.n = 1 THEN x.sku END, CASE WHEN x.n = 1 THEN x.location END, CASE WHEN x.n = 1 THEN x.pool END, r.id,
       jsonb_build_object(
           'status', r.status,
           'expires_at', r.expires_at,
           'released_at', r.released_at,
           'overdue_seconds', floor(extract(epoch FROM coalesce(r.released_at, now()) - r.expires_at)),
           'lines', x.lines),
       @action::text
FROM reservations r
CROSS JOIN LATERAL (
    SELECT count(*) AS n, min(l.sku) AS sku, min(l.location) AS location, min(l.pool) AS pool,
           jsonb_agg(jsonb_build_object('sku', l.sku, 'location', l.location, 'pool', l.pool, 'quantity', l.quantity)
                     ORDER BY l.sku COLLATE "C", l.location COLLATE "C", l.pool COLLATE "C") AS lines
    FROM reservation_lines l
    WHERE l.reservation_id = r.id
) x
WHERE r.id = ANY(@ids::uuid[])
ORDER BY r.id;

-- name: ReconcileFindingsList :many
-- ReconcileFindingsList returns a run's findings, at most lim per class,
-- oldest first.
SELECT id, run_id, class, kind, sku, pool, reservation_id, job_id, details, action, created_at, location
FROM (
    SELECT f.id, f.run_id, f.class, f.kind, f.sku, f.pool, f.reservation_id, f.job_id, f.details, f.action, f.created_at, f.location,
           row_number() OVER (PARTITION BY f.class ORDER BY f.id) AS n
    FROM reconcile_findings f
    WHERE f.run_id = @run_id
) x
WHERE x.n <= @lim::bigint
ORDER BY x.class, x.id;

-- name: RollbacksStranded :many
-- RollbacksStranded lists the pending or running rollback requests whose
-- chain has no job left to run: every job of it was cancelled, deleted or
-- completed without a successor. Requests whose newest job was discarded
-- are left to JobsDiscardedNeeded, which retries them within its budget;
-- failed ones (their batch gave up) wait for that retry or a person, even
-- once River's cleaner has deleted their discarded job.
SELECT r.id, r.status, r.source,
       coalesce(last.id, 0)::bigint         AS last_job_id,
       coalesce(last.kind, '')::text        AS last_job_kind,
       coalesce(last.state::text, '')::text AS last_job_state
FROM rollback_requests r
LEFT JOIN LATERAL (
    SELECT j.id, j.kind, j.state
    FROM river_job j
    WHERE j.id = r.job_id
       OR (j.kind IN ('rollback_batch', 'manual_rollback') AND j.args @> jsonb_build_object('rollback_id', r.id))
    ORDER BY j.id DESC
    LIMIT 1
) last ON true
WHERE r.status IN ('pending', 'running')
  AND coalesce(last.state::text, '') <> 'discarded'
  AND NOT EXISTS (
        SELECT 1 FROM river_job j
        WHERE j.state IN ('available', 'pending', 'running', 'retryable', 'scheduled')
          AND (j.id = r.job_id
               OR (j.kind IN ('rollback_batch', 'manual_rollback') AND j.args @> jsonb_build_object('rollback_id', r.id))))
ORDER BY r.id;

-- name: CampaignsStranded :many
-- CampaignsStranded lists the campaigns whose next step has no job to run
-- it: a scheduled campaign without a campaign_start job, an active one
-- without a campaign_end job (those whose newest such job was discarded are
-- JobsDiscardedNeeded's), and an ended one whose rollback succeeded but
-- which was never finished (its remainder still in its pools). An ended
-- campaign whose rollback is unfinished is RollbacksStranded's.
WITH next AS (
    SELECT c.id, c.status,
           CASE c.status WHEN 'scheduled' THEN 'campaign_start' ELSE 'campaign_end' END AS kind
    FROM campaigns c
    WHERE c.status IN ('scheduled', 'active')
)
SELECT n.id, n.status, n.kind::text AS next_kind
FROM next n
WHERE NOT EXISTS (
        SELECT 1 FROM river_job j
        WHERE j.kind = n.kind AND j.args @> jsonb_build_object('campaign', n.id)
          AND j.state IN ('available', 'pending', 'running', 'retryable', 'scheduled'))
  AND coalesce((
        SELECT j.state::text FROM river_job j
        WHERE j.kind = n.kind AND j.args @> jsonb_build_object('campaign', n.id)
        ORDER BY j.id DESC
        LIMIT 1), '') <> 'discarded'
UNION ALL
SELECT c.id, c.status, 'finish'::text AS next_kind
FROM campaigns c
JOIN LATERAL (
    SELECT q.status FROM rollback_requests q
    WHERE q.scope->>'campaign' = c.id AND q.source = 'campaign_end'
    ORDER BY q.id DESC
    LIMIT 1
) rb ON true
WHERE c.status = 'ended' AND rb.status = 'succeeded'
ORDER BY id;

-- name: CampaignsHolding :many
-- CampaignsHolding lists the finished (rolled_back) campaigns whose pools
-- still hold stock on hand that no hold holds or bought (available,
-- quality control, damaged, safety stock). A campaign's finish gives all
-- of it back to main and nothing is written there after its end, so a row
-- here was written around the service; resuming the campaign gives it
-- back. It reads every stock row of a pool other than main: a full or
-- deep run's check, not an incremental one's.
SELECT c.id, c.status, 'give_back'::text AS next_kind
FROM campaigns c
WHERE c.status = 'rolled_back'
  AND c.id IN (SELECT s.pool FROM stock s
               WHERE s.pool <> 'main' AND s.available + s.quality_control + s.damaged + s.safety_stock > 0)
ORDER BY c.id;

-- name: StockUnitsMismatch :many
-- StockUnitsMismatch lists the serialized stock rows (of skus, or all when
-- null; with since, only those whose ledger moved since that watermark)
-- whose counters are not their units by status (invariant 7), or that have
-- stray units: held or sold by a hold that does not hold or did not buy
-- them (not held, or confirmed, or without them on its line). The
-- database refuses to commit either (migration 00120's triggers), so a row
-- here means its triggers were bypassed. With since, the rows are found
-- from ledger_feed's range and probed one by one: no pass over stock.
WITH scope AS (
    SELECT s.sku, s.location, s.pool, s.available, s.reserved, s.sold
    FROM stock s
    WHERE s.serialized AND sqlc.narg('since')::xid8 IS NULL
      AND (sqlc.narg('skus')::text[] IS NULL OR s.sku = ANY(sqlc.narg('skus')::text[]))
    UNION ALL
    SELECT s.sku, s.location, s.pool, s.available, s.reserved, s.sold
    FROM (SELECT DISTINCT g.sku, g.location, g.pool FROM ledger g WHERE g.feed_xid >= sqlc.narg('since')::xid8) m
    CROSS JOIN LATERAL (
        SELECT x.* FROM stock x
        WHERE x.sku = m.sku AND x.location = m.location AND x.pool = m.pool
        LIMIT 1
    ) s
    WHERE s.serialized AND (sqlc.narg('skus')::text[] IS NULL OR s.sku = ANY(sqlc.narg('skus')::text[]))
)
SELECT sc.sku, sc.location, sc.pool, sc.available, sc.reserved, sc.sold,
       u.available::bigint AS units_available, u.held::bigint AS units_held, u.sold::bigint AS units_sold,
       u.stray::text[] AS stray
FROM scope sc
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE v.status = 'available') AS available,
           count(*) FILTER (WHERE v.status = 'held') AS held,
           count(*) FILTER (WHERE v.status = 'sold') AS sold,
           coalesce(array_agg(v.id ORDER BY v.id COLLATE "C") FILTER (
               WHERE v.status IN ('held', 'sold') AND NOT EXISTS (
                   SELECT 1 FROM reservations r
                   JOIN reservation_lines l ON l.reservation_id = r.id AND l.sku = v.sku AND l.location = v.location
                                           AND l.pool = v.pool AND v.id = ANY(l.units)
                   WHERE r.id = v.reservation_id AND r.status = CASE v.status WHEN 'held' THEN 'held' ELSE 'confirmed' END)),
               '{}') AS stray
    FROM units v
    WHERE v.sku = sc.sku AND v.location = sc.location AND v.pool = sc.pool
) u
WHERE (sc.available, sc.reserved, sc.sold) <> (u.available, u.held, u.sold) OR cardinality(u.stray) > 0
ORDER BY sc.sku COLLATE "C", sc.location COLLATE "C", sc.pool COLLATE "C";

-- name: UnitsAgainstLedger :many
-- UnitsAgainstLedger lists, for one pool found out of balance, the units
-- whose status or pool is not what the pool's ledger last said of them,
-- at most lim of them, each row carrying how many there are. Every ledger
-- row that moves units names them, so the last row of a pool naming a
-- unit says where it should be: held after a reserve, sold after a
-- confirm, available after units came in or went back, out of the pool
-- (retired, or moved to another pool) after a retirement or a transfer
-- out. A unit of the pool the ledger never named is listed too. One pass
-- over the pool's ledger rows that name units: it is for a person reading
-- a finding, not for every run.
WITH said AS (
    SELECT DISTINCT ON (x.unit_id) x.unit_id, g.kind, g.id AS ledger_id,
           CASE WHEN g.delta_reserved > 0 THEN 'held'
                WHEN g.delta_sold > 0 THEN 'sold'
                WHEN g.delta_available > 0 THEN 'available'
                ELSE 'gone' END AS expected
    FROM ledger g
    CROSS JOIN LATERAL unnest(g.units) AS x(unit_id)
    WHERE g.sku = @sku AND g.location = @location AND g.pool = @pool AND g.units IS NOT NULL
    ORDER BY x.unit_id, g.stock_version DESC, g.id DESC
), off AS (
    SELECT u.id, u.status, u.pool, s.kind AS ledger_kind, s.expected AS ledger_says, s.ledger_id
    FROM units u
    LEFT JOIN said s ON s.unit_id = u.id
    WHERE u.sku = @sku
      AND (u.pool = @pool OR s.unit_id IS NOT NULL)
      AND NOT coalesce((u.pool = @pool AND u.status = s.expected)
                       OR (s.expected = 'gone' AND (u.pool <> @pool OR u.status = 'retired')), false)
)
SELECT o.id, o.status, o.pool, o.ledger_kind, coalesce(o.ledger_says, 'never named')::text AS ledger_says,
       o.ledger_id, count(*) OVER ()::bigint AS total
FROM off o
ORDER BY o.id COLLATE "C"
LIMIT @lim;

-- name: StockUnitsAgainstLedgerDeep :many
-- StockUnitsAgainstLedgerDeep is a deep run's check of units against the
-- ledger: the serialized pools (of skus, or all when null) with a unit
-- whose status or pool is not what the last ledger row of its pool naming
-- it says, or a unit the pool's ledger never named (UnitsAgainstLedger,
-- for every pool at once), with their counters and units by status as
-- StockUnitsMismatch gives them. It finds a unit changed behind the
-- triggers even when the counts still agree (one seat retired, another
-- put back). One pass over the ledger rows that name units.
WITH said AS (
    SELECT DISTINCT ON (g.sku, g.location, g.pool, x.unit_id) g.sku, g.location, g.pool, x.unit_id,
           CASE WHEN g.delta_reserved > 0 THEN 'held'
                WHEN g.delta_sold > 0 THEN 'sold'
                WHEN g.delta_available > 0 THEN 'available'
                ELSE 'gone' END AS expected
    FROM ledger g
    CROSS JOIN LATERAL unnest(g.units) AS x(unit_id)
    WHERE g.units IS NOT NULL
      AND (sqlc.narg('skus')::text[] IS NULL OR g.sku = ANY(sqlc.narg('skus')::text[]))
    ORDER BY g.sku, g.location, g.pool, x.unit_id, g.stock_version DESC, g.id DESC
), off AS (
    SELECT u.sku, u.location, u.pool
    FROM units u
    LEFT JOIN said s ON s.sku = u.sku AND s.location = u.location AND s.pool = u.pool AND s.unit_id = u.id
    WHERE u.status <> 'retired' AND s.expected IS DISTINCT FROM u.status
      AND (sqlc.narg('skus')::text[] IS NULL OR u.sku = ANY(sqlc.narg('skus')::text[]))
    UNION
    SELECT s.sku, s.location, s.pool
    FROM said s
    JOIN units u ON u.sku = s.sku AND u.id = s.unit_id
    WHERE s.expected <> 'gone' AND (u.pool <> s.pool OR u.location <> s.location OR u.status <> s.expected)
)
SELECT st.sku, st.location, st.pool, st.available, st.reserved, st.sold,
       c.available::bigint AS units_available, c.held::bigint AS units_held, c.sold::bigint AS units_sold,
       '{}'::text[] AS stray
FROM (SELECT DISTINCT sku, location, pool FROM off) o
JOIN stock st ON st.sku = o.sku AND st.location = o.location AND st.pool = o.pool
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE v.status = 'available') AS available,
           count(*) FILTER (WHERE v.status = 'held') AS held,
           count(*) FILTER (WHERE v.status = 'sold') AS sold
    FROM units v
    WHERE v.sku = st.sku AND v.location = st.location AND v.pool = st.pool
) c
ORDER BY st.sku COLLATE "C", st.location COLLATE "C", st.pool COLLATE "C";

-- name: StockTransitMismatch :many
-- StockTransitMismatch lists the stock rows (of skus, or all when null)
-- whose incoming is not what the transfers in transit to them and the open
-- inbound lines at them have not yet delivered or written off
-- (incoming_expected), and the transfers in transit to a row that does not
-- exist (invariant 8). Partial indexes (stock_incoming, transfers_to,
-- inbound_open) keep it to the rows with incoming or an open transfer or
-- notice: a full run does not scan stock for it.
WITH transit AS (
    SELECT e.sku, e.location, e.pool, e.incoming AS in_transit
    FROM incoming_expected e
    WHERE sqlc.narg('skus')::text[] IS NULL OR e.sku = ANY(sqlc.narg('skus')::text[])
), rows AS (
    SELECT s.sku, s.location, s.pool, s.incoming FROM stock s
    WHERE s.incoming <> 0 AND (sqlc.narg('skus')::text[] IS NULL OR s.sku = ANY(sqlc.narg('skus')::text[]))
    UNION
    SELECT x.sku, x.location, x.pool, coalesce(s.incoming, 0) FROM transit x
    LEFT JOIN stock s ON s.sku = x.sku AND s.location = x.location AND s.pool = x.pool
)
SELECT r.sku, r.location, r.pool, r.incoming::bigint AS incoming, coalesce(x.in_transit, 0)::bigint AS in_transit
FROM rows r
LEFT JOIN transit x ON x.sku = r.sku AND x.location = r.location AND x.pool = r.pool
WHERE r.incoming <> coalesce(x.in_transit, 0)
ORDER BY r.sku COLLATE "C", r.location COLLATE "C", r.pool COLLATE "C";

-- name: BundleLinesMismatch :many
-- BundleLinesMismatch lists the component lines of held and confirmed
-- holds' bundle lines that are not what the definition each used says:
-- per hold and bundle, every line records one bundle_quantity and one
-- bundle_version, and each component of that version
-- (bundle_components) is held, over its lines at every location, at the
-- bundle's quantity times the component's, and nothing else is. It
-- returns every component of a bundle line out of step (the definition's
-- and the lines'), so that a finding shows both sides. The holds checked:
-- with since, those whose ledger moved since that watermark (found from
-- ledger_feed's range); with skus, those with a component line of one of
-- skus; else every hold with a bundle line.
WITH scope AS (
    SELECT DISTINCT l.reservation_id
    FROM reservation_lines l
    WHERE l.bundle_sku IS NOT NULL AND sqlc.narg('since')::xid8 IS NULL AND sqlc.narg('skus')::text[] IS NULL
    UNION
    SELECT l.reservation_id
    FROM reservation_lines l
    WHERE l.bundle_sku IS NOT NULL AND sqlc.narg('since')::xid8 IS NULL AND l.sku = ANY(sqlc.narg('skus')::text[])
    UNION
    SELECT g.reservation_id
    FROM ledger g
    WHERE g.feed_xid >= sqlc.narg('since')::xid8 AND g.reservation_id IS NOT NULL
), lines AS (
    SELECT l.reservation_id, l.bundle_sku, l.sku, l.quantity, l.bundle_quantity, l.bundle_version
    FROM scope sc
    JOIN reservations r ON r.id = sc.reservation_id AND r.status IN ('held', 'confirmed')
    JOIN reservation_lines l ON l.reservation_id = r.id
    WHERE l.bundle_sku IS NOT NULL
), bundles AS (
    SELECT reservation_id, bundle_sku, min(bundle_quantity) AS bundle_quantity, min(bundle_version) AS bundle_version,
           count(DISTINCT bundle_quantity) = 1 AND count(DISTINCT bundle_version) = 1 AS agree
    FROM lines
    GROUP BY reservation_id, bundle_sku
), held AS (
    SELECT reservation_id, bundle_sku, sku, sum(quantity)::bigint AS quantity
    FROM lines
    GROUP BY reservation_id, bundle_sku, sku
), wanted AS (
    SELECT b.reservation_id, b.bundle_sku, c.sku, (c.quantity * b.bundle_quantity)::bigint AS quantity
    FROM bundles b
    JOIN bundle_components c ON c.bundle_sku = b.bundle_sku AND c.version = b.bundle_version
), compared AS (
    SELECT coalesce(w.reservation_id, h.reservation_id) AS reservation_id, coalesce(w.bundle_sku, h.bundle_sku) AS bundle_sku,
           coalesce(w.sku, h.sku) AS sku, w.quantity AS wanted, h.quantity AS held
    FROM wanted w
    FULL JOIN held h ON h.reservation_id = w.reservation_id AND h.bundle_sku = w.bundle_sku AND h.sku = w.sku
)
SELECT c.reservation_id, c.bundle_sku::text AS bundle_sku, b.bundle_quantity::bigint AS bundle_quantity,
       b.bundle_version::bigint AS bundle_version, b.agree::bool AS agree, c.sku::text AS sku, coalesce(c.wanted, 0)::bigint AS wanted, coalesce(c.held, 0)::bigint AS held
FROM compared c
JOIN bundles b ON b.reservation_id = c.reservation_id AND b.bundle_sku = c.bundle_sku
WHERE EXISTS (
    SELECT 1 FROM compared x
    WHERE x.reservation_id = c.reservation_id AND x.bundle_sku = c.bundle_sku
      AND (NOT b.agree OR x.wanted IS DISTINCT FROM x.held))
ORDER BY c.reservation_id, c.bundle_sku COLLATE "C", c.sku COLLATE "C";
