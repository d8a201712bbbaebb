package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/inventory"
)

// SweepExpiredArgs is the periodic backstop for holds the expiry loop did
// not release: it was not running, or a row they need was locked.
type SweepExpiredArgs struct{}

// Kind names the job in river_job.
func (SweepExpiredArgs) Kind() string { return "sweep_expired" }

// InsertOpts keeps one sweep queued at a time.
func (SweepExpiredArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByState: notFinished}}
}

type sweepExpiredWorker struct {
	river.WorkerDefaults[SweepExpiredArgs]
	inv   *inventory.Service
	grace time.Duration
}

func (w *sweepExpiredWorker) Work(ctx context.Context, job *river.Job[SweepExpiredArgs]) error {
	_, err := w.inv.SweepExpired(ctx, w.grace)
	return err
}
