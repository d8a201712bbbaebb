package holdstats

import (
	"errors"
	"time"

	"github.com/stockhold/stockhold/app/domain"
)

// Recorder is told what the service does, for metrics: the wiring gives
// one that feeds Prometheus (app/metrics), tests may give their own, and
// nil records nothing. The service never reads a Recorder back: what it
// reports about itself (Stats) it counts itself (Counts).
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

// NopRecorder records nothing.
type NopRecorder struct{}

func (NopRecorder) HoldAnswered(string)                  {}
func (NopRecorder) HoldBatch(int)                        {}
func (NopRecorder) HoldAsked(string)                     {}
func (NopRecorder) BatchTook(string, time.Duration)      {}
func (NopRecorder) Released(string, string, string, int) {}
func (NopRecorder) SoldOutInMemory()                     {}

// Outcome names a hold's outcome as HoldAnswered is told it: held,
// replayed, or the refusal's code; any other error is internal_error.
func Outcome(replayed bool, err error) string {
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
