package rollbacks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// Batch is what one rollback_batch did.
type Batch struct {
	Rollback Rollback
	Released int
	// Finished means this batch found nothing in scope held any more and
	// marked the request succeeded. A batch of a request that had already
	// finished does nothing and reports false.
	Finished bool
	// Next is the batch it enqueued, due after the pause; nil when the
	// request is finished or another live job carries the chain on.
	Next *rivertype.JobRow
}

// BatchTx releases the next BatchSize holds of rollback id (created before
// its cut-off) inside the caller's transaction, records the progress, and
// either enqueues the next batch, due after the pause, or, when nothing in
// scope is held any more, marks the request succeeded. jobID is the batch's
// own job.
//
// A succeeded request is left alone, so a duplicated batch changes nothing.
// A failed one is reopened: its batch runs because someone retried it (the
// job dashboard, reconciliation). A dry run never releases: its batch only
// counts. And the chain stays one chain: when another job of the request is
// live (a batch retried by hand while the chain went on), this batch does
// not enqueue a successor when one is queued already.
//
// The last batch of a campaign's end also finishes the campaign, in its
// transaction (campaigns.Service.FinishTx gives its pools back to main): a
// batch that may be the last locks every stock row the finish changes
// before it releases anything (lockForFinish), and one that released holds
// without having done so is not the last.
func (s *Service) BatchTx(ctx context.Context, tx pgx.Tx, id, jobID int64) (Batch, error) {
	q := db.New(tx)
	row, err := q.RollbackLock(ctx, id)
	if err != nil {
		return Batch{}, fmt.Errorf("lock rollback %d: %w", id, err)
	}
	switch {
	case row.Status == StatusSucceeded:
		r, err := newRollback(row)
		return Batch{Rollback: r}, err
	case row.DryRun:
		row, err = dryRunTx(ctx, q, row)
		if err != nil {
			return Batch{}, err
		}
		r, err := newRollback(row)
		return Batch{Rollback: r, Finished: true}, err
	}
	r, err := newRollback(row)
	if err != nil {
		return Batch{}, err
	}
	ids, err := nextBatch(ctx, q, r)
	if err != nil {
		return Batch{}, err
	}
	lockedForFinish, err := lockForFinish(ctx, tx, r, ids)
	if err != nil {
		return Batch{}, err
	}
	how := inventory.Outcome{Status: inventory.StatusReleased, Kind: stock.LedgerRollback, Actor: r.Operator, Reason: r.Reason}
	handed, err := s.inv.ReleaseLinesTx(ctx, tx, ids, how, r.Scope.lines())
	if err != nil {
		return Batch{}, err
	}
	var units int64
	for _, h := range handed {
		units += h.Units
	}
	// Progress also sets a pending or failed request running.
	row, err = q.RollbackProgress(ctx, int32(len(handed)), units, id)
	if err != nil {
		return Batch{}, err
	}
	left, err := count(ctx, q, r)
	if err != nil {
		return Batch{}, err
	}
	out := Batch{Released: len(handed), Finished: left.Holds == 0}
	if out.Finished && r.Source == SourceCampaignEnd && len(handed) > 0 && !lockedForFinish {
		// The finish would lock main's rows after the release locked
		// the campaign's: the next batch, which releases nothing first,
		// finishes instead.
		out.Finished = false
	}
	if out.Finished {
		row, err = q.RollbackFinish(ctx, db.RollbackFinishParams{Status: StatusSucceeded, ID: id})
		if err != nil {
			return Batch{}, err
		}
	} else {
		// Some left: a full batch, or holds a confirm or release had
		// locked. Either way the next batch, after the pause, sees them;
		// unless one is queued already (this batch was a duplicate).
		_, err := q.RollbackLiveJob(ctx, db.RollbackLiveJobParams{ExceptJobID: jobID, JobID: row.JobID, RollbackID: id})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if out.Next, err = s.enqueueBatch(ctx, tx, id, s.pause); err != nil {
				return Batch{}, err
			}
		case err != nil:
			return Batch{}, fmt.Errorf("find the live jobs of rollback %d: %w", id, err)
		}
	}
	out.Rollback, err = newRollback(row)
	return out, err
}

// enqueueBatch enqueues the next batch of rollback id, due after pause.
// The inserter's middleware (jobs.routeQueues) inserts a batch due sooner
// than River's scheduler tick as available, with its future scheduled_at,
// so that a pause of 100 ms does not become up to 5 s.
func (s *Service) enqueueBatch(ctx context.Context, tx pgx.Tx, id int64, pause time.Duration) (*rivertype.JobRow, error) {
	var opts *river.InsertOpts
	if pause > 0 {
		opts = &river.InsertOpts{ScheduledAt: time.Now().Add(pause)}
	}
	res, err := s.jobs.InsertTx(ctx, tx, RollbackBatchArgs{RollbackID: id}, opts)
	if err != nil {
		return nil, fmt.Errorf("enqueue rollback_batch: %w", err)
	}
	return res.Job, nil
}

// lockForFinish locks, when batch ids of a campaign's end may be its last,
// every stock row the campaign's finish changes in this transaction (the
// campaign's rows and main's beside them: stock.LockGiveBackTx), after
// the holds (nextBatch locked them) and before the release locks any
// stock row, so that the transaction takes them all in the one lock order.
// It reports whether it did. A batch may be the last when it took every
// hold still held: fewer than BatchSize, or as many as the scope holds.
// One that was not expected to be the last and still left nothing held
// (holds it skipped, locked by a confirm or a release, ended meanwhile)
// does not finish (see BatchTx): the next one does.
func lockForFinish(ctx context.Context, tx pgx.Tx, r Rollback, ids []uuid.UUID) (bool, error) {
	if r.Source != SourceCampaignEnd || len(ids) == 0 {
		return false, nil
	}
	if len(ids) >= BatchSize {
		held, err := count(ctx, db.New(tx), r)
		if err != nil {
			return false, err
		}
		if int(held.Holds) > len(ids) {
			return false, nil
		}
	}
	if err := stock.LockGiveBackTx(ctx, tx, r.Scope.Campaign); err != nil {
		return false, fmt.Errorf("rollback %d: %w", r.ID, err)
	}
	return true, nil
}

func nextBatch(ctx context.Context, q *db.Queries, r Rollback) ([]uuid.UUID, error) {
	s, cutoff := r.Scope, r.Cutoff()
	switch {
	case len(s.ReservationIDs) > 0:
		return q.ReservationsHeldByIDs(ctx, s.ReservationIDs, cutoff, BatchSize)
	case s.Campaign != "":
		return q.ReservationsHeldByCampaign(ctx, &s.Campaign, cutoff, BatchSize)
	case s.SKU != "" || s.Location != "":
		return q.ReservationsHeldByScope(ctx, db.ReservationsHeldByScopeParams{
			Cutoff: cutoff, Sku: domain.Optional(s.SKU), Pool: domain.Optional(s.Pool), Location: domain.Optional(s.Location), Lim: BatchSize,
		})
	}
	return nil, fmt.Errorf("rollback %d: scope is empty", r.ID)
}
