package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

var (
	// JobsFinished counts the job attempts this process's River client
	// finished, by kind and how: completed, retried (failed, another
	// attempt is scheduled), discarded (failed its last attempt),
	// cancelled or snoozed.
	JobsFinished = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "stockhold_river_jobs_finished_total",
		Help: "Job attempts worked by this process, by kind and result (completed, retried, discarded, cancelled, snoozed).",
	}, []string{"kind", "state"})

	// JobRunDuration observes how long job attempts ran, by kind.
	JobRunDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stockhold_river_job_run_seconds",
		Help:    "Time job attempts spent in their worker, by kind.",
		Buckets: []float64{.001, .005, .025, .1, .5, 2.5, 10, 60, 300},
	}, []string{"kind"})
)

// JobEvents are the River events CountJobs needs: pass them to the worker
// client's Subscribe.
var JobEvents = []river.EventKind{
	river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled, river.EventKindJobSnoozed,
}

// CountJobs counts each finished job attempt from a River event
// subscription until events is closed or ctx is done. River sends an event
// once the attempt's outcome is stored, so the counts are of what happened,
// not of what a worker returned. Jobs River's rescuer gives up on are not
// worked by anyone and so not seen here (the watch_discarded job alerts on
// them).
func CountJobs(ctx context.Context, events <-chan *river.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			countJob(ev)
		}
	}
}

func countJob(ev *river.Event) {
	if ev.Job == nil {
		return
	}
	var state string
	switch ev.Kind {
	case river.EventKindJobCompleted:
		state = "completed"
	case river.EventKindJobFailed:
		state = "retried"
		if ev.Job.State == rivertype.JobStateDiscarded {
			state = "discarded"
		}
	case river.EventKindJobCancelled:
		state = "cancelled"
	case river.EventKindJobSnoozed:
		state = "snoozed"
	default:
		return
	}
	JobsFinished.WithLabelValues(ev.Job.Kind, state).Inc()
	if ev.JobStats != nil {
		JobRunDuration.WithLabelValues(ev.Job.Kind).Observe(ev.JobStats.RunDuration.Seconds())
	}
}
