-- manual_rollback.sql: roll held stock back with nothing but psql.
--
-- It enqueues a `manual_rollback` River job, as the command line and the
-- API do: a row in river_job, River's `default` queue, with
-- the same JSON fields as the body of POST /v1/rollbacks, then the pg_notify
-- that wakes the workers. A running `stockhold serve` picks it up, records a
-- rollback_requests row (source `sql`) with your operator and reason, and
-- releases the held holds in scope in batches of 100 (by sku or location,
-- only their lines in scope); ledger rows carry the operator as actor and
-- the reason.
--
-- UNEDITED, THIS FILE IS A HARMLESS DRY RUN: dry_run is true and, with no
-- scope given, the scope is one hold id that cannot exist (the nil UUID), so
-- it only shows the round trip. A dry run never changes stock; it records
-- what it would release (matched_count, matched_units).
--
-- Either edit the values in the EDIT HERE block below, or leave the file
-- alone and give the same names on the command line or, inside psql, with
-- \set before \i sql/manual_rollback.sql (given values win):
--
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f sql/manual_rollback.sql
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 \
--        -v operator=alice -v reason='payment provider outage' \
--        -v sku=A1 -v pool=main -v held_before=2026-05-01T12:00:00Z \
--        -f sql/manual_rollback.sql                     (a dry run by SKU)
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 \
--        -v operator=alice -v reason='order o-17 cancelled by phone' \
--        -v reservation_ids=0b9e...,5f1c... -v dry_run=false \
--        -f sql/manual_rollback.sql                     (for real, by ids)
--
-- The values (the fields of POST /v1/rollbacks):
--   operator         who asks (required, 1-64 characters): a person, not a
--                    role (default: your database user name; put yours).
--   reason           why (required, at most 500 characters).
--   dry_run          true: only count what would be released. false: release.
--   Exactly one scope:
--   reservation_ids  comma-separated hold ids (at most 10,000), or
--   campaign         a campaign id: its held holds, or
--   sku              a SKU's lines in `pool` (default main), at `location`
--                    when given, of holds created before `held_before`
--                    (RFC 3339; default: now; a time later than now is
--                    refused), or
--   location         alone: every line at that location, of holds created
--                    before `held_before`.
--                    By sku or location only the lines in scope are handed
--                    back (a bundle line whole when one of its components
--                    is in scope): a hold's other lines stay held (a hold with no
--                    other line is released whole), and a dry run counts
--                    those lines (matched_units) and their holds.
--   cutoff           with any scope: only holds created before this time
--                    (RFC 3339; default: now; later than now is refused),
--                    such as a dry run's requested_at, so that its real run
--                    releases what the dry run counted and nothing made since.
-- Leave the scopes you do not use empty (''): they are left out of the job.
-- Whatever the scope, the rollback never touches a hold created after the
-- job was inserted (its cut-off). The worker reads the job strictly: a
-- misspelt field or a value of the wrong type (say "dry_run": "true") gets
-- the job cancelled with a critical alert, and nothing is released.
--
-- The statement, written out, is simply:
--   INSERT INTO river_job (kind, args, max_attempts)
--   VALUES ('manual_rollback', '{"operator": "alice", "reason": "...",
--           "dry_run": true, "sku": "A1", "pool": "main"}', 3);
--   SELECT pg_notify(current_schema() || '.river_insert', '{"queue": "default"}');
-- This file builds the JSON from the values below so quoting cannot go wrong.
--
-- How to read the result and what to do next:
--   It prints the job it inserted (state `available`) and the request row,
--   which is empty until a worker picks the job up (normally within a
--   second). Follow it with the query it prints, or with
--     psql -v job_id=<job_id> -f sql/rollback_requests.sql
--   (inside psql the job's id stays in :job_id, so a plain
--   \i sql/rollback_requests.sql right after shows just this request).
--   status succeeded: done (released_count / released_units, or for a dry
--   run matched_count / matched_units). Still no row and the job stays
--   `available`: no worker is running (job_health.sql). The job `cancelled`
--   and still no row: the worker refused it (operator, reason or scope
--   missing or invalid, a field misspelt or of the wrong type, held_before
--   or cutoff after the insert) and raised a critical alert; see the job's error
--   in rollback_requests.sql section 2, fix the values and run this again.
--   To run a dry run for real, run the file again with dry_run false.

-- ============================== EDIT HERE ==============================
\if :{?operator}        \else \set operator        :USER \endif
\if :{?reason}          \else \set reason          'dry run from sql/manual_rollback.sql' \endif
\if :{?dry_run}         \else \set dry_run         true \endif
\if :{?reservation_ids} \else \set reservation_ids '' \endif
\if :{?campaign}        \else \set campaign        '' \endif
\if :{?sku}             \else \set sku             '' \endif
\if :{?location}        \else \set location        '' \endif
\if :{?pool}            \else \set pool            '' \endif
\if :{?held_before}     \else \set held_before     '' \endif
\if :{?cutoff}          \else \set cutoff          '' \endif
-- ============================ END EDIT HERE ============================

-- Check the values here rather than let the worker refuse the job with a
-- critical alert; with bad values nothing is enqueued.
SELECT :'operator' <> '' AND :'reason' <> ''
       AND num_nonnulls(nullif(:'reservation_ids', ''), nullif(:'campaign', ''),
                        coalesce(nullif(:'sku', ''), nullif(:'location', ''))) <= 1
       AND (:'sku' <> '' OR :'pool' = '')
       AND (:'sku' <> '' OR :'location' <> '' OR :'held_before' = '')
       AND coalesce(nullif(:'held_before', '')::timestamptz <= now(), true)
       AND coalesce(nullif(:'cutoff', '')::timestamptz <= now(), true)
       AS values_ok \gset
\if :values_ok

BEGIN;

INSERT INTO river_job (kind, args, max_attempts)
VALUES ('manual_rollback', jsonb_strip_nulls(jsonb_build_object(
    'operator',        :'operator',
    'reason',          :'reason',
    'dry_run',         (:'dry_run')::boolean,
    -- With no scope at all: the nil UUID, which no hold has.
    'reservation_ids', to_jsonb(regexp_split_to_array(trim(coalesce(nullif(:'reservation_ids', ''),
                           CASE WHEN :'campaign' = '' AND :'sku' = '' AND :'location' = '' THEN '00000000-0000-0000-0000-000000000000' END)),
                           '\s*,\s*')::uuid[]),
    'campaign',        nullif(:'campaign', ''),
    'sku',             nullif(:'sku', ''),
    'pool',            nullif(:'pool', ''),
    'location',        nullif(:'location', ''),
    'held_before',     to_jsonb(nullif(:'held_before', '')::timestamptz),
    'cutoff',          to_jsonb(nullif(:'cutoff', '')::timestamptz)
)), 3)
RETURNING id AS job_id \gset

\echo '== Enqueued; waking the workers =='
SELECT pg_notify(current_schema() || '.river_insert', '{"queue": "default"}');

COMMIT;

\echo '== The job (queue default, 3 attempts) =='
SELECT id AS job_id, kind, queue, state, max_attempts, args::text AS args
FROM river_job WHERE id = :job_id;

\echo '== Its rollback request (empty until a worker picks the job up; run again) =='
\echo 'SELECT id, status, dry_run, released_count, released_units, matched_count, matched_units, error FROM rollback_requests WHERE job_id =' :job_id ';'
SELECT id, status, operator, reason, scope::text AS scope, dry_run,
       released_count, released_units, matched_count, matched_units, error
FROM rollback_requests WHERE job_id = :job_id;

\else
\warn 'manual_rollback.sql: nothing enqueued. Give an operator and a reason, at most one scope (reservation_ids, campaign, sku with an optional location, or location), pool only with sku, held_before only with sku or location, and held_before and cutoff no later than now.'
\endif

-- Forget the values, so that the next \i of this file in the same session
-- starts from the EDIT HERE block again.
\unset operator
\unset reason
\unset dry_run
\unset reservation_ids
\unset campaign
\unset sku
\unset location
\unset pool
\unset held_before
\unset cutoff
\unset values_ok
