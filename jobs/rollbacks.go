package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// manualRollbackWorker accepts an operator's rollback: it records a request
// inserted with plain SQL, refuses (with an alert) one without operator,
// reason or scope, runs a dry run, or starts the chain of batches.
type manualRollbackWorker struct {
	river.WorkerDefaults[rollbacks.ManualRollbackArgs]
	pool      *pgxpool.Pool
	rollbacks *rollbacks.Service
	alerts    *alerts.Service
}

func (w *manualRollbackWorker) Work(ctx context.Context, job *river.Job[rollbacks.ManualRollbackArgs]) error {
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		_, err := w.rollbacks.AcceptTx(ctx, tx, job.ID, job.Args)
		return err
	})
	if !errors.Is(err, rollbacks.ErrRefused) {
		return err
	}
	args, _ := json.Marshal(job.Args)
	_, aerr := w.alerts.Raise(ctx, alerts.Raise{
		Level:   alerts.Critical,
		Kind:    "manual_rollback_refused",
		Subject: fmt.Sprintf("job:%d", job.ID),
		Details: map[string]any{"job_id": job.ID, "error": err.Error(), "args": json.RawMessage(args)},
		Action:  "A manual rollback job was refused and nothing was released. Enqueue it again with an operator, a reason and exactly one scope (see sql/manual_rollback.sql).",
	})
	if aerr != nil {
		return aerr // retry: the refusal must be seen
	}
	return river.JobCancel(err)
}

// rollbackBatchWorker runs one batch of a rollback; after the last batch of
// a campaign's end it hands the campaign to finish.
type rollbackBatchWorker struct {
	river.WorkerDefaults[rollbacks.RollbackBatchArgs]
	pool      *pgxpool.Pool
	rollbacks *rollbacks.Service
	// finish runs in the last batch's transaction of a campaign-end rollback.
	finish func(ctx context.Context, tx pgx.Tx, r rollbacks.Rollback) error
}

func (w *rollbackBatchWorker) Work(ctx context.Context, job *river.Job[rollbacks.RollbackBatchArgs]) error {
	// The pause between batches: regular holds get the row locks meanwhile.
	if wait := time.Until(job.Args.NotBefore); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		b, err := w.rollbacks.BatchTx(ctx, tx, job.Args.RollbackID)
		if err != nil {
			return err
		}
		if b.Finished && b.Rollback.Source == rollbacks.SourceCampaignEnd && w.finish != nil {
			return w.finish(ctx, tx, b.Rollback)
		}
		return nil
	})
	if err != nil && job.Attempt >= job.MaxAttempts {
		// Out of attempts: say so on the request; the discarded job raises
		// an alert and reconciliation retries it.
		ferr := pgx.BeginFunc(context.WithoutCancel(ctx), w.pool, func(tx pgx.Tx) error {
			return rollbacks.FailTx(ctx, tx, job.Args.RollbackID, err.Error())
		})
		return errors.Join(err, ferr)
	}
	return err
}
