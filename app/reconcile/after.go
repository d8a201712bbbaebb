package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Triggers of the reconciliation that follows an operator's action on a
// pool's books.
const (
	TriggerResume     = "resume"
	TriggerRepair     = "repair"
	TriggerRollback   = "rollback"
	TriggerAdjustment = "adjustment"
)

// Check is a reconciliation as an operator's answer shows it: what it
// checked and whether the books balanced (the whole run, with its
// findings, is GET /v1/reconciliations/{id}).
type Check struct {
	ID      int64    `json:"id"`
	Trigger string   `json:"trigger"`
	Status  string   `json:"status"`
	SKUs    []string `json:"skus"`
	// Balanced is true when the run succeeded with no high-risk finding.
	Balanced  bool  `json:"balanced"`
	HighRisk  int32 `json:"high_risk"`
	AutoFixed int32 `json:"auto_fixed"`
}

func checkOf(r Run) *Check {
	return &Check{ID: r.ID, Trigger: r.Trigger, Status: r.Status, SKUs: r.SKUs, Balanced: r.Status == StatusSucceeded && r.HighRisk == 0,
		HighRisk: r.HighRisk, AutoFixed: r.AutoFixed}
}

// After runs, right after an operator's action on skus (a repair, a
// resume, an adjustment), a reconciliation limited to those SKUs and returns it, to
// be shown where the operator acted. The action has committed by then, so
// a reconciliation that fails is logged and answered as nil rather than
// failing the action: the periodic runs check the SKU again (its ledger
// moved past their watermark). One that waited past the lock timeout (for
// the reconciliation lock another run held: many adjustments at once, as
// when stock is seeded) is not retried either, and is logged as skipped at
// most once a minute, with how many were, rather than once each.
func (s *Service) After(ctx context.Context, trigger string, skus ...string) *Check {
	run, err := s.Run(context.WithoutCancel(ctx), ReconcileArgs{Trigger: trigger, SKUs: skus})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available: the lock timeout
			s.skipped.note(ctx, s.log, trigger, skus, err)
			return nil
		}
		s.log.ErrorContext(ctx, "reconciliation after an operator's action", "trigger", trigger, "skus", skus, "err", err)
		return nil
	}
	return checkOf(run)
}

// skipLog counts the reconciliations After skipped at a lock timeout and
// logs them at most once per skipEvery: a line says how many were skipped
// since the last one (itself included).
type skipLog struct {
	mu      sync.Mutex
	next    time.Time
	skipped int
}

const skipEvery = time.Minute

func (l *skipLog) note(ctx context.Context, log *slog.Logger, trigger string, skus []string, err error) {
	l.mu.Lock()
	l.skipped++
	now := time.Now()
	if now.Before(l.next) {
		l.mu.Unlock()
		return
	}
	n := l.skipped
	l.skipped, l.next = 0, now.Add(skipEvery)
	l.mu.Unlock()
	log.WarnContext(ctx, "reconciliations after operators' actions skipped at the lock timeout (another reconciliation held the lock); the next periodic run checks their SKUs",
		"skipped", n, "trigger", trigger, "skus", skus, "err", err)
}

// Resume lifts a paused pool through its gate (inventory.Service.Lift:
// refused with 409 books_unbalanced while its books disagree) and then
// reconciles its SKU. A forced resume is not followed by a reconciliation:
// the pool's books are known not to balance, and the run would pause it
// again at once; the next periodic run does, unless it is repaired first.
//
// A resume whose gate found the books balanced resolves the pool's
// books_out_of_balance alert, if one is open or acknowledged, saying who
// resumed it and why: what the alert reported is fixed.
func (s *Service) Resume(ctx context.Context, l stock.Lift) (stock.Lifted, *Check, error) {
	out, err := s.inv.Lift(ctx, l)
	if err != nil {
		return stock.Lifted{}, nil, err
	}
	if l.Force && !out.Books.Balanced() {
		return out, nil, nil
	}
	check := s.After(ctx, TriggerResume, l.SKU)
	s.resolveBooks(ctx, l, check)
	return out, check, nil
}

// resolveBooks resolves the books_out_of_balance alert of the pool a
// resume lifted through its gate, books balanced. A failure is logged: the
// resume has committed, and the alert can still be acknowledged.
func (s *Service) resolveBooks(ctx context.Context, l stock.Lift, check *Check) {
	k := stockKey{sku: l.SKU, location: l.Location, pool: l.Pool}
	if k.location == "" {
		k.location = stock.DefaultLocation
	}
	if k.pool == "" {
		k.pool = stock.MainPool
	}
	who := l.Actor
	if key := domain.Value(domain.KeyName(ctx)); key != "" && key != who {
		who += " (key " + key + ")"
	}
	how := "the books balanced at the resume gate"
	if check != nil && check.Balanced {
		how = fmt.Sprintf("the books balance (reconciliation run %d after the resume)", check.ID)
	}
	resolution := fmt.Sprintf("Fixed: %s, and %s resumed the pool: %s", how, who, l.Reason)
	if _, err := s.alerts.Resolve(context.WithoutCancel(ctx), KindBooksOutOfBalance, subject(k), resolution); err != nil {
		s.log.ErrorContext(ctx, "resolve the books_out_of_balance alert after a resume", "sku", l.SKU, "err", err)
	}
}

// Repair repairs a pool's books (inventory.Service.Repair) and, unless it
// was a dry run, reconciles its SKU.
func (s *Service) Repair(ctx context.Context, r stock.RepairRequest) (stock.Repaired, *Check, error) {
	out, err := s.inv.Repair(ctx, r)
	if err != nil || r.DryRun {
		return out, nil, err
	}
	return out, s.After(ctx, TriggerRepair, r.SKU), nil
}

// SwitchCampaign pauses or resumes every pool row of a campaign
// (inventory.Service.SwitchPool) and, after a resume that changed a row
// without force, reconciles the SKUs it resumed.
func (s *Service) SwitchCampaign(ctx context.Context, w stock.PoolSwitch) (stock.PoolSwitched, *Check, error) {
	out, err := s.inv.SwitchPool(ctx, w)
	if err != nil || !w.On || w.Force || out.Changed == 0 {
		return out, nil, err
	}
	skus := make([]string, len(out.SKUs))
	for i, r := range out.SKUs {
		skus[i] = r.SKU
	}
	return out, s.After(ctx, TriggerResume, skus...), nil
}
