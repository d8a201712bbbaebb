-- Retention: deleting, one small batch per statement, what is older than
-- the retention period. The ledger is never deleted.

-- name: ReservationsDeleteEnded :one
-- ReservationsDeleteEnded deletes up to lim holds that ended (released or
-- expired) more than older_than_seconds ago, and whose expiry is that old
-- too (so their expiry job is long done), with their lines (and the
-- lines' record of units); holds locked
-- by someone else are left for the next batch. Confirmed holds are kept: their lines are
-- what reconciliation checks sold against. The ledger rows that name the
-- deleted holds stay (reservation_id has no foreign key).
WITH doomed AS (
    SELECT e.id FROM reservations e
    WHERE e.status IN ('released', 'expired')
      AND e.released_at < now() - make_interval(secs => @older_than_seconds::double precision)
      AND e.expires_at < now() - make_interval(secs => @older_than_seconds::double precision)
    ORDER BY e.released_at
    LIMIT @lim
    FOR UPDATE SKIP LOCKED
), lines AS (
    DELETE FROM reservation_lines l USING doomed d WHERE l.reservation_id = d.id
    RETURNING l.reservation_id
), holds AS (
    DELETE FROM reservations r USING doomed d WHERE r.id = d.id
    RETURNING r.id
)
SELECT (SELECT count(*) FROM holds)::int AS holds, (SELECT count(*) FROM lines)::int AS lines;

-- name: IdempotencyKeysDeleteOld :one
-- IdempotencyKeysDeleteOld deletes up to lim stored answers of creating
-- POSTs made more than older_than_seconds ago; a retry with such a key is then a new request.
WITH doomed AS (
    SELECT o.client, o.key FROM idempotency_keys o
    WHERE o.created_at < now() - make_interval(secs => @older_than_seconds::double precision)
    ORDER BY o.created_at
    LIMIT @lim
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM idempotency_keys k USING doomed d WHERE k.client = d.client AND k.key = d.key
    RETURNING 1
)
SELECT count(*)::int FROM deleted;
