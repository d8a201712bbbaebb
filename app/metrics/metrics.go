// Package metrics declares stockhold's Prometheus metrics in one place; the
// HTTP layer, the hold combiner and the workers update them, and /metrics
// serves them.
package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	dto "github.com/prometheus/client_model/go"
)

// Started is when this process's counters started counting from zero.
// Counters are per process: they restart with it and each instance of the
// service has its own.
var Started = time.Now().UTC()

var (
	// Holds counts hold requests by outcome: held, replayed, or the problem
	// code that refused them. A refused hold leaves no other trace.
	Holds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_holds_total",
		Help: "Hold requests by outcome (held, replayed, or the refusing problem code).",
	}, []string{"outcome"})

	// Transitions counts confirms and releases by outcome.
	Transitions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_transitions_total",
		Help: "Confirm and release requests by action and outcome.",
	}, []string{"action", "outcome"})

	// HoldBatch observes how many holds one coalesced transaction carried.
	HoldBatch = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "stockhold_hold_batch_size",
		Help:    "Holds per coalesced hold transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})

	// HTTPDuration observes request latency by route and status.
	HTTPDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stockhold_http_request_duration_seconds",
		Help:    "HTTP request latency by method, route and status.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route", "status"})
)

// HoldOutcomes reads Holds: this process's hold requests since Started, by
// outcome. It reads the counter itself rather than keeping a second count,
// so it always agrees with /metrics.
func HoldOutcomes() (map[string]int64, error) {
	ch := make(chan prometheus.Metric)
	go func() {
		Holds.Collect(ch)
		close(ch)
	}()
	out := map[string]int64{}
	var err error
	for m := range ch {
		var d dto.Metric
		if werr := m.Write(&d); werr != nil {
			err = fmt.Errorf("read %s: %w", m.Desc(), werr)
			continue // drain the channel so the collector can finish
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "outcome" {
				out[l.GetValue()] = int64(d.GetCounter().GetValue())
			}
		}
	}
	return out, err
}
