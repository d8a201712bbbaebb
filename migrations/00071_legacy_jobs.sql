-- Holds expire through the expire_holds loop; the release_hold job kind,
-- one job per hold in earlier versions, is gone. Its jobs still
-- waiting in river_job would be discarded, with an alert, for want of a
-- worker: delete them. A hold they would have expired is expired by the
-- loop, the sweeper or reconciliation. Jobs of the kind that already
-- finished stay as history; none is running once every instance runs this
-- version.

-- rollback_batch args lost not_before, which batches enqueued by versions
-- that slept inside the job carried (a batch is now a job due after the
-- pause): strip it from those still to run, so their strict decoding takes
-- them.

-- +goose Up
DELETE FROM river_job
WHERE kind = 'release_hold'
  AND state IN ('available', 'pending', 'retryable', 'scheduled');

UPDATE river_job SET args = args - 'not_before'
WHERE kind = 'rollback_batch'
  AND args ? 'not_before'
  AND state IN ('available', 'pending', 'retryable', 'scheduled', 'running');

-- +goose Down
-- Nothing to restore: the deleted jobs had nothing left to do.
SELECT 1;
