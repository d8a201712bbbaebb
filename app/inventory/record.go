package inventory

import (
	"errors"
	"sync"
	"time"

	"github.com/stockhold/stockhold/app/domain"
)

// Recorder is told what the service does, for metrics: the wiring gives
// one that feeds Prometheus (app/metrics), tests may give their own, and
// nil records nothing. The service never reads a Recorder back: what it
// reports about itself (Stats) it counts itself (HoldCounts).
type Recorder interface {
	// HoldAnswered is told the outcome of every hold request: held,
	// replayed, or the refusal's code.
	HoldAnswered(outcome string)
	// HoldBatch is told how many holds one batch transaction carried.
	HoldBatch(size int)
	// HoldAsked is told, for each SKU a valid hold request names, once.
	HoldAsked(sku string)
	// BatchTook is told how long one group-commit transaction took from
	// its begin to its commit or failure, by kind: BatchHold or
	// BatchChange.
	BatchTook(kind string, d time.Duration)
	// Released is told about n holds handed back by one release, as
	// Release describes it.
	Released(status, kind, actor string, n int)
	// SoldOutInMemory is told about each hold refused out_of_stock from
	// memory, without a hold batch (soldout.go).
	SoldOutInMemory()
}

// The kinds of group-commit transactions BatchTook is told about.
const (
	BatchHold   = "hold"
	BatchChange = "change"
)

type nopRecorder struct{}

func (nopRecorder) HoldAnswered(string)                  {}
func (nopRecorder) HoldBatch(int)                        {}
func (nopRecorder) HoldAsked(string)                     {}
func (nopRecorder) BatchTook(string, time.Duration)      {}
func (nopRecorder) Released(string, string, string, int) {}
func (nopRecorder) SoldOutInMemory()                     {}

// HoldCounts counts this process's hold requests by outcome since it
// started: the part of Stats that only the process knows (a refused hold
// leaves no row).
type HoldCounts struct {
	since time.Time
	mu    sync.Mutex
	n     map[string]int64
}

func newHoldCounts() *HoldCounts { return &HoldCounts{since: time.Now().UTC(), n: map[string]int64{}} }

func (c *HoldCounts) add(outcome string) {
	c.mu.Lock()
	c.n[outcome]++
	c.mu.Unlock()
}

// read returns the counts so far, by outcome.
func (c *HoldCounts) read() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// holdAnswered records a hold request's outcome, in the service's own
// counts and with its Recorder.
func (s *Service) holdAnswered(outcome string) {
	s.counts.add(outcome)
	s.rec.HoldAnswered(outcome)
}

// holdOutcome names a hold's outcome as HoldAnswered is told it: held,
// replayed, or the refusal's code; any other error is internal_error.
func holdOutcome(replayed bool, err error) string {
	switch {
	case err == nil && replayed:
		return "replayed"
	case err == nil:
		return "held"
	}
	if de, ok := err.(*domain.Error); ok { // a refusal, without errors.As's reflection
		return string(de.Code)
	}
	var de *domain.Error
	if errors.As(err, &de) {
		return string(de.Code)
	}
	return "internal_error"
}

// CountUnreadableHold records a hold request refused before it reached
// the service (a body that is not a hold request at all), so that the
// counts cover every request.
func (s *Service) CountUnreadableHold() { s.holdAnswered("invalid_request") }

// timeBatch tells the Recorder how long a group-commit transaction begun
// at start took; a batch defers it once its connection is acquired.
func (s *Service) timeBatch(kind string, start time.Time) { s.rec.BatchTook(kind, time.Since(start)) }
