-- Readiness probes that write. /readyz used to read only, so an
-- instance answered ready while its server took connections but no writes:
-- an old primary that pg_auto_failover restarted before demoting it, whose
-- commits wait for a synchronous standby that is gone, or a server turned
-- read-only. Each probe now upserts one row here and commits, as every
-- acknowledged write does; a probe whose commit the standby does not
-- confirm within a second answers 503.

-- +goose Up
CREATE TABLE readiness_probes (
    instance    text        PRIMARY KEY,
    probed_at   timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE readiness_probes IS 'One row per stockhold instance, upserted by each /readyz: when each last proved it could write. Rows of instances gone for a day are deleted by the probes.';

-- +goose Down
DROP TABLE readiness_probes;
