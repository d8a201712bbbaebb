package campaigns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
)

// A campaign's end: its pools paused, its unpaid holds rolled back in
// batches, and the finish that gives what its pools still hold back to main.

// EndTx closes a campaign at once, inside the caller's transaction: it
// stops taking holds (its pools are paused in this same transaction, so a
// hold either committed before or is refused), and its unpaid holds start
// rolling back; its campaign_start or campaign_end job still waiting is
// cancelled. Ending an ended campaign answers its existing rollback, and
// resumes its end if that was stranded (see ResumeTx).
func (s *Service) EndTx(ctx context.Context, tx pgx.Tx, id, operator, reason string) (rollbacks.Created, error) {
	if operator == "" {
		operator = "system:campaign_end"
	} else if err := domain.ValidName("operator", operator); err != nil {
		return rollbacks.Created{}, err
	}
	if reason == "" {
		reason = "campaign " + id + " ended"
	} else if err := domain.ValidText("reason", reason, domain.MaxTextLength); err != nil {
		return rollbacks.Created{}, err
	}
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if err != nil {
		return rollbacks.Created{}, notFound(err, id)
	}
	if c.Status == StatusEnded || c.Status == StatusRolledBack {
		rb, err := q.RollbackLatestForCampaign(ctx, id)
		if err != nil {
			return rollbacks.Created{}, fmt.Errorf("campaign %s ended without a rollback: %w", id, err)
		}
		if c.Status == StatusEnded {
			// Ending again (or a retried campaign_end job) carries a
			// stranded end on: its rollback, or the finish.
			if _, _, err := s.carryOnEndTx(ctx, tx, id, rb, operator); err != nil {
				return rollbacks.Created{}, err
			}
		}
		return rollbacks.Created{RollbackID: rb.ID, JobID: domain.Value(rb.JobID)}, nil
	}
	if _, err := q.CampaignSetStatus(ctx, db.CampaignSetStatusParams{
		Status: StatusEnded, EndedBy: &operator, EndReason: &reason, EndedKey: domain.KeyName(ctx), ID: id,
	}); err != nil {
		return rollbacks.Created{}, err
	}
	// Its scheduled start or end has nothing left to do: it leaves the
	// job backlog with the campaign (the job running this end, if any,
	// is running, not waiting, and finishes as usual).
	if _, err := q.CampaignStepJobsCancel(ctx, id); err != nil {
		return rollbacks.Created{}, fmt.Errorf("cancel campaign %s's scheduled steps: %w", id, err)
	}
	pools, err := q.CampaignPools(ctx, id)
	if err != nil {
		return rollbacks.Created{}, err
	}
	for _, p := range pools {
		err := stock.PauseTx(ctx, tx, stock.SwitchRequest{SKU: p.Sku, Location: p.Location, Pool: id, Actor: operator, Reason: "campaign " + id + " ended"})
		if err != nil {
			return rollbacks.Created{}, err
		}
	}
	// Its rollback's cut-off is now, its pools paused, not the
	// transaction's start: a hold batch that locked a pool before the pause
	// began after this transaction did, and committed; every hold of the
	// campaign is in reach, and none can come after.
	now, err := q.DatabaseClock(ctx)
	if err != nil {
		return rollbacks.Created{}, err
	}
	return s.rollbacks.StartTx(ctx, tx, rollbacks.Request{
		Operator: operator, Reason: reason, Scope: rollbacks.Scope{Campaign: id}, Source: rollbacks.SourceCampaignEnd, RequestedAt: &now,
	})
}

// End is EndTx in its own transaction (through inventory's InTx: ending
// again may finish a stranded end, giving stock back to main).
func (s *Service) End(ctx context.Context, id, operator, reason string) (rollbacks.Created, error) {
	var out rollbacks.Created
	err := s.inv.InTx(ctx, func(tx pgx.Tx) (err error) {
		out, err = s.EndTx(ctx, tx, id, operator, reason)
		return err
	})
	return out, err
}

// RollbackBatch runs one batch of rollback id (the rollback_batch job
// jobID) in a transaction of its own, whatever the rollback's source. The
// last batch of a campaign's end also finishes the campaign (FinishTx), in
// that same transaction: a campaign is rolled_back if and only if its last
// unpaid hold was released. The transaction locks a campaign's end's
// campaign before its rollback, as EndTx and ResumeTx do (the finish locks
// it, and an end that carries the rollback on locks the rollback after
// it), and runs through inventory's InTx, as the service's own writes: the
// finish gives stock back to main.
func (s *Service) RollbackBatch(ctx context.Context, id, jobID int64) (b rollbacks.Batch, err error) {
	err = s.inv.InTx(ctx, func(tx pgx.Tx) error {
		if err := lockCampaignOf(ctx, tx, id); err != nil {
			return err
		}
		if b, err = s.rollbacks.BatchTx(ctx, tx, id, jobID); err != nil {
			return err
		}
		if b.Finished && b.Rollback.Source == rollbacks.SourceCampaignEnd {
			return s.FinishTx(ctx, tx, b.Rollback.Scope.Campaign, b.Rollback.Operator)
		}
		if b.Finished && b.Rollback.ReconciliationRunID == nil {
			id, err := s.reconcileRollbackTx(ctx, tx, b.Rollback)
			b.Rollback.ReconciliationRunID = id
			return err
		}
		return nil
	})
	return b, err
}

// lockCampaignOf locks the campaign whose end rollback id is (nothing for
// another rollback, or one that does not exist: BatchTx answers that).
func lockCampaignOf(ctx context.Context, tx pgx.Tx, id int64) error {
	q := db.New(tx)
	row, err := q.RollbackGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read rollback %d: %w", id, err)
	}
	if row.Source != rollbacks.SourceCampaignEnd {
		return nil
	}
	r, err := rollbacks.View(row)
	if err != nil {
		return err
	}
	if _, err := q.CampaignLock(ctx, r.Scope.Campaign); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("lock campaign %s: %w", r.Scope.Campaign, err)
	}
	return nil
}

// reconcileRollbackTx asks, in a manual rollback's last batch, for the
// second reconciliation that follows it: a run of the SKUs its scope
// covered, recorded on the request. It returns the run's id (nil when the
// scope covers no SKU).
func (s *Service) reconcileRollbackTx(ctx context.Context, tx pgx.Tx, r rollbacks.Rollback) (*int64, error) {
	q := db.New(tx)
	sc := r.Scope
	skus, err := q.RollbackSKUs(ctx, sc.ReservationIDs, domain.Optional(sc.Campaign), domain.Optional(sc.SKU))
	if err != nil {
		return nil, fmt.Errorf("list the SKUs of rollback %d: %w", r.ID, err)
	}
	if len(skus) == 0 {
		return nil, nil
	}
	run, err := q.ReconcileRunCreate(ctx, reconcile.TriggerRollback, skus)
	if err != nil {
		return nil, fmt.Errorf("record the reconciliation of rollback %d: %w", r.ID, err)
	}
	if _, err := s.jobs.InsertTx(ctx, tx, reconcile.ReconcileArgs{RunID: run.ID}, nil); err != nil {
		return nil, fmt.Errorf("enqueue the reconciliation of rollback %d: %w", r.ID, err)
	}
	if err := q.RollbackReconcileSet(ctx, &run.ID, r.ID); err != nil {
		return nil, err
	}
	return &run.ID, nil
}

// FinishTx completes a campaign whose unpaid holds are all rolled back,
// inside the last rollback batch's transaction: everything left on hand in
// its pools (available, quality control, damaged, safety stock) moves back
// to main at the same location, each state to the same state
// (stock.GiveBackTx), the campaign becomes rolled_back, and a
// reconciliation of its SKUs is enqueued. Units sold stay in the pool, as
// the record of the sale; units in transit to or from a pool land in main
// when their transfer is received or cancelled.
func (s *Service) FinishTx(ctx context.Context, tx pgx.Tx, id, actor string) error {
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if err != nil {
		return fmt.Errorf("lock campaign %s: %w", id, err)
	}
	if c.Status != StatusEnded {
		return nil
	}
	skus, _, err := giveBackTx(ctx, tx, id, actor, "campaign "+id+" ended: remainder back to main")
	if err != nil {
		return err
	}
	if _, err := q.CampaignSetStatus(ctx, db.CampaignSetStatusParams{Status: StatusRolledBack, ID: id}); err != nil {
		return err
	}
	if len(skus) > 0 {
		if _, err := s.jobs.InsertTx(ctx, tx, reconcile.ReconcileArgs{SKUs: skus, Trigger: reconcile.TriggerCampaignEnd}, nil); err != nil {
			return fmt.Errorf("enqueue reconcile: %w", err)
		}
	}
	return nil
}

// ResumeTx gives campaign id's next step a job when it has none, inside the
// caller's transaction: a scheduled campaign gets a campaign_start job (due
// at its start), an active one a campaign_end job (due at its end), and an
// ended one has its rollback resumed (rollbacks.Service.ResumeTx) or, when
// that succeeded but the campaign was never finished, is finished now (its
// remainder back to main). A rolled-back campaign whose pools still hold
// stock on hand (reconciliation's CampaignsHolding finds those) gives it
// back to main. A campaign whose step has a live job is left alone. It
// returns what it did in words (empty when nothing) and the job that
// carries the campaign on, if any. by says who resumes it.
func (s *Service) ResumeTx(ctx context.Context, tx pgx.Tx, id, by string) (string, *int64, error) {
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if err := notFound(err, id); err != nil {
		return "", nil, fmt.Errorf("lock campaign %s: %w", id, err)
	}
	switch c.Status {
	case StatusScheduled:
		return s.scheduleStepTx(ctx, tx, id, CampaignStartArgs{Campaign: id}, c.StartsAt)
	case StatusActive:
		return s.scheduleStepTx(ctx, tx, id, CampaignEndArgs{Campaign: id}, c.EndsAt)
	case StatusEnded:
		rb, err := q.RollbackLatestForCampaign(ctx, id)
		if err != nil {
			return "", nil, fmt.Errorf("campaign %s ended without a rollback: %w", id, err)
		}
		return s.carryOnEndTx(ctx, tx, id, rb, by)
	case StatusRolledBack:
		// Finished, its pools should hold nothing on hand: what a write
		// around the service left there goes back to main.
		_, gave, err := giveBackTx(ctx, tx, id, by, "campaign "+id+" is finished: what its pool still held back to main")
		if err != nil || len(gave) == 0 {
			return "", nil, err
		}
		return "gave back to main what its pools still held on hand (" + strings.Join(gave, "; ") + ")", nil, nil
	}
	return "", nil, nil
}

// scheduleStepTx enqueues args (a campaign_start or campaign_end job), due
// at at, unless the campaign already has a live job of that kind.
func (s *Service) scheduleStepTx(ctx context.Context, tx pgx.Tx, id string, args river.JobArgs, at time.Time) (string, *int64, error) {
	live, err := db.New(tx).CampaignLiveJob(ctx, args.Kind(), id)
	if err == nil {
		return "", &live, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", nil, fmt.Errorf("find the live %s job of campaign %s: %w", args.Kind(), id, err)
	}
	var opts *river.InsertOpts
	if at.After(time.Now()) {
		opts = &river.InsertOpts{ScheduledAt: at}
	}
	res, err := s.jobs.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return "", nil, fmt.Errorf("enqueue %s: %w", args.Kind(), err)
	}
	if res.UniqueSkippedAsDuplicate {
		return "", nil, fmt.Errorf("campaign %s: %s job %d (%s) stands in the way of a new one; delete it, then resume again",
			id, args.Kind(), res.Job.ID, res.Job.State)
	}
	return fmt.Sprintf("%s job %d enqueued, due %s", args.Kind(), res.Job.ID, res.Job.ScheduledAt.UTC().Format(time.RFC3339)), &res.Job.ID, nil
}

// carryOnEndTx carries an ended campaign on: its rollback rb is resumed
// when stranded, or, once it succeeded, the campaign is finished.
func (s *Service) carryOnEndTx(ctx context.Context, tx pgx.Tx, id string, rb db.RollbackRequest, by string) (string, *int64, error) {
	if rb.Status != rollbacks.StatusSucceeded {
		r, err := s.rollbacks.ResumeTx(ctx, tx, rb.ID, by)
		if err != nil || !r.Resumed {
			return "", r.JobID, err
		}
		return fmt.Sprintf("rollback %d resumed (%s)", rb.ID, r.Status), r.JobID, nil
	}
	if err := s.FinishTx(ctx, tx, id, by); err != nil {
		return "", nil, err
	}
	return "finished: its remainder moved back to main", nil, nil
}

// giveBackTx moves what the pools of campaign id hold on hand back to main
// (stock.GiveBackTx), every row it changes locked first in the one
// lock order (stock.LockGiveBackTx), and returns the campaign's SKUs
// and, per pool that gave anything, what it gave.
func giveBackTx(ctx context.Context, tx pgx.Tx, id, actor, reason string) ([]string, []string, error) {
	if err := stock.LockGiveBackTx(ctx, tx, id); err != nil {
		return nil, nil, err
	}
	pools, err := db.New(tx).CampaignPools(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var skus, gave []string
	for _, p := range pools {
		if len(skus) == 0 || skus[len(skus)-1] != p.Sku {
			skus = append(skus, p.Sku)
		}
		moved, err := stock.GiveBackTx(ctx, tx, stock.GiveBack{SKU: p.Sku, Location: p.Location, Pool: id, Actor: actor, Reason: reason, Ref: id})
		if err != nil {
			return nil, nil, err
		}
		if !moved.Zero() {
			gave = append(gave, fmt.Sprintf("%s%s: %s", p.Sku, stock.At(p.Location), moved))
		}
	}
	return skus, gave, nil
}
