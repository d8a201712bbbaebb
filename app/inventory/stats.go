package inventory

import (
	"context"
	"time"

	"github.com/stockhold/stockhold/app/holdstats"
)

// Stats reads how holds are faring over the window ending now, with this
// process's hold outcomes (holdstats.Read).
func (s *Service) Stats(ctx context.Context, window time.Duration) (holdstats.Stats, error) {
	return holdstats.Read(ctx, s.pool, window, s.counts.Requests())
}

// TakeConfirmTimes returns how many confirms this process answered since
// the last call and a fair sample of them, and starts counting afresh.
func (s *Service) TakeConfirmTimes() (seen int, sample []holdstats.ConfirmTime) {
	return s.confirmTimes.Take()
}

// TakeLockWaits returns how many requests each stock row made answer busy,
// locked by another transaction past the lock timeout, since the last
// call, and starts counting afresh.
func (s *Service) TakeLockWaits() []holdstats.PoolCount { return s.lockWaits.Take() }
