package holdstats

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stockhold/stockhold/app/domain"
)

// Counts counts a process's hold requests by outcome since it started:
// the part of Stats that only the process knows (a refused hold leaves no
// row).
type Counts struct {
	since time.Time
	mu    sync.Mutex
	n     map[string]int64
}

// NewCounts starts counting now.
func NewCounts() *Counts { return &Counts{since: time.Now().UTC(), n: map[string]int64{}} }

// Add counts one request with outcome.
func (c *Counts) Add(outcome string) {
	c.mu.Lock()
	c.n[outcome]++
	c.mu.Unlock()
}

// Requests returns the counts so far.
func (c *Counts) Requests() HoldRequests {
	c.mu.Lock()
	n := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		n[k] = v
	}
	c.mu.Unlock()
	return NewHoldRequests(n, c.since)
}

// latencySamples bounds the confirm latencies kept per period: past it a
// new one replaces a random one (a reservoir), so the share of slow
// confirms stays a fair estimate at any rate at a fixed cost.
const latencySamples = 4096

// PoolKey names one stock row.
type PoolKey struct{ SKU, Location, Pool string }

// ConfirmTime is how long one confirm took, and the pools of the hold it
// confirmed (none when it was refused).
type ConfirmTime struct {
	Took  time.Duration
	Pools []PoolKey
}

// ConfirmTimes collects how long a process's confirms took, for the
// protection switch's confirm-latency rule. The zero value is ready.
type ConfirmTimes struct {
	mu   sync.Mutex
	seen int
	d    []ConfirmTime
}

// Add records one confirm.
func (l *ConfirmTimes) Add(c ConfirmTime) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if len(l.d) < latencySamples {
		l.d = append(l.d, c)
		return
	}
	if i := rand.IntN(l.seen); i < latencySamples {
		l.d[i] = c
	}
}

// Take returns how many confirms were recorded since the last call and a
// fair sample of them (all of them, up to 4,096), and starts afresh.
func (l *ConfirmTimes) Take() (seen int, sample []ConfirmTime) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen, sample = l.seen, l.d
	l.d, l.seen = nil, 0
	return seen, sample
}

// LockWaits counts, per stock row, the requests a process answered busy
// because another transaction kept that row locked past the lock timeout
// (holds, confirms and releases): one per busy answer, however many times
// the request's batches timed out on the row or looked at it first (the
// first hold on a newly locked row does both). The expiry loop, which
// answers nobody, skips such a row without counting it. The protection
// switch's lock-wait rule takes the counts every period. The zero value is
// ready.
type LockWaits struct {
	mu sync.Mutex
	n  map[PoolKey]int64
}

// Answered counts err, a request's answer, when it is busy on one stock
// row, and returns it.
func (w *LockWaits) Answered(err error) error {
	var e *domain.Error
	if !errors.As(err, &e) || e.Code != domain.CodeBusy || e.SKU == "" || e.Location == "" {
		return err // not about one stock row (a line's pool at no location found locked)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[PoolKey]int64{}
	}
	w.n[PoolKey{SKU: e.SKU, Location: e.Location, Pool: e.Pool}]++
	return err
}

// PoolCount is a count about one stock row (sku, location, pool).
type PoolCount struct {
	SKU, Location, Pool string
	N                   int64
}

// Take returns how many requests each stock row made answer busy since
// the last call, and starts counting afresh.
func (w *LockWaits) Take() []PoolCount {
	w.mu.Lock()
	n := w.n
	w.n = nil
	w.mu.Unlock()
	out := make([]PoolCount, 0, len(n))
	for k, c := range n {
		out = append(out, PoolCount{SKU: k.SKU, Location: k.Location, Pool: k.Pool, N: c})
	}
	return out
}
