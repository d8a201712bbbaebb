// Package trips is the protection switch's named rules, counted across
// every instance. Periods of STOCKHOLD_TRIP_INTERVAL start at multiples of
// it, so every instance names a period alike. At each period's end every
// serving process records in the database what it saw (busy answers per
// stock row, its confirms and how many were slower than the target:
// trip_counts); a moment later (Settle) whichever instance first records
// a rule's verdict on the period (trip_periods) acts on it, from the sums
// over every instance:
//
//   - lock waits: requests answered busy on one stock row reaching the
//     limit pause that pool;
//   - an expiry backlog, or more than 1% of confirms slower than the target
//     (the confirm p99 over it), for several periods in a row (counted in
//     the database, whichever instance decided each) raise a critical
//     alert and, when configured to act (STOCKHOLD_TRIP_STOP_SALE), pause
//     the pools involved where the rule can name them (pools behind at
//     least a tenth of the overdue holds or the slow confirms, together
//     behind at least half), or stop sales when it cannot (the trouble is
//     everywhere).
//
// Each trip's alert says which rule fired. Lifting a trip is a person's:
// resume the pool, or turn stop-sale off, with a reason; the answer shows
// what the trip recorded.
package trips

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// Actor is who the switches the rules flip are recorded as.
const Actor = "system:trip"

// The rules, as alerts and the stop-sale switch name them.
const (
	RuleLockWaits     = "lock_waits"
	RuleExpiryBacklog = "expiry_backlog"
	RuleConfirmP99    = "confirm_latency"
)

// What names the pools a sustained rule acts on: each is behind at least
// namedShare of the overdue holds or slow confirms, and together at least
// namedTogether of them (so at most 1/namedShare pools).
const (
	namedShare    = 0.10
	namedTogether = 0.50
	// poolsKept bounds the pools one instance records per period for the
	// confirm rule, and the pools a rule reads back.
	poolsKept = 20
	// backlogSample is how many of the holds longest past their expiry
	// (at least) the backlog rule reads the pools of.
	backlogSample = 10_000
	// keptFor is how long counts and verdicts are kept, for a person to
	// read (the rules read back at most STOCKHOLD_TRIP_PERIODS periods).
	keptFor = time.Hour
)

// Config sets the rules; a zero threshold turns its rule off.
type Config struct {
	// Interval is one period: how often the rules are checked.
	Interval time.Duration
	// LockWaits is how many requests every instance together may answer
	// busy in a period because one stock row stayed locked past the lock
	// timeout before that pool is paused.
	LockWaits int64
	// ExpiryBacklog is how many held holds past their expiry count as a
	// backlog.
	ExpiryBacklog int64
	// ConfirmP99 is the confirm latency target: more than 1% of the
	// period's confirms (every instance's) slower than it is a p99 over it.
	ConfirmP99 time.Duration
	// Periods is how many periods in a row the backlog or the latency must
	// be over target before the rule fires.
	Periods int
	// StopSale makes the backlog and latency rules act: pause the pools
	// involved, or stop sales when they cannot name them.
	StopSale bool
	// Instance names this process in trip_counts; empty: host, process id
	// and a random suffix.
	Instance string
	// Settle is how long after a period ends Run waits for every
	// instance's counts before deciding it; zero: a tenth of Interval, at
	// most 5 s.
	Settle time.Duration
	Log    *slog.Logger
}

// Service checks the rules.
type Service struct {
	pool   *pgxpool.Pool
	inv    *inventory.Service
	alerts *alerts.Service
	cfg    Config
	log    *slog.Logger

	mu sync.Mutex
	// next is the period Check closes next.
	next time.Time
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
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s:%d:%04x", host, os.Getpid(), rand.IntN(1<<16))
	}
	if cfg.Settle <= 0 {
		cfg.Settle = min(cfg.Interval/10, 5*time.Second)
	}
	s := &Service{pool: pool, inv: inv, alerts: alertSvc, cfg: cfg, log: log}
	s.next = time.Now().Truncate(s.period())
	return s
}

// period is one period's length (a minute when the rules are off, for
// Check).
func (s *Service) period() time.Duration {
	if s.cfg.Interval > 0 {
		return s.cfg.Interval
	}
	return time.Minute
}

// Run records and decides each period as it ends, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	if s.cfg.Interval <= 0 {
		return
	}
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		end := time.Now().Truncate(s.cfg.Interval).Add(s.cfg.Interval)
		if !wait(time.Until(end)) {
			return
		}
		period := end.Add(-s.cfg.Interval)
		if err := s.Record(ctx, period); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "protection rules: record the period", "err", err)
		}
		if !wait(s.cfg.Settle) {
			return
		}
		if _, err := s.Decide(ctx, period); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "protection rules", "err", err)
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

// Check closes a period at once, as if it had just ended: it records this
// process's counts and decides the period. Each call is the period after
// the previous one's, starting with the current one.
func (s *Service) Check(ctx context.Context) ([]Fired, error) {
	s.mu.Lock()
	p := s.next
	s.next = p.Add(s.period())
	s.mu.Unlock()
	return s.Close(ctx, p)
}

// Close records this process's counts as the period starting at period
// and decides it.
func (s *Service) Close(ctx context.Context, period time.Time) ([]Fired, error) {
	if err := s.Record(ctx, period); err != nil {
		return nil, err
	}
	return s.Decide(ctx, period)
}

// Record reads and resets this process's counts (busy answers per stock
// row; its confirms and how many were slower than the target) and adds
// them to the period starting at period in the database.
func (s *Service) Record(ctx context.Context, period time.Time) error {
	var p db.TripCountsAddParams
	add := func(rule, sku, location, pool string, n, total int64) {
		p.Rules, p.Skus, p.Locations, p.Pools = append(p.Rules, rule), append(p.Skus, sku), append(p.Locations, location), append(p.Pools, pool)
		p.Ns, p.Totals = append(p.Ns, n), append(p.Totals, total)
	}
	waits := s.inv.TakeLockWaits()
	if s.cfg.LockWaits > 0 {
		for _, w := range waits {
			add(RuleLockWaits, w.SKU, w.Location, w.Pool, w.N, 0)
		}
	}
	seen, sample := s.inv.TakeConfirmTimes()
	if s.cfg.ConfirmP99 > 0 && seen > 0 {
		slow, pools := s.slowConfirms(seen, sample)
		add(RuleConfirmP99, "", "", "", slow, int64(seen))
		for _, c := range pools {
			add(RuleConfirmP99, c.SKU, c.Location, c.Pool, c.N, 0)
		}
	}
	if len(p.Rules) == 0 {
		return nil
	}
	p.Period, p.Instance = period, s.cfg.Instance
	if err := db.New(s.pool).TripCountsAdd(ctx, p); err != nil {
		return fmt.Errorf("record the protection rules' counts: %w", err)
	}
	return nil
}

// slowConfirms estimates from a sample of seen confirms how many were
// slower than the target, in all and per pool of the holds they confirmed
// (the poolsKept pools with the most).
func (s *Service) slowConfirms(seen int, sample []holdstats.ConfirmTime) (int64, []holdstats.PoolCount) {
	if len(sample) == 0 {
		return 0, nil
	}
	scale := float64(seen) / float64(len(sample))
	slow := 0
	byPool := map[holdstats.PoolKey]int{}
	for _, c := range sample {
		if c.Took <= s.cfg.ConfirmP99 {
			continue
		}
		slow++
		for _, k := range c.Pools {
			byPool[k]++
		}
	}
	pools := make([]holdstats.PoolCount, 0, len(byPool))
	for k, n := range byPool {
		pools = append(pools, holdstats.PoolCount{SKU: k.SKU, Location: k.Location, Pool: k.Pool, N: int64(float64(n)*scale + 0.5)})
	}
	slices.SortFunc(pools, func(a, b holdstats.PoolCount) int {
		if c := cmp.Compare(b.N, a.N); c != 0 {
			return c
		}
		return cmp.Compare(a.SKU+"\x00"+a.Location+"\x00"+a.Pool, b.SKU+"\x00"+b.Location+"\x00"+b.Pool)
	})
	return int64(float64(slow)*scale + 0.5), pools[:min(len(pools), poolsKept)]
}

// Decide decides the period starting at period, once across every
// instance: each rule's verdict is recorded by whichever instance comes
// first, and only that one acts on it. It returns what fired.
func (s *Service) Decide(ctx context.Context, period time.Time) ([]Fired, error) {
	q := db.New(s.pool)
	if err := q.TripCountsDeleteOld(ctx, period.Add(-keptFor-time.Duration(s.cfg.Periods)*s.period())); err != nil {
		return nil, fmt.Errorf("delete old protection counts: %w", err)
	}
	var fired []Fired
	if s.cfg.LockWaits > 0 {
		f, err := s.decideLockWaits(ctx, period)
		if err != nil {
			return fired, err
		}
		fired = append(fired, f...)
	}
	if s.cfg.ExpiryBacklog > 0 {
		f, err := s.decideBacklog(ctx, period)
		if err != nil {
			return fired, err
		}
		fired = append(fired, f...)
	}
	if s.cfg.ConfirmP99 > 0 {
		f, err := s.decideConfirms(ctx, period)
		if err != nil {
			return fired, err
		}
		fired = append(fired, f...)
	}
	return fired, nil
}

// verdict records rule's verdict on period; it reports whether this caller
// recorded it (and so acts on it).
func (s *Service) verdict(ctx context.Context, period time.Time, rule string, over bool, details map[string]any) (bool, error) {
	raw, err := json.Marshal(details)
	if err != nil {
		return false, err
	}
	_, err = db.New(s.pool).TripPeriodDecide(ctx, db.TripPeriodDecideParams{
		Period: period, Rule: rule, Over: over, Details: raw, DecidedBy: s.cfg.Instance,
	})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) { // another instance decided it
			return false, nil
		}
		return false, fmt.Errorf("record the verdict of rule %s: %w", rule, err)
	}
	return true, nil
}

// decideLockWaits pauses every pool whose row made every instance together
// answer busy at least LockWaits times in the period.
func (s *Service) decideLockWaits(ctx context.Context, period time.Time) ([]Fired, error) {
	rows, err := db.New(s.pool).TripCountsSum(ctx, period, RuleLockWaits, 1000)
	if err != nil {
		return nil, fmt.Errorf("sum the lock waits: %w", err)
	}
	var over []db.TripCountsSumRow
	for _, r := range rows {
		if r.N >= s.cfg.LockWaits {
			over = append(over, r)
		}
	}
	pools := make([]string, len(over))
	for i, r := range over {
		pools[i] = fmt.Sprintf("%s: %d", rowName(r.Sku, r.Location, r.Pool), r.N)
	}
	decided, err := s.verdict(ctx, period, RuleLockWaits, len(over) > 0, map[string]any{"pools": pools, "threshold": s.cfg.LockWaits})
	if err != nil || !decided {
		return nil, err
	}
	var fired []Fired
	for _, r := range over {
		f, err := s.lockWaits(ctx, r)
		if err != nil {
			return fired, err
		}
		fired = append(fired, f)
	}
	return fired, nil
}

// lockWaits pauses a pool whose row answered busy too often in a period.
func (s *Service) lockWaits(ctx context.Context, w db.TripCountsSumRow) (Fired, error) {
	subject := "sku:" + rowName(w.Sku, w.Location, w.Pool)
	what := fmt.Sprintf("%s (pool %s)%s stayed locked by another transaction past the lock timeout: %d requests answered busy in %s (by %d instances), the limit is %d",
		w.Sku, w.Pool, at(w.Location), w.N, s.cfg.Interval, w.Instances, s.cfg.LockWaits)
	if err := s.pause(ctx, w.Sku, w.Location, w.Pool, RuleLockWaits, what); err != nil {
		return Fired{}, err
	}
	_, err := s.alerts.Raise(ctx, alerts.Raise{
		Level: alerts.Critical, Kind: "trip_" + RuleLockWaits, Subject: subject, SKU: w.Sku, Location: w.Location, Pool: w.Pool,
		Details: map[string]any{"rule": RuleLockWaits, "lock_waits": w.N, "instances": w.Instances, "threshold": s.cfg.LockWaits, "period_seconds": s.cfg.Interval.Seconds()},
		Action: fmt.Sprintf("Rule %s fired: %s, so the pool was paused (no new holds; confirms and releases go on). "+
			"Find the transaction holding the row (pg_stat_activity, the stock_locks view), end it, then resume the pool with a reason.",
			RuleLockWaits, what),
	})
	if err != nil {
		return Fired{}, err
	}
	s.log.WarnContext(ctx, "protection rule fired", "rule", RuleLockWaits, "sku", w.Sku, "location", w.Location, "pool", w.Pool, "lock_waits", w.N)
	return Fired{Rule: RuleLockWaits, Subject: subject, Detail: what}, nil
}

// rowName names a stock row in a subject or a list: sku/pool at the
// default location, as before locations, sku@location/pool elsewhere.
func rowName(sku, location, pool string) string {
	if location == "" || location == stock.DefaultLocation {
		return sku + "/" + pool
	}
	return sku + "@" + location + "/" + pool
}

// at is " at location" in a message, nothing at the default location.
func at(location string) string {
	if location == "" || location == stock.DefaultLocation {
		return ""
	}
	return " at " + location
}

// pause pauses a pool at a location that is on sale, recording the rule
// in its reason.
func (s *Service) pause(ctx context.Context, sku, location, pool, rule, what string) error {
	st, err := s.inv.GetStock(ctx, sku)
	if err != nil {
		return err
	}
	for _, p := range st.Pools {
		if p.Pool != pool || p.Location != location || p.Status != stock.StockOnSale {
			continue
		}
		if _, err := s.inv.Pause(ctx, stock.SwitchRequest{SKU: sku, Location: location, Pool: pool, Reason: "rule " + rule + ": " + what, Actor: Actor}); err != nil {
			return fmt.Errorf("pause %s: %w", rowName(sku, location, pool), err)
		}
	}
	return nil
}

// decideBacklog: more than ExpiryBacklog held holds past their expiry.
func (s *Service) decideBacklog(ctx context.Context, period time.Time) ([]Fired, error) {
	q := db.New(s.pool)
	lim := int32(min(s.cfg.ExpiryBacklog+1, 1<<30))
	n, err := q.HoldsOverdueCount(ctx, lim)
	if err != nil {
		return nil, fmt.Errorf("count the expiry backlog: %w", err)
	}
	over := n > s.cfg.ExpiryBacklog
	details := map[string]any{"overdue_holds_at_least": n, "threshold": s.cfg.ExpiryBacklog}
	var (
		pools   []holdstats.PoolCount
		sampled int64
	)
	if over {
		rows, err := q.HoldsOverdueByPool(ctx, int32(max(lim, backlogSample)))
		if err != nil {
			return nil, fmt.Errorf("find the pools of the expiry backlog: %w", err)
		}
		for _, r := range rows {
			pools = append(pools, holdstats.PoolCount{SKU: r.Sku, Location: r.Location, Pool: r.Pool, N: r.Holds})
			sampled = r.Sampled
		}
		details["pools"] = poolList(pools)
	}
	what := fmt.Sprintf("more than %d held holds past their expiry", s.cfg.ExpiryBacklog)
	return s.sustained(ctx, period, RuleExpiryBacklog, over, what, details, named(pools, sampled), "overdue holds")
}

// decideConfirms: more than 1% of every instance's confirms in the period
// slower than ConfirmP99.
func (s *Service) decideConfirms(ctx context.Context, period time.Time) ([]Fired, error) {
	rows, err := db.New(s.pool).TripCountsSum(ctx, period, RuleConfirmP99, poolsKept+1)
	if err != nil {
		return nil, fmt.Errorf("sum the confirm latencies: %w", err)
	}
	var (
		slow, total int64
		pools       []holdstats.PoolCount
	)
	for _, r := range rows {
		if r.Sku == "" && r.Location == "" && r.Pool == "" {
			slow, total = r.N, r.Total
			continue
		}
		pools = append(pools, holdstats.PoolCount{SKU: r.Sku, Location: r.Location, Pool: r.Pool, N: r.N})
	}
	over := total > 0 && slow*100 > total
	details := map[string]any{"confirms": total, "slower_than_target": slow, "target_ms": s.cfg.ConfirmP99.Milliseconds()}
	if over {
		details["pools"] = poolList(pools)
	}
	what := fmt.Sprintf("%d of %d confirms (more than 1%%: the p99) slower than the target %s", slow, total, s.cfg.ConfirmP99)
	return s.sustained(ctx, period, RuleConfirmP99, over, what, details, named(pools, slow), "slow confirms")
}

// named returns the pools a rule can act on: each behind at least
// namedShare of all (a count of holds or confirms), together at least
// namedTogether; none when the trouble is spread wider.
func named(pools []holdstats.PoolCount, all int64) []holdstats.PoolCount {
	if all <= 0 {
		return nil
	}
	var out []holdstats.PoolCount
	var together int64
	for _, p := range pools {
		if float64(p.N) >= namedShare*float64(all) {
			out = append(out, p)
			together += p.N
		}
	}
	if float64(together) < namedTogether*float64(all) {
		return nil
	}
	return out
}

func poolList(pools []holdstats.PoolCount) []string {
	out := make([]string, len(pools))
	for i, p := range pools {
		out[i] = fmt.Sprintf("%s: %d", rowName(p.SKU, p.Location, p.Pool), p.N)
	}
	return out
}

// sustained records rule's verdict on the period and fires it when it has
// been over target for Periods periods in a row (whichever instances
// decided them): a critical alert naming it and, when configured to act,
// a pause of the pools involved it can name, or stop-sale when it can
// name none.
func (s *Service) sustained(ctx context.Context, period time.Time, rule string, over bool, what string, details map[string]any,
	pools []holdstats.PoolCount, of string) ([]Fired, error) {
	decided, err := s.verdict(ctx, period, rule, over, details)
	if err != nil || !decided || !over {
		return nil, err
	}
	since := period.Add(-time.Duration(s.cfg.Periods-1) * s.period())
	n, err := db.New(s.pool).TripPeriodsOver(ctx, rule, since, period)
	if err != nil {
		return nil, fmt.Errorf("count the periods rule %s was over: %w", rule, err)
	}
	if n < int64(s.cfg.Periods) {
		return nil, nil
	}
	what = fmt.Sprintf("%s for %d periods of %s in a row", what, s.cfg.Periods, s.period())
	details["rule"], details["periods"], details["period_seconds"] = rule, s.cfg.Periods, s.period().Seconds()
	switch {
	case s.cfg.StopSale && len(pools) > 0:
		var fired []Fired
		for _, p := range pools {
			subject := "sku:" + rowName(p.SKU, p.Location, p.Pool)
			whatHere := fmt.Sprintf("%s; %s (pool %s)%s is behind %d of the %s", what, p.SKU, p.Pool, at(p.Location), p.N, of)
			if err := s.pause(ctx, p.SKU, p.Location, p.Pool, rule, whatHere); err != nil {
				return fired, err
			}
			_, err := s.alerts.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "trip_" + rule, Subject: subject, SKU: p.SKU, Location: p.Location, Pool: p.Pool, Details: details,
				Action: fmt.Sprintf("Rule %s fired: %s, so the pool was paused (no new holds; confirms and releases go on; other pools sell). "+
					"Find the cause, then resume the pool with a reason.", rule, whatHere)})
			if err != nil {
				return fired, err
			}
			s.log.WarnContext(ctx, "protection rule fired", "rule", rule, "sku", p.SKU, "location", p.Location, "pool", p.Pool, "detail", whatHere)
			fired = append(fired, Fired{Rule: rule, Subject: subject, Detail: whatHere})
		}
		return fired, nil
	case s.cfg.StopSale:
		what += fmt.Sprintf(", spread over more pools than it can name (fewer than half of the %s behind pools with a tenth each)", of)
		st, err := s.inv.StopSale(ctx)
		if err != nil {
			return nil, err
		}
		if !st.Active {
			if _, err := s.inv.SetStopSale(ctx, stock.StopSaleChange{Active: true, Reason: "rule " + rule + ": " + what, Actor: Actor, Rule: rule}); err != nil {
				return nil, err
			}
		}
	}
	action := fmt.Sprintf("Rule %s fired: %s.", rule, what)
	switch {
	case s.cfg.StopSale:
		action += " Sales are stopped (stop-sale): no new holds; confirms and releases go on. Find the cause, then turn stop-sale off with a reason (PUT /v1/stop-sale)."
	case len(pools) > 0:
		action += fmt.Sprintf(" Nothing was switched (STOCKHOLD_TRIP_STOP_SALE is off). The pools involved: %s; pause them (POST /v1/skus/{sku}/pause) "+
			"or stop sales (PUT /v1/stop-sale) if it hurts customers.", strings.Join(poolList(pools), ", "))
	default:
		action += " Nothing was switched (STOCKHOLD_TRIP_STOP_SALE is off): find the cause; stop sales yourself if it hurts customers (PUT /v1/stop-sale)."
	}
	_, err = s.alerts.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "trip_" + rule, Subject: "service", Details: details, Action: action})
	if err != nil {
		return nil, err
	}
	s.log.WarnContext(ctx, "protection rule fired", "rule", rule, "detail", what)
	return []Fired{{Rule: rule, Subject: "service", Detail: what}}, nil
}
