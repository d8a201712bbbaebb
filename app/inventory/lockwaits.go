package inventory

import (
	"errors"
	"strings"
	"sync"

	"github.com/stockhold/stockhold/app/domain"
)

// lockWaits counts, per stock row, the requests this process answered busy
// because another transaction kept that row locked past the lock timeout
// (holds, confirms and releases): one per busy answer, however many times
// the request's batches timed out on the row or looked at it first (the
// first hold on a newly locked row does both). The expiry loop, which
// answers nobody, skips such a row without counting it. The protection
// switch's lock-wait rule reads and resets the counts every period
// (TakeLockWaits).
type lockWaits struct {
	mu sync.Mutex
	n  map[string]int64
}

// answered counts err, a request's answer, when it is busy on a stock row
// (errBusy), and returns it.
func (w *lockWaits) answered(err error) error {
	var e *domain.Error
	if !errors.As(err, &e) || e.Code != domain.CodeBusy || e.SKU == "" || e.Location == "" {
		return err // not about one stock row (a line's pool at no location found locked)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int64{}
	}
	w.n[rowKey(e.SKU, e.Location, e.Pool)]++
	return err
}

// PoolCount is a count about one stock row (sku, location, pool).
type PoolCount struct {
	SKU, Location, Pool string
	N                   int64
}

// TakeLockWaits returns how many requests each stock row made answer busy,
// locked by another transaction past the lock timeout, since the last
// call, and starts counting afresh.
func (s *Service) TakeLockWaits() []PoolCount {
	w := &s.lockWaits
	w.mu.Lock()
	n := w.n
	w.n = nil
	w.mu.Unlock()
	out := make([]PoolCount, 0, len(n))
	for k, c := range n {
		parts := strings.SplitN(k, "\x00", 3)
		out = append(out, PoolCount{SKU: parts[0], Location: parts[1], Pool: parts[2], N: c})
	}
	return out
}
