// Package metrics declares stockhold's Prometheus metrics in one place; the
// HTTP layer, the hold combiner and the workers update them, and /metrics
// serves them.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

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
