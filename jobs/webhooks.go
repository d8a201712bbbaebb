package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/webhooks"
)

// TimeoutDeliverWebhook bounds one delivery job: webhooks.Budget of
// batches, the last of which may take its full webhooks.Timeout.
const TimeoutDeliverWebhook = webhooks.Budget + 2*webhooks.Timeout

// dispatchSpan is how long one webhook_dispatch run loops.
const dispatchSpan = 5 * time.Second

// webhookDispatchWorker runs the dispatcher's loop for one span.
type webhookDispatchWorker struct {
	river.WorkerDefaults[webhooks.DispatchArgs]
	svc  *webhooks.Service
	span time.Duration
}

func (w *webhookDispatchWorker) Work(ctx context.Context, job *river.Job[webhooks.DispatchArgs]) error {
	run, err := w.svc.DispatchLoop(ctx, job.ScheduledAt.Add(w.span))
	if oerr := river.RecordOutput(ctx, run); oerr != nil && err == nil {
		err = oerr
	}
	return err
}

// webhookDeliverWorker delivers one subscription's pending events. A
// receiver that fails is the subscription's business, not the job's: the
// job snoozes until its retry is due (River does not count a snooze as an
// attempt), and only a failure of stockhold's own (the database) fails the
// attempt.
type webhookDeliverWorker struct {
	river.WorkerDefaults[webhooks.DeliverArgs]
	svc *webhooks.Service
}

func (w *webhookDeliverWorker) Work(ctx context.Context, job *river.Job[webhooks.DeliverArgs]) error {
	res, err := w.svc.Deliver(ctx, job.Args.WebhookID)
	if oerr := river.RecordOutput(ctx, res); oerr != nil && err == nil {
		err = oerr
	}
	if err != nil {
		return err
	}
	if res.Again > 0 {
		return river.JobSnooze(res.Again)
	}
	return nil
}
