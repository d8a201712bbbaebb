package jobs

import (
	"context"
	"errors"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/inventory"
)

// releaseHoldWorker works the release_hold jobs that earlier versions
// enqueued, one per hold, at its expires_at. The expiry loop has usually
// expired the hold already; then there is nothing to do.
type releaseHoldWorker struct {
	river.WorkerDefaults[inventory.ReleaseHoldArgs]
	inv *inventory.Service
}

func (w *releaseHoldWorker) Work(ctx context.Context, job *river.Job[inventory.ReleaseHoldArgs]) error {
	_, err := w.inv.Expire(ctx, job.Args.ReservationID)
	var early *inventory.ErrNotYetExpired
	if errors.As(err, &early) {
		return river.JobSnooze(early.Remaining)
	}
	return err
}
