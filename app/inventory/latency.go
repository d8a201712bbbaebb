package inventory

import (
	"math/rand/v2"
	"sync"
	"time"
)

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

// latencies collects how long this process's confirms took, for the
// protection switch's confirm-latency rule (TakeConfirmTimes).
type latencies struct {
	mu   sync.Mutex
	seen int
	d    []ConfirmTime
}

func (l *latencies) add(took time.Duration, lines []Line) {
	c := ConfirmTime{Took: took}
	for _, ln := range lines {
		c.Pools = append(c.Pools, PoolKey{SKU: ln.SKU, Location: ln.Location, Pool: ln.Pool})
	}
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

// TakeConfirmTimes returns how many confirms this process answered since
// the last call and a fair sample of them (all of them, up to 4,096), and
// starts counting afresh.
func (s *Service) TakeConfirmTimes() (seen int, sample []ConfirmTime) {
	l := &s.confirmTimes
	l.mu.Lock()
	defer l.mu.Unlock()
	seen, sample = l.seen, l.d
	l.d, l.seen = nil, 0
	return seen, sample
}
