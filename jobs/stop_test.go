package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/jobs"
)

// slowArgs is a test job that finishes when its release channel closes, or
// gives up when its context is cancelled.
type slowArgs struct {
	Name string `json:"name"`
}

func (slowArgs) Kind() string { return "test_slow" }

type slowWorker struct {
	river.WorkerDefaults[slowArgs]
	started chan string
	release map[string]chan struct{}
}

func (w *slowWorker) Work(ctx context.Context, job *river.Job[slowArgs]) error {
	w.started <- job.Args.Name
	select {
	case <-w.release[job.Args.Name]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestStopLetsRunningJobsFinish stops River as SIGTERM does while two jobs
// run: the one that finishes within the soft-stop window completes (no
// attempt lost); the one that does not is cancelled when the window ends,
// and Stop still returns; River puts it back as available without counting
// the interrupted attempt.
func TestStopLetsRunningJobsFinish(t *testing.T) {
	t.Parallel()
	w := &slowWorker{started: make(chan string, 2), release: map[string]chan struct{}{
		"quick": make(chan struct{}), "stuck": make(chan struct{}),
	}}
	b := setup(t, &setupOpts{workers: func(ws *river.Workers) { river.AddWorker(ws, w) }})
	ctx := context.Background()
	quick, err := b.inserter.Insert(ctx, slowArgs{Name: "quick"}, nil)
	require.NoError(t, err)
	stuck, err := b.inserter.Insert(ctx, slowArgs{Name: "stuck"}, nil)
	require.NoError(t, err)
	for range 2 {
		<-w.started
	}

	stopped := make(chan error, 1)
	go func() { stopped <- jobs.Stop(ctx, b.client, 2*time.Second, quiet) }()
	// The quick job finishes inside the window; the stuck one never would.
	close(w.release["quick"])
	require.NoError(t, <-stopped)

	row, err := b.client.JobGet(ctx, quick.Job.ID)
	require.NoError(t, err)
	require.Equal(t, rivertype.JobStateCompleted, row.State, "the job that finished in the window completed")
	require.Empty(t, row.Errors)
	row, err = b.client.JobGet(ctx, stuck.Job.ID)
	require.NoError(t, err)
	require.Equal(t, rivertype.JobStateAvailable, row.State, "the job still running when the window ended was interrupted, to run again")
	require.Zero(t, row.Attempt, "the interrupted attempt does not count")
	require.Empty(t, row.Errors)
}
