package jobs_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type flakyArgs struct {
	// Lost is how many runs lose the database before one succeeds.
	Lost int32 `json:"lost"`
}

func (flakyArgs) Kind() string { return "test_lost_database" }

type flakyWorker struct {
	river.WorkerDefaults[flakyArgs]
	runs *atomic.Int32
	err  error
}

func (w *flakyWorker) Work(ctx context.Context, job *river.Job[flakyArgs]) error {
	if w.runs.Add(1) <= job.Args.Lost {
		return fmt.Errorf("pick due holds: %w", w.err)
	}
	return nil
}

// TestJobThatLostTheDatabaseKeepsItsAttempts runs a job whose first four
// runs lose the database (the server shut down under them, as in a
// failover): more than its three attempts, yet it is not discarded (no
// job_discarded alert for work that never failed) and completes once the
// database answers, having used one attempt. A job that fails for a
// reason of its own still has three attempts.
func TestJobThatLostTheDatabaseKeepsItsAttempts(t *testing.T) {
	t.Parallel()
	var lostRuns, failRuns atomic.Int32
	lost := &flakyWorker{runs: &lostRuns, err: &pgconn.PgError{Severity: "FATAL", Code: "57P01",
		Message: "terminating connection due to administrator command"}}
	b := setup(t, &setupOpts{workers: func(w *river.Workers) {
		river.AddWorker(w, lost)
		river.AddWorker(w, &alwaysFailWorker{attempts: &failRuns})
	}})
	ctx := context.Background()
	res, err := b.client.Insert(ctx, flakyArgs{Lost: 4}, nil)
	require.NoError(t, err)
	failing, err := b.client.Insert(ctx, alwaysFailArgs{}, nil)
	require.NoError(t, err)

	state := func(c assert.TestingT, id int64) (string, int) {
		var s string
		var attempt int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE id = $1`, id).Scan(&s, &attempt))
		return s, attempt
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s, _ := state(c, res.Job.ID)
		assert.Equal(c, "completed", s)
	}, 30*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 5, lostRuns.Load())
	_, attempt := state(t, res.Job.ID)
	require.Equal(t, 1, attempt, "runs that lost the database are not attempts")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s, _ := state(c, failing.Job.ID)
		assert.Equal(c, "discarded", s)
	}, 30*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 3, failRuns.Load())
}
