package inventory

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// latencySamples bounds the confirm latencies kept per period: past it a
// new one replaces a random one (a reservoir), so the p99 stays a fair
// estimate at any rate at a fixed cost.
const latencySamples = 4096

// latencies collects how long this process's confirms took, for the
// protection switch's confirm-latency rule (TakeConfirmP99).
type latencies struct {
	mu   sync.Mutex
	seen int
	d    []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if len(l.d) < latencySamples {
		l.d = append(l.d, d)
		return
	}
	if i := rand.IntN(l.seen); i < latencySamples {
		l.d[i] = d
	}
}

// TakeConfirmP99 returns the 99th percentile of the confirms this process
// answered since the last call and how many there were, and starts
// counting afresh. With no confirms it returns 0, 0.
func (s *Service) TakeConfirmP99() (time.Duration, int) {
	l := &s.confirmTimes
	l.mu.Lock()
	d, seen := l.d, l.seen
	l.d, l.seen = nil, 0
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[(len(d)*99+99)/100-1], seen
}
