-- Session settings and advisory locks.

-- name: LockTimeoutSet :batchexec
-- LockTimeoutSet bounds, for the rest of the transaction, how long any
-- statement waits for a row lock: past it the statement fails with
-- lock_not_available, and the request that needed the row answers busy
-- instead of queueing behind a lock someone left open.
SELECT set_config('lock_timeout', @timeout::text, true);

-- name: ExpiryLockTry :one
-- ExpiryLockTry takes the session lock that lets one expiry loop run at a
-- time across every instance; false means another holds it.
SELECT pg_try_advisory_lock(hashtext('stockhold.expiry'))::boolean AS locked;

-- name: ExpiryUnlock :one
SELECT pg_advisory_unlock(hashtext('stockhold.expiry'))::boolean AS unlocked;
