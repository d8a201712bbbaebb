package jobs

import (
	"context"
	"errors"
	"net/http"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/alerts"
)

// deliverAlertWorker POSTs a new alert to the configured webhook.
type deliverAlertWorker struct {
	river.WorkerDefaults[alerts.DeliverAlertArgs]
	alerts  *alerts.Service
	webhook string
	client  *http.Client
}

func (w *deliverAlertWorker) Work(ctx context.Context, job *river.Job[alerts.DeliverAlertArgs]) error {
	if w.webhook == "" {
		return river.JobCancel(errors.New("STOCKHOLD_ALERT_WEBHOOK is not set"))
	}
	return w.alerts.Deliver(ctx, w.client, w.webhook, job.Args.AlertID)
}

// WatchDiscardedArgs is the periodic job that turns discarded jobs into
// alerts.
type WatchDiscardedArgs struct{}

// Kind names the job in river_job.
func (WatchDiscardedArgs) Kind() string { return "watch_discarded" }

// InsertOpts keeps one watch queued at a time.
func (WatchDiscardedArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByState: notFinished}}
}

// notFinished are the job states in which a periodic job counts as queued.
var notFinished = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

type watchDiscardedWorker struct {
	river.WorkerDefaults[WatchDiscardedArgs]
	alerts *alerts.Service
}

func (w *watchDiscardedWorker) Work(ctx context.Context, job *river.Job[WatchDiscardedArgs]) error {
	_, err := w.alerts.WatchDiscarded(ctx)
	return err
}
