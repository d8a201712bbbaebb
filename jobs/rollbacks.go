package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// manualRollbackWorker accepts an operator's rollback: it records a request
// inserted with plain SQL, refuses (with an alert) one without operator,
// reason or scope, runs a dry run, or starts the chain of batches.
type manualRollbackWorker struct {
	river.WorkerDefaults[rollbacks.ManualRollbackArgs]
	rollbacks *rollbacks.Service
	alerts    *alerts.Service
}

func (w *manualRollbackWorker) Work(ctx context.Context, job *river.Job[rollbacks.ManualRollbackArgs]) error {
	_, err := w.rollbacks.Accept(ctx, job.ID, job.CreatedAt, job.Args)
	if errors.Is(err, rollbacks.ErrRefused) {
		return refuseJob(ctx, w.alerts, job.JobRow, err)
	}
	return err
}

// rollbackBatchWorker runs one batch of a rollback, through campaigns,
// whose last batch of a campaign's end finishes the campaign (see
// campaigns.Service.RollbackBatch). It never waits: the next batch is a job
// of its own, due after the pause, and wake tells the workers when it is
// due.
type rollbackBatchWorker struct {
	river.WorkerDefaults[rollbacks.RollbackBatchArgs]
	campaigns *campaigns.Service
	rollbacks *rollbacks.Service
	wake      *waker
}

func (w *rollbackBatchWorker) Work(ctx context.Context, job *river.Job[rollbacks.RollbackBatchArgs]) error {
	b, err := w.campaigns.RollbackBatch(ctx, job.Args.RollbackID, job.ID)
	if err == nil {
		if b.Next != nil {
			w.wake.at(b.Next.ScheduledAt, b.Next.Queue)
		}
		return nil
	}
	if job.Attempt >= job.MaxAttempts {
		// Out of attempts: say so on the request; the discarded job raises
		// an alert and reconciliation retries it.
		ferr := w.rollbacks.Fail(context.WithoutCancel(ctx), job.Args.RollbackID, err.Error())
		return errors.Join(err, ferr)
	}
	return err
}

// waker tells the workers of every instance that a job inserted available
// with a future scheduled_at (a rollback's next batch) is due, with the
// notification River sends when a job is inserted. Without it the job would
// wait for a worker's next poll for jobs (every second), on top of the
// pause. The wake-up is a timer in this process, not a sleeping job: if the
// process dies meanwhile, the job is still found by the next poll of any
// instance.
type waker struct {
	exec riverdriver.Executor
	log  *slog.Logger
}

func (w *waker) at(due time.Time, queue string) {
	if w == nil {
		return
	}
	time.AfterFunc(time.Until(due), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		payload, _ := json.Marshal(map[string]string{"queue": queue})
		err := w.exec.NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: "river_insert", Payload: []string{string(payload)}})
		if err != nil {
			// The workers' poll finds the job anyway.
			w.log.Debug("wake the workers for a due job", "queue", queue, "err", err)
		}
	})
}
