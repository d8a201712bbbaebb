// Package trips is the protection switch's named rules: once a period it
// reads what this process saw (busy answers per stock row, confirm
// latencies) and what the database holds (the expiry backlog), and trips
// the switch a rule names: lock waits on one SKU pause that SKU's pool; an
// expiry backlog or a confirm p99 over target for several periods in a row
// raise a critical alert and, when configured, stop sales. Each trip's
// alert says which rule fired. Lifting a trip is a person's: resume the
// pool, or turn stop-sale off, with a reason.
package trips

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/inventory"
)

// Actor is who the switches the rules flip are recorded as.
const Actor = "system:trip"

// The rules, as alerts and the stop-sale switch name them.
const (
	RuleLockWaits     = "lock_waits"
	RuleExpiryBacklog = "expiry_backlog"
	RuleConfirmP99    = "confirm_latency"
)

// Config sets the rules; a zero threshold turns its rule off.
type Config struct {
	// Interval is one period: how often the rules are checked.
	Interval time.Duration
	// LockWaits is how many requests this process may answer busy in a
	// period because one stock row stayed locked past the lock timeout
	// before that pool is paused.
	LockWaits int64
	// ExpiryBacklog is how many held holds past their expiry count as a
	// backlog.
	ExpiryBacklog int64
	// ConfirmP99 is the confirm latency target (this process's p99).
	ConfirmP99 time.Duration
	// Periods is how many periods in a row the backlog or the latency must
	// be over target before the rule fires.
	Periods int
	// StopSale makes the backlog and latency rules stop sales too.
	StopSale bool
	Log      *slog.Logger
}

// Service checks the rules.
type Service struct {
	pool   *pgxpool.Pool
	inv    *inventory.Service
	alerts *alerts.Service
	cfg    Config
	log    *slog.Logger
	// over counts, per rule, the periods in a row it was over target.
	over map[string]int
}

// New returns a Service that flips switches through inv and raises alerts
// through alertSvc.
func New(pool *pgxpool.Pool, inv *inventory.Service, alertSvc *alerts.Service, cfg Config) *Service {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.Periods < 1 {
		cfg.Periods = 1
	}
	return &Service{pool: pool, inv: inv, alerts: alertSvc, cfg: cfg, log: log, over: map[string]int{}}
}

// Run checks the rules once per Interval until ctx ends.
func (s *Service) Run(ctx context.Context) {
	if s.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Check(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "protection rules", "err", err)
			}
		}
	}
}

// Fired is a rule that tripped in a check.
type Fired struct {
	Rule string
	// Subject is what it is about: a pool (sku:A1/main) or the service.
	Subject string
	Detail  string
}

// Check closes one period: it reads and resets this process's counts,
// reads the expiry backlog, and trips what the rules say. It returns what
// fired.
func (s *Service) Check(ctx context.Context) ([]Fired, error) {
	var fired []Fired
	waits := s.inv.TakeLockWaits()
	p99, confirms := s.inv.TakeConfirmP99()
	if s.cfg.LockWaits > 0 {
		for _, w := range waits {
			if w.N < s.cfg.LockWaits {
				continue
			}
			f, err := s.lockWaits(ctx, w)
			if err != nil {
				return fired, err
			}
			fired = append(fired, f)
		}
	}
	if s.cfg.ExpiryBacklog > 0 {
		n, err := db.New(s.pool).HoldsOverdueCount(ctx, int32(min(s.cfg.ExpiryBacklog+1, 1<<30)))
		if err != nil {
			return fired, fmt.Errorf("count the expiry backlog: %w", err)
		}
		f, err := s.sustained(ctx, RuleExpiryBacklog, n > s.cfg.ExpiryBacklog,
			fmt.Sprintf("more than %d held holds past their expiry", s.cfg.ExpiryBacklog),
			map[string]any{"overdue_holds_at_least": n, "threshold": s.cfg.ExpiryBacklog})
		if err != nil {
			return fired, err
		}
		fired = append(fired, f...)
	}
	if s.cfg.ConfirmP99 > 0 {
		f, err := s.sustained(ctx, RuleConfirmP99, confirms > 0 && p99 > s.cfg.ConfirmP99,
			fmt.Sprintf("confirm p99 %s over its target %s", p99.Round(time.Millisecond), s.cfg.ConfirmP99),
			map[string]any{"p99_ms": p99.Milliseconds(), "confirms": confirms, "target_ms": s.cfg.ConfirmP99.Milliseconds()})
		if err != nil {
			return fired, err
		}
		fired = append(fired, f...)
	}
	return fired, nil
}

// lockWaits pauses a pool whose row answered busy too often in a period.
func (s *Service) lockWaits(ctx context.Context, w inventory.PoolCount) (Fired, error) {
	subject := "sku:" + w.SKU + "/" + w.Pool
	what := fmt.Sprintf("%s (pool %s) stayed locked by another transaction past the lock timeout: %d requests answered busy in %s, the limit is %d", w.SKU, w.Pool, w.N, s.cfg.Interval, s.cfg.LockWaits)
	st, err := s.inv.GetStock(ctx, w.SKU)
	if err != nil {
		return Fired{}, err
	}
	for _, p := range st.Pools {
		if p.Pool != w.Pool || p.Status != inventory.StockOnSale {
			continue
		}
		_, err := s.inv.Pause(ctx, inventory.SwitchRequest{SKU: w.SKU, Pool: w.Pool, Reason: "rule " + RuleLockWaits + ": " + what, Actor: Actor})
		if err != nil {
			return Fired{}, fmt.Errorf("pause %s/%s: %w", w.SKU, w.Pool, err)
		}
	}
	_, err = s.alerts.Raise(ctx, alerts.Raise{
		Level: alerts.Critical, Kind: "trip_" + RuleLockWaits, Subject: subject, SKU: w.SKU, Pool: w.Pool,
		Details: map[string]any{"rule": RuleLockWaits, "lock_waits": w.N, "threshold": s.cfg.LockWaits, "period_seconds": s.cfg.Interval.Seconds()},
		Action: fmt.Sprintf("Rule %s fired: %s, so the pool was paused (no new holds; confirms and releases go on). "+
			"Find the transaction holding the row (pg_stat_activity, the stock_locks view), end it, then resume the pool with a reason.",
			RuleLockWaits, what),
	})
	if err != nil {
		return Fired{}, err
	}
	s.log.WarnContext(ctx, "protection rule fired", "rule", RuleLockWaits, "sku", w.SKU, "pool", w.Pool, "lock_waits", w.N)
	return Fired{Rule: RuleLockWaits, Subject: subject, Detail: what}, nil
}

// sustained fires rule when it has been over target for Periods periods
// in a row: a critical alert naming it, and stop-sale when configured.
// Under target, the count starts again.
func (s *Service) sustained(ctx context.Context, rule string, over bool, what string, details map[string]any) ([]Fired, error) {
	if !over {
		s.over[rule] = 0
		return nil, nil
	}
	s.over[rule]++
	if s.over[rule] < s.cfg.Periods {
		return nil, nil
	}
	what = fmt.Sprintf("%s for %d periods of %s in a row", what, s.over[rule], s.cfg.Interval)
	details["rule"], details["periods"], details["period_seconds"] = rule, s.over[rule], s.cfg.Interval.Seconds()
	action := fmt.Sprintf("Rule %s fired: %s.", rule, what)
	if s.cfg.StopSale {
		st, err := s.inv.StopSale(ctx)
		if err != nil {
			return nil, err
		}
		if !st.Active {
			if _, err := s.inv.SetStopSale(ctx, inventory.StopSaleChange{Active: true, Reason: "rule " + rule + ": " + what, Actor: Actor, Rule: rule}); err != nil {
				return nil, err
			}
		}
		action += " Sales are stopped (stop-sale): no new holds; confirms and releases go on. Find the cause, then turn stop-sale off with a reason (PUT /v1/stop-sale)."
	} else {
		action += " Nothing was switched (STOCKHOLD_TRIP_STOP_SALE is off): find the cause; stop sales yourself if it hurts customers (PUT /v1/stop-sale)."
	}
	_, err := s.alerts.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "trip_" + rule, Subject: "service", Details: details, Action: action})
	if err != nil {
		return nil, err
	}
	s.log.WarnContext(ctx, "protection rule fired", "rule", rule, "detail", what)
	return []Fired{{Rule: rule, Subject: "service", Detail: what}}, nil
}
