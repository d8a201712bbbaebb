package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/retention"
)

// RetentionArgs is the periodic job that deletes, in small batches, the
// ended holds and idempotency records older than STOCKHOLD_RETENTION.
type RetentionArgs struct{}

// Kind names the job in river_job.
func (RetentionArgs) Kind() string { return "retention" }

// InsertOpts keeps one run queued at a time.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByState: notFinished}}
}

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	svc *retention.Service
}

func (w *retentionWorker) Work(ctx context.Context, job *river.Job[RetentionArgs]) error {
	_, err := w.svc.Run(ctx)
	return err
}
