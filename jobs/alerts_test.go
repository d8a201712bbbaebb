package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
)

type alwaysFailArgs struct{}

func (alwaysFailArgs) Kind() string { return "always_fail" }

type alwaysFailWorker struct {
	river.WorkerDefaults[alwaysFailArgs]
	attempts *atomic.Int32
}

func (w *alwaysFailWorker) Work(ctx context.Context, job *river.Job[alwaysFailArgs]) error {
	w.attempts.Add(1)
	return errors.New("the warehouse system is down")
}

// webhook is a test HTTP server that records the alerts posted to it.
type webhook struct {
	mu     sync.Mutex
	bodies []alerts.Webhook
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var got alerts.Webhook
	if json.Unmarshal(body, &got) == nil {
		h.mu.Lock()
		h.bodies = append(h.bodies, got)
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *webhook) received() []alerts.Webhook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]alerts.Webhook(nil), h.bodies...)
}

func TestFailingJobRaisesOneCriticalAlert(t *testing.T) {
	t.Parallel()
	hook := &webhook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	var attempts atomic.Int32
	b := setup(t, &setupOpts{
		webhook: srv.URL,
		workers: func(w *river.Workers) { river.AddWorker(w, &alwaysFailWorker{attempts: &attempts}) },
	})
	ctx := context.Background()
	res, err := b.client.Insert(ctx, alwaysFailArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, 3, res.Job.MaxAttempts, "every job kind has three attempts")

	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NotEmpty(c, hook.received()) }, 30*time.Second, 100*time.Millisecond)
	require.EqualValues(t, 3, attempts.Load(), "exactly three attempts")
	var state string
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT state FROM river_job WHERE id = $1", res.Job.ID).Scan(&state))
	require.Equal(t, "discarded", state)

	got := hook.received()[0]
	require.Equal(t, "stockhold", got.Service)
	require.Equal(t, "critical", got.Alert.Level)
	require.Equal(t, "job_discarded", got.Alert.Kind)
	require.Equal(t, "job:always_fail", got.Alert.Subject)
	require.Contains(t, string(got.Alert.Details), "the warehouse system is down")

	// More watches run after the one that raised the alert; they must not
	// alert again.
	const watches = `SELECT count(*) FROM river_job WHERE kind = 'watch_discarded' AND state = 'completed'`
	after := b.count(t, watches)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, b.count(c, watches), after+3)
	}, 30*time.Second, 50*time.Millisecond)
	open, err := b.alerts.List(ctx, alerts.StatusOpen, 100)
	require.NoError(t, err)
	require.Len(t, open, 1)
	require.EqualValues(t, 1, open[0].Occurrences)
	require.NotNil(t, open[0].DeliveredAt)
	require.Len(t, hook.received(), 1)
}
