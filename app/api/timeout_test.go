package api

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type valueKey struct{}

// isClosed reports whether done is closed, without waiting.
func isClosed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// TestLazyDeadlineReadsAsWithDeadline: a lazyDeadline answers as
// context.WithDeadline does, before and after its deadline, its parent's
// cancellation and its stop, whether or not anything waited on it; a
// context derived from it is cancelled with it; and it makes nothing until
// something waits.
func TestLazyDeadlineReadsAsWithDeadline(t *testing.T) {
	t.Parallel()
	base := context.WithValue(context.Background(), valueKey{}, "v")
	soon := func() time.Time { return time.Now().Add(30 * time.Millisecond) }

	t.Run("unused", func(t *testing.T) {
		t.Parallel()
		far := time.Now().Add(time.Hour)
		lazy := newLazyDeadline(base, far)
		ref, cancel := context.WithDeadline(base, far)
		defer cancel()
		require.Equal(t, "v", lazy.Value(valueKey{}))
		require.Nil(t, lazy.Value("other"))
		require.NoError(t, lazy.Err())
		d, ok := lazy.Deadline()
		rd, rok := ref.Deadline()
		require.Equal(t, rd, d)
		require.Equal(t, rok, ok)
		require.Equal(t, stateLazy, lazy.state.Load(), "nothing waited: nothing made")
		require.False(t, isClosed(lazy.Done()))
		require.Equal(t, stateMade, lazy.state.Load())
		require.NoError(t, lazy.Err())
		require.Equal(t, "v", lazy.Value(valueKey{}))
	})

	t.Run("a parent's earlier deadline", func(t *testing.T) {
		t.Parallel()
		early := time.Now().Add(time.Minute)
		parent, cancel := context.WithDeadline(base, early)
		defer cancel()
		for _, d := range []time.Time{early.Add(time.Minute), early.Add(-time.Second)} {
			ref, cancel := context.WithDeadline(parent, d)
			defer cancel()
			want, _ := ref.Deadline()
			got, ok := newLazyDeadline(parent, d).Deadline()
			require.True(t, ok)
			require.Equal(t, want, got)
		}
	})

	for _, waited := range []bool{false, true} {
		name := map[bool]string{false: "nothing waited", true: "waited"}[waited]
		t.Run("deadline passes, "+name, func(t *testing.T) {
			t.Parallel()
			d := soon()
			lazy := newLazyDeadline(base, d)
			ref, cancel := context.WithDeadline(base, d)
			defer cancel()
			var done <-chan struct{}
			if waited {
				done = lazy.Done()
			}
			<-ref.Done()
			if waited {
				<-done
			}
			require.ErrorIs(t, lazy.Err(), context.DeadlineExceeded)
			require.True(t, isClosed(lazy.Done()))
			require.Equal(t, ref.Err(), lazy.Err())
			lazy.stop()
			require.ErrorIs(t, lazy.Err(), context.DeadlineExceeded, "stopped after its deadline, as WithDeadline's cancel leaves it")
		})

		t.Run("parent cancelled, "+name, func(t *testing.T) {
			t.Parallel()
			parent, cancelParent := context.WithCancel(base)
			lazy := newLazyDeadline(parent, time.Now().Add(time.Hour))
			var done <-chan struct{}
			if waited {
				done = lazy.Done()
				require.False(t, isClosed(done))
			}
			cancelParent()
			if waited {
				<-done
			}
			require.ErrorIs(t, lazy.Err(), context.Canceled)
			require.True(t, isClosed(lazy.Done()))
			lazy.stop()
			require.ErrorIs(t, lazy.Err(), context.Canceled)
		})

		t.Run("stopped, "+name, func(t *testing.T) {
			t.Parallel()
			lazy := newLazyDeadline(base, time.Now().Add(time.Hour))
			var done <-chan struct{}
			if waited {
				done = lazy.Done()
			}
			lazy.stop()
			if waited {
				require.True(t, isClosed(done))
			}
			require.ErrorIs(t, lazy.Err(), context.Canceled)
			require.True(t, isClosed(lazy.Done()))
			require.Equal(t, "v", lazy.Value(valueKey{}))
			lazy.stop()
			require.ErrorIs(t, lazy.Err(), context.Canceled)
		})
	}

	t.Run("derived contexts", func(t *testing.T) {
		t.Parallel()
		// Stopped, past the deadline, the parent cancelled: each reaches a
		// context derived from it, and an AfterFunc.
		for _, end := range []func(lazy *lazyDeadline, cancelParent context.CancelFunc){
			func(lazy *lazyDeadline, _ context.CancelFunc) { lazy.stop() },
			func(*lazyDeadline, context.CancelFunc) {},
			func(_ *lazyDeadline, cancelParent context.CancelFunc) { cancelParent() },
		} {
			parent, cancelParent := context.WithCancel(base)
			lazy := newLazyDeadline(parent, soon())
			child, cancelChild := context.WithCancel(context.WithValue(lazy, valueKey{}, "w"))
			ran := make(chan struct{})
			context.AfterFunc(lazy, func() { close(ran) })
			end(lazy, cancelParent)
			<-child.Done()
			<-ran
			require.Equal(t, lazy.Err(), child.Err())
			require.Equal(t, lazy.Err(), context.Cause(child))
			cancelChild()
			cancelParent()
			lazy.stop()
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		for range 50 {
			lazy := newLazyDeadline(base, time.Now().Add(time.Hour))
			var wg sync.WaitGroup
			dones := make(chan (<-chan struct{}), 8)
			for i := range 8 {
				wg.Go(func() {
					if i%2 == 0 {
						dones <- lazy.Done()
					}
					_ = lazy.Err()
					_ = lazy.Value(valueKey{})
				})
			}
			wg.Go(lazy.stop)
			wg.Wait()
			close(dones)
			for done := range dones {
				<-done
			}
			require.ErrorIs(t, lazy.Err(), context.Canceled)
		}
	})
}
