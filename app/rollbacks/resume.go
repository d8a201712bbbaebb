package rollbacks

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
)

// Resumed is what resuming a rollback did.
type Resumed struct {
	RollbackID int64  `json:"rollback_id"`
	Status     string `json:"status"`
	// Resumed is true when this call gave the request a new job (or, for a
	// dry run, finished it), false when there was nothing to resume.
	Resumed bool `json:"resumed"`
	// JobID is the job that carries the request on: the live one it had,
	// or the batch just enqueued; null once the request is finished.
	JobID *int64 `json:"job_id"`
}

// ResumeTx makes sure unfinished rollback request id has a job to carry it
// on, inside the caller's transaction: when every job of its chain was
// cancelled, deleted or discarded, it enqueues the next batch (a failed
// request is set running again; a dry run is counted at once) and records
// who resumed it. A request with a live job, or a finished one, is left as
// it is, so resuming is idempotent. by says who resumes (an operator's name
// or system:reconcile).
func (s *Service) ResumeTx(ctx context.Context, tx pgx.Tx, id int64, by string) (Resumed, error) {
	if err := domain.ValidName("operator", by); err != nil {
		return Resumed{}, err
	}
	q := db.New(tx)
	row, err := q.RollbackLock(ctx, id)
	if err := dberr.NotFound(err, "rollback"); err != nil {
		return Resumed{}, fmt.Errorf("lock rollback %d: %w", id, err)
	}
	row, jobID, resumed, err := s.carryOnTx(ctx, tx, row, 0)
	if err != nil {
		return Resumed{}, err
	}
	if resumed {
		if row, err = q.RollbackResumed(ctx, by, domain.KeyName(ctx), id); err != nil {
			return Resumed{}, err
		}
	}
	return Resumed{RollbackID: id, Status: row.Status, Resumed: resumed, JobID: jobID}, nil
}

// Resume is ResumeTx in its own transaction.
func (s *Service) Resume(ctx context.Context, id int64, by string) (Resumed, error) {
	var out Resumed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		out, err = s.ResumeTx(ctx, tx, id, by)
		return err
	})
	return out, err
}

// carryOnTx makes sure the locked request row, unless it succeeded, has a
// live job other than exceptJob (the job calling, 0 for none): the one it
// has, or a first or next batch enqueued now. A pending or failed request
// is set running; a dry run is counted and finished at once instead. It
// returns the row, the live job's id (nil once finished) and whether it
// enqueued or finished anything.
func (s *Service) carryOnTx(ctx context.Context, tx pgx.Tx, row db.RollbackRequest, exceptJob int64) (db.RollbackRequest, *int64, bool, error) {
	if row.Status == StatusSucceeded {
		return row, nil, false, nil
	}
	q := db.New(tx)
	live, err := q.RollbackLiveJob(ctx, db.RollbackLiveJobParams{
		IncludeRunning: true, ExceptJobID: exceptJob, JobID: row.JobID, RollbackID: row.ID,
	})
	if err == nil {
		return row, &live.ID, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return row, nil, false, fmt.Errorf("find the live jobs of rollback %d: %w", row.ID, err)
	}
	if row.DryRun {
		row, err = dryRunTx(ctx, q, row)
		return row, nil, true, err
	}
	if row.Status != StatusRunning {
		if row, err = q.RollbackMarkRunning(ctx, row.ID); err != nil {
			return row, nil, false, err
		}
	}
	job, err := s.enqueueBatch(ctx, tx, row.ID, 0)
	if err != nil {
		return row, nil, false, err
	}
	return row, &job.ID, true, nil
}
