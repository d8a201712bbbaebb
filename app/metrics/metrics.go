// Package metrics declares stockhold's Prometheus metrics in one place; the
// HTTP layer, the hold combiner and the workers update them, and /metrics
// serves them.
package metrics

import (
	"errors"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

var (
	// Holds counts hold requests by outcome: held, replayed, or the problem
	// code that refused them. A refused hold leaves no other trace.
	Holds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_holds_total",
		Help: "Hold requests by outcome (held, replayed, or the refusing problem code).",
	}, []string{"outcome"})

	// Transitions counts confirm, release and extend requests (API and
	// console) by result: ok, or the problem code that refused them.
	Transitions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_transitions_total",
		Help: "Confirm, release and extend requests by action and outcome (ok, or the refusing problem code).",
	}, []string{"action", "outcome"})

	// Releases counts holds handed back, by their final status (released
	// or expired) and why; expirations are status="expired". See Released.
	Releases = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_releases_total",
		Help: "Holds handed back, by final status (released, expired) and reason (cancel, rollback, expiry, expiry_job, sweeper, late_confirm, late_extend, reconcile).",
	}, []string{"status", "reason"})

	// HoldBatch observes how many holds one coalesced transaction carried.
	HoldBatch = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "stockhold_hold_batch_size",
		Help:    "Holds per coalesced hold transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})

	// BatchSeconds observes how long each group-commit transaction took,
	// from its begin to its commit (or its failure), by kind: hold (a hold
	// batch) or change (a batch of confirms and releases). The stock rows
	// and holds a batch locks stay locked that long.
	BatchSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stockhold_batch_seconds",
		Help:    "Duration of each group-commit transaction from begin to commit, by kind (hold, change): how long its row locks were held.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"kind"})

	// WebhookDeliveries counts POSTs of event batches to webhook receivers
	// by outcome: ok (a 2xx answer) or failed.
	WebhookDeliveries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_webhook_deliveries_total",
		Help: "Event batches POSTed to webhook receivers, by outcome (ok: a 2xx answer; failed).",
	}, []string{"outcome"})

	// WebhookEvents counts events webhook receivers acknowledged.
	WebhookEvents = promauto.NewCounter(prometheus.CounterOpts{
		Name: "stockhold_webhook_events_total",
		Help: "Events delivered to webhook receivers and acknowledged with a 2xx answer.",
	})

	// HTTPDuration observes request latency by route and status.
	HTTPDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stockhold_http_request_duration_seconds",
		Help:    "HTTP request latency by method, route and status.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route", "status"})
)

// SoldOutInMemory counts holds refused out_of_stock from an instance's
// memory of pools with nothing left, without a hold batch (after a lookup
// of their key); they count in Holds too.
var SoldOutInMemory = promauto.NewCounter(prometheus.CounterOpts{
	Name: "stockhold_holds_refused_in_memory_total",
	Help: "Holds refused out_of_stock from memory, without a hold batch (also counted in stockhold_holds_total).",
})

// Recorder feeds what the services tell it (holdstats.Recorder,
// webhooks.Recorder) into the process's Prometheus metrics. Counters are
// per process: they restart with it and each instance has its own.
type Recorder struct{}

// HoldAnswered counts a hold request's outcome.
func (Recorder) HoldAnswered(outcome string) { Holds.WithLabelValues(outcome).Inc() }

// HoldBatch observes the size of one hold batch.
func (Recorder) HoldBatch(size int) { HoldBatch.Observe(float64(size)) }

// SoldOutInMemory implements holdstats.Recorder.
func (Recorder) SoldOutInMemory() { SoldOutInMemory.Inc() }

// HoldAsked counts a hold request naming sku in stockhold_sku_holds_total
// and in the last minute's hot SKUs (HotSKUs).
func (Recorder) HoldAsked(sku string) { hotSKUs.add(sku) }

// BatchTook observes one group-commit transaction's duration.
func (Recorder) BatchTook(kind string, d time.Duration) {
	BatchSeconds.WithLabelValues(kind).Observe(d.Seconds())
}

// Released counts n holds handed back by one release, described as
// inventory.Outcome describes it. It is told once the release is written.
func (Recorder) Released(status, kind, actor string, n int) {
	if n > 0 {
		Releases.WithLabelValues(status, releaseReason(kind, actor)).Add(float64(n))
	}
}

// WebhookDelivered counts one POST of events to a webhook: ok, or failed.
func (Recorder) WebhookDelivered(ok bool, events int) {
	if !ok {
		WebhookDeliveries.WithLabelValues("failed").Inc()
		return
	}
	WebhookDeliveries.WithLabelValues("ok").Inc()
	WebhookEvents.Add(float64(events))
}

// releaseReason names why holds were handed back, from the ledger kind and
// actor of the release: the system's actors are fixed names, a person's
// release is a cancel (kind release) or a rollback (kind rollback, which
// includes a campaign's end).
func releaseReason(kind, actor string) string {
	switch {
	case kind == string(stock.LedgerRelease):
		return "cancel"
	case kind == string(stock.LedgerRollback):
		return "rollback"
	case actor == "system:expire_holds":
		return "expiry"
	case actor == "system:sweep_expired":
		return "sweeper"
	case actor == "system:confirm":
		return "late_confirm"
	case actor == "system:extend":
		return "late_extend"
	case actor == "system:release":
		return "late_release"
	case actor == "system:rollback":
		return "late_rollback"
	case actor == "system:reconcile":
		return "reconcile"
	}
	return "other"
}

// Names returns the name of every stockhold_ metric the binary exports
// (a histogram by its base name), whether or not it has a value yet: the
// deploy/ rules and dashboard are checked against it.
func Names() []string {
	all := []prometheus.Collector{
		Holds, Transitions, Releases, HoldBatch, BatchSeconds, HTTPDuration, JobsFinished, JobRunDuration, StockStatements,
		Queries, DBRefreshErrors, collector{}, hotSKUs,
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range all {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// fqName finds a metric's name in its Desc's description.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// CountTransition counts one confirm, release or extend request (action)
// in Transitions by its result: ok, the code of the domain error that
// refused it, or error.
func CountTransition(action string, err error) {
	outcome := "error"
	var de *domain.Error
	switch {
	case err == nil:
		outcome = "ok"
	case errors.As(err, &de):
		outcome = string(de.Code)
	}
	Transitions.WithLabelValues(action, outcome).Inc()
}
