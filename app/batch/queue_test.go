package batch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakerequest is a request on one key, for the batcher's own tests.
type fakeRequest struct {
	key  string
	done chan error
}

func newFake(key string) *fakeRequest { return &fakeRequest{key: key, done: make(chan error, 1)} }

func (r *fakeRequest) Keys() []string { return []string{r.key} }
func (r *fakeRequest) Gone() bool     { return false }
func (r *fakeRequest) Answer(err error) {
	select {
	case r.done <- err:
	default:
	}
}

// recorder runs batches: it reports each batch's keys on started and holds
// a batch whose first key is "stuck" until release is closed.
type recorder struct {
	started chan []string
	release chan struct{}
}

func newRecorder() *recorder {
	return &recorder{started: make(chan []string, 100), release: make(chan struct{})}
}

func (rec *recorder) run(_ context.Context, batch []*fakeRequest) []*fakeRequest {
	keys := make([]string, len(batch))
	for i, r := range batch {
		keys[i] = r.key
	}
	rec.started <- keys
	if keys[0] == "stuck" {
		<-rec.release
	}
	for _, r := range batch {
		r.Answer(nil)
	}
	return nil
}

func wait(t *testing.T, r *fakeRequest) {
	t.Helper()
	select {
	case err := <-r.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Request %s was never answered", r.key)
	}
}

// TestBatcherLonerequest: with no flight out, a request goes at once, on
// its caller's goroutine, alone.
func TestBatcherLoneRequest(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	b := NewQueue("test", 128, 2, time.Minute, rec.run, nil)
	r := newFake("a")
	b.Submit(r) // flies the batch itself: answered when submit returns
	wait(t, r)
	require.Equal(t, []string{"a"}, <-rec.started)
}

// TestBatcherStuckFlight: a request that finds a flight out does not wait
// for it to land when it takes longer than patience (a row locked by
// someone else, a slow commit): another flight takes it.
func TestBatcherStuckFlight(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	b := NewQueue("test", 128, 2, time.Minute, rec.run, nil)
	stuck := newFake("stuck")
	go b.Submit(stuck)
	require.Equal(t, []string{"stuck"}, <-rec.started)

	other := newFake("other")
	go b.Submit(other)
	wait(t, other) // while the first flight is still out
	require.Equal(t, []string{"other"}, <-rec.started)
	close(rec.release)
	wait(t, stuck)
}

// TestBatcherCompany: requests that find a flight out wait for it (they go
// together with the next batch) until company requests are waiting, which
// launch another flight at once; with a flight free and none out, any
// request goes.
func TestBatcherCompany(t *testing.T) {
	t.Parallel()
	b := NewQueue("test", 128, 2, time.Minute, newRecorder().run, nil)
	require.Equal(t, 16, b.company)
	b.mu.Lock()
	defer b.mu.Unlock()

	b.pending = []*fakeRequest{newFake("x")}
	require.True(t, b.mayLaunchLocked(), "no flight out: go at once")

	b.flying, b.launched, b.took = 1, time.Now().Add(time.Hour), maxPatience
	for len(b.pending) < b.company {
		require.False(t, b.mayLaunchLocked(), "%d waiting: wait for the flight out", len(b.pending))
		b.pending = append(b.pending, newFake("x"))
	}
	require.True(t, b.mayLaunchLocked(), "company is waiting: another flight goes")
	require.NotNil(t, b.waking, "the requests left waiting were given a deadline")
	b.waking.Stop()

	b.pending = b.pending[:1]
	b.launched = time.Now().Add(-maxPatience)
	require.True(t, b.mayLaunchLocked(), "patience ran out: another flight goes")

	b.flying = 2
	b.pending = append(b.pending, make([]*fakeRequest, 100)...)
	require.False(t, b.mayLaunchLocked(), "every flight is out")

	require.Equal(t, 1, companyOf(1), "without coalescing every Request goes as soon as a flight is free")
}
