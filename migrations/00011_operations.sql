-- Operations: rollback requests (manual and campaign-end), alerts, the
-- reconciliation's runs, findings and ledger checkpoints, and the record of
-- discarded River jobs already turned into alerts.

-- +goose Up
CREATE TABLE rollback_requests (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operator        text        NOT NULL,
    reason          text        NOT NULL,
    -- One of {"reservation_ids": [...]}, {"campaign": "c1"} or
    -- {"sku": "A1", "pool": "main", "held_before": "..."}.
    scope           jsonb       NOT NULL,
    dry_run         boolean     NOT NULL DEFAULT false,
    status          text        NOT NULL DEFAULT 'pending',
    -- Where the request came from: http, cli, sql (a plain river_job
    -- insert) or campaign_end.
    source          text        NOT NULL,
    released_count  integer     NOT NULL DEFAULT 0,
    -- Units handed back (a dry run: the holds and units it would release).
    released_units  bigint      NOT NULL DEFAULT 0,
    matched_count   integer,
    matched_units   bigint,
    batches         integer     NOT NULL DEFAULT 0,
    -- The River job that started the request (manual_rollback or
    -- campaign_end); a plain SQL insert is found again by it.
    job_id          bigint      UNIQUE,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    CONSTRAINT rollback_requests_status CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
    CONSTRAINT rollback_requests_source CHECK (source IN ('http', 'cli', 'sql', 'campaign_end')),
    CONSTRAINT rollback_requests_operator CHECK (char_length(operator) BETWEEN 1 AND 64),
    CONSTRAINT rollback_requests_reason CHECK (char_length(reason) BETWEEN 1 AND 500),
    CONSTRAINT rollback_requests_scope CHECK (jsonb_typeof(scope) = 'object')
);

COMMENT ON TABLE rollback_requests IS 'Who asked to roll back which holds, why, and how far it got. The ledger rows it wrote carry the operator as actor.';

CREATE INDEX rollback_requests_campaign ON rollback_requests ((scope->>'campaign')) WHERE scope ? 'campaign';

CREATE TABLE alerts (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    level             text        NOT NULL,
    kind              text        NOT NULL,
    -- What the alert is about, e.g. 'sku:A1/main', 'job:release_hold',
    -- 'campaign:c1'; at most one open alert per kind and subject.
    subject           text        NOT NULL,
    sku               text,
    pool              text,
    details           jsonb       NOT NULL DEFAULT '{}',
    suggested_action  text        NOT NULL,
    status            text        NOT NULL DEFAULT 'open',
    first_seen_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at      timestamptz NOT NULL DEFAULT now(),
    occurrences       integer     NOT NULL DEFAULT 1,
    acked_by          text,
    acked_at          timestamptz,
    resolved_at       timestamptz,
    delivered_at      timestamptz,
    CONSTRAINT alerts_level CHECK (level IN ('info', 'warning', 'critical')),
    CONSTRAINT alerts_status CHECK (status IN ('open', 'acked', 'resolved')),
    CONSTRAINT alerts_acked CHECK (status <> 'acked' OR acked_by IS NOT NULL)
);

COMMENT ON TABLE alerts IS 'Things a person must look at. A repeat of an open alert bumps occurrences and last_seen_at.';

CREATE UNIQUE INDEX alerts_one_open ON alerts (kind, subject) WHERE status = 'open';
CREATE INDEX alerts_status_last_seen ON alerts (status, last_seen_at DESC);

-- Discarded River jobs the watcher has already alerted on; a job retried and
-- discarded again has a new finalized_at and alerts again.
CREATE TABLE discarded_jobs (
    job_id        bigint      NOT NULL,
    finalized_at  timestamptz NOT NULL,
    kind          text        NOT NULL,
    alert_id      bigint      REFERENCES alerts (id),
    seen_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, finalized_at)
);

CREATE TABLE reconcile_runs (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger         text        NOT NULL,
    -- SKUs checked; null means every SKU.
    skus            text[],
    status          text        NOT NULL DEFAULT 'pending',
    rows_checked    integer     NOT NULL DEFAULT 0,
    auto_fixed      integer     NOT NULL DEFAULT 0,
    retried         integer     NOT NULL DEFAULT 0,
    high_risk       integer     NOT NULL DEFAULT 0,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    CONSTRAINT reconcile_runs_status CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
    CONSTRAINT reconcile_runs_trigger CHECK (trigger IN ('periodic', 'http', 'cli', 'campaign_end'))
);

CREATE TABLE reconcile_findings (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          bigint      NOT NULL REFERENCES reconcile_runs (id),
    -- auto_fix: released through the normal path; retry: a failed job
    -- re-enqueued; high_risk: the pool paused, nothing moved.
    class           text        NOT NULL,
    kind            text        NOT NULL,
    sku             text,
    pool            text,
    reservation_id  uuid,
    job_id          bigint,
    details         jsonb       NOT NULL DEFAULT '{}',
    action          text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reconcile_findings_class CHECK (class IN ('auto_fix', 'retry', 'high_risk'))
);

CREATE INDEX reconcile_findings_run ON reconcile_findings (run_id);

-- Per stock row, the counters the ledger summed to at a stock version that
-- reconciliation verified: the next run sums only the ledger rows after it.
CREATE TABLE ledger_checkpoints (
    sku            text        NOT NULL,
    pool           text        NOT NULL,
    stock_version  bigint      NOT NULL,
    total          bigint      NOT NULL,
    available      bigint      NOT NULL,
    reserved       bigint      NOT NULL,
    sold           bigint      NOT NULL,
    checked_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, pool)
);

-- +goose Down
DROP TABLE ledger_checkpoints;
DROP TABLE reconcile_findings;
DROP TABLE reconcile_runs;
DROP TABLE discarded_jobs;
DROP TABLE alerts;
DROP TABLE rollback_requests;
