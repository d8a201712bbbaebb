-- Session settings and advisory locks.

-- name: BatchSettingsSet :batchexec
-- BatchSettingsSet sets up a batch transaction. lock_timeout bounds how
-- long any statement waits for a row lock: past it the statement fails with
-- lock_not_available, and the request that needed the row answers busy
-- instead of queueing behind a lock someone left open. Generic plans: the
-- batch statements take arrays, and PostgreSQL otherwise plans them afresh
-- on every execution (custom plans for each array's length), which costs
-- more than running them (measured: 0.3 to 0.8 ms of planning against
-- 0.2 to 0.4 ms of execution); the generic plans are the same index scans.
SELECT set_config('lock_timeout', @timeout::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: ExpiryLockTry :one
-- ExpiryLockTry takes the session lock that lets one expiry loop run at a
-- time across every instance; false means another holds it.
SELECT pg_try_advisory_lock(hashtext('stockhold.expiry'))::boolean AS locked;

-- name: ExpiryUnlock :one
SELECT pg_advisory_unlock(hashtext('stockhold.expiry'))::boolean AS unlocked;
