package inventory

import (
	"context"
	"time"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
)

// SetBeforeGrant makes every hold batch call f with each hold it is about
// to decide; tests make it panic.
func SetBeforeGrant(s *Service, f func(HoldRequest)) { s.beforeGrant = f }

// PendingHolds is how many holds wait for a batch.
func PendingHolds(s *Service) int { return s.holds.Pending() }

// PendingChanges is how many confirms and releases wait for a batch.
func PendingChanges(s *Service) int { return s.changes.Pending() }

// NopRecorder records nothing; tests embed it to count one thing.
func NopRecorder() holdstats.Recorder { return holdstats.NopRecorder{} }

// HotRow reports whether the expiry loop would now take the stock row
// (sku, location, pool) for one this process's hold batches keep busy.
func HotRow(s *Service, sku, location, pool string) bool {
	_, ok := s.hot.now(time.Now())[rowKey(sku, location, pool)]
	return ok
}

// Refusal is the answer a hold batch gives a hold of one unit of sku at
// location, in pool, that it refused for why, as it explains it after
// its commit (against the rows as they are then).
func Refusal(s *Service, sku, location, pool string, why domain.Code) error {
	w := want{SKU: sku, Location: location, Pool: pool, Quantity: 1}
	return s.refusal(context.Background(), hold{wants: []want{w}}, verdict{line: w, why: why})
}
