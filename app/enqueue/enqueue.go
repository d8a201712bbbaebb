// Package enqueue is how domain packages put River jobs into the database:
// inside their own transactions, so that a job exists if and only if the
// change that needs it committed, and with every kind's attempt budget.
package enqueue

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// MaxAttempts is every job kind's attempt budget. River's clients
// (jobs.NewInserter, jobs.NewClient) give it to every job they insert, so
// no args type repeats it; a job that fails its third attempt is discarded,
// and a discarded job always raises an alert.
const MaxAttempts = 3

// Inserter inserts River jobs inside a caller's transaction, so that a job
// exists if and only if the change that needs it committed. A
// *river.Client[pgx.Tx] is one; an insert-only client (no queues, never
// started) is enough.
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}
