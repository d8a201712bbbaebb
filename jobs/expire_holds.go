package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/inventory"
)

// ExpireHoldsArgs is the expiry loop: each run releases holds as they
// expire for one span (see inventory.Service.ExpireLoop), then hands over
// to the next run, which the periodic schedule has enqueued meanwhile. One
// job row per span, whatever the number of holds, shows DBAs in river_job
// that expiry runs and what it did (its output: released, passes).
type ExpireHoldsArgs struct{}

// Kind names the job in river_job.
func (ExpireHoldsArgs) Kind() string { return "expire_holds" }

type expireHoldsWorker struct {
	river.WorkerDefaults[ExpireHoldsArgs]
	inv  *inventory.Service
	span time.Duration
}

func (w *expireHoldsWorker) Work(ctx context.Context, job *river.Job[ExpireHoldsArgs]) error {
	// Run until the next run is due; a run picked up late (after a
	// restart) makes one pass and leaves the rest to the next.
	until := job.ScheduledAt.Add(w.span)
	run, err := w.inv.ExpireLoop(ctx, until)
	if oerr := river.RecordOutput(ctx, run); oerr != nil && err == nil {
		err = oerr
	}
	return err
}
