package jobs

import (
	"context"
	"errors"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/reconcile"
)

// reconcileWorker runs one reconciliation: a periodic one, or one asked for
// over HTTP or at a campaign's end (whose run row already exists).
type reconcileWorker struct {
	river.WorkerDefaults[reconcile.ReconcileArgs]
	svc *reconcile.Service
}

func (w *reconcileWorker) Work(ctx context.Context, job *river.Job[reconcile.ReconcileArgs]) error {
	_, err := w.svc.Run(ctx, job.Args)
	var de *domain.Error
	if errors.As(err, &de) {
		// A run that does not exist, bad SKUs or trigger: no retry mends it.
		return river.JobCancel(err)
	}
	return err
}

// periodicReconcile is the periodic run's job; while one is queued, another
// is not added (requested runs differ by run id, so they are never merged).
func periodicReconcile() (river.JobArgs, *river.InsertOpts) {
	return reconcile.ReconcileArgs{Trigger: reconcile.TriggerPeriodic}, &river.InsertOpts{
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: notFinished},
	}
}
