-- Webhook subscriptions to the event feed and their delivery state.

-- name: WebhookCreate :one
-- WebhookCreate records the snapshot of the creating transaction with the
-- subscription (see WebhookCommittedBefore).
INSERT INTO webhooks (url, events, secret, created_by, cursor_xid, cursor_id, cursor_n, start_snapshot)
VALUES (@url, @events, @secret, @created_by, @cursor_xid, @cursor_id, @cursor_n, pg_current_snapshot()::text)
RETURNING *;

-- name: WebhookCommittedBefore :many
-- WebhookCommittedBefore returns, among the ledger rows ids, those whose
-- writing transaction had committed in the snapshot start (a webhook's
-- start_snapshot): they happened before the webhook and are not sent to
-- it; every other row is. A row's feed_xid is not always its writer: it is
-- the youngest transaction that wrote the row's stock row up to it, so a
-- transaction older than the row's last writer carries that writer's id
-- (which may have committed before the webhook while the row's own writer
-- had not, or the other way round). The writer is the row's xmin: its low
-- 32 bits, at most 2^31 transactions older than feed_xid (its writer held
-- an id while it wrote, and the stock row then had feed_xid at most the
-- newest id), which places it in feed_xid's epoch or the one before. The
-- service's writers of the ledger are top-level transactions (none writes
-- in a savepoint or an exception block, whose rows carry a subtransaction's
-- id that a snapshot cannot judge); an xmin that is not a normal id (a
-- frozen row from an old cluster) or is newer than feed_xid is in doubt,
-- and a row in doubt is delivered: never missed.
SELECT l.id FROM ledger l
CROSS JOIN LATERAL (
    SELECT ((l.feed_xid::text::numeric - l.xmin::text::numeric) % 4294967296 + 4294967296) % 4294967296 AS back) w
WHERE l.id = ANY(@ids::bigint[])
  AND l.xmin::text::bigint >= 3
  AND w.back < 2147483648
  AND pg_visible_in_snapshot((l.feed_xid::text::numeric - w.back)::text::xid8, (@start::text)::pg_snapshot);

-- name: WebhookGet :one
SELECT * FROM webhooks WHERE id = @id;

-- name: WebhookList :many
SELECT * FROM webhooks ORDER BY id;

-- name: WebhookPage :many
-- WebhookPage returns up to lim webhooks in id order, after the id given.
SELECT * FROM webhooks WHERE id > @after ORDER BY id LIMIT @lim;

-- name: WebhookDelete :execrows
DELETE FROM webhooks WHERE id = @id;

-- name: WebhookOldestPending :one
-- WebhookOldestPending returns when the oldest event the receiver has not
-- acknowledged happened (of any type: events it did not ask for are
-- skipped by the next delivery); no row means it is caught up.
SELECT l.at FROM ledger l
WHERE l.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
  AND (l.feed_xid, l.id) > (@cursor_xid::xid8, @cursor_id::bigint)
ORDER BY l.feed_xid, l.id
LIMIT 1;

-- name: WebhookAdvance :execrows
-- WebhookAdvance moves a subscription's cursor past what its receiver
-- acknowledged (or past events it did not ask for), if the cursor is still
-- where the delivery started: a delivery running twice (a job rescued while
-- the first still ran) never moves it back. A success clears the failures.
UPDATE webhooks
SET cursor_xid = @cursor_xid, cursor_id = @cursor_id, cursor_n = @cursor_n,
    delivered_at = CASE WHEN @delivered::bigint > 0 THEN now() ELSE delivered_at END,
    delivered_events = delivered_events + @delivered::bigint,
    failures = 0, failing_since = NULL, last_error = NULL
WHERE id = @id AND cursor_xid = @from_xid AND cursor_id = @from_id AND cursor_n = @from_n;

-- name: WebhookFailed :one
-- WebhookFailed counts a failed attempt at the batch now due and returns
-- how many there have been in a row.
UPDATE webhooks
SET failures = failures + 1, failing_since = coalesce(failing_since, now()), last_error = @last_error
WHERE id = @id
RETURNING failures;

-- name: WebhooksDue :many
-- WebhooksDue returns the subscriptions with events past their cursor and
-- no delivery job to run or running: the dispatcher enqueues one for each.
SELECT w.id FROM webhooks w
WHERE EXISTS (
        SELECT 1 FROM ledger l
        WHERE l.feed_xid < pg_snapshot_xmin(pg_current_snapshot())
          AND (l.feed_xid, l.id) > (w.cursor_xid, w.cursor_id))
  AND NOT EXISTS (
        SELECT 1 FROM river_job j
        WHERE j.kind = 'webhook_deliver'
          AND j.args @> jsonb_build_object('webhook_id', w.id)
          AND j.state IN ('available', 'pending', 'running', 'retryable', 'scheduled'))
ORDER BY w.id;

-- name: WebhookDispatchLockTry :one
-- WebhookDispatchLockTry takes the session lock that lets one dispatcher
-- run at a time across every instance; false means another holds it.
SELECT pg_try_advisory_lock(hashtext('stockhold.webhook_dispatch'))::boolean AS locked;

-- name: WebhookDispatchUnlock :one
SELECT pg_advisory_unlock(hashtext('stockhold.webhook_dispatch'))::boolean AS unlocked;
