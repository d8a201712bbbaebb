package inventory

import (
	"strings"
	"sync"
)

// lockWaits counts, per stock row, the times this process found the row
// locked by another transaction past the lock timeout (a batch that timed
// out on it, or one that looked before waiting and found it still locked):
// the requests that needed it answered busy. The protection switch's
// lock-wait rule reads and resets the counts every period (TakeLockWaits).
type lockWaits struct {
	mu sync.Mutex
	n  map[string]int64
}

func (w *lockWaits) saw(locked map[string]Line) {
	if len(locked) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int64{}
	}
	for k := range locked {
		w.n[k]++
	}
}

// PoolCount is a count about one (sku, pool).
type PoolCount struct {
	SKU, Pool string
	N         int64
}

// TakeLockWaits returns how many times each stock row was found locked by
// another transaction past the lock timeout since the last call, and
// starts counting afresh.
func (s *Service) TakeLockWaits() []PoolCount {
	w := &s.lockWaits
	w.mu.Lock()
	n := w.n
	w.n = nil
	w.mu.Unlock()
	out := make([]PoolCount, 0, len(n))
	for k, c := range n {
		sku, pool, _ := strings.Cut(k, "\x00")
		out = append(out, PoolCount{SKU: sku, Pool: pool, N: c})
	}
	return out
}
