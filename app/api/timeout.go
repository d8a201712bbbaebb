package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// requestTimeout bounds a request to d, as echo's ContextTimeout did, and
// classifies a handler's error on the way out, while the request's context
// is still its own (it is cancelled on return): a client gone, the
// request's deadline, or the pool's and the database's.
//
// Its context is a lazyDeadline: context.WithTimeout on every request
// (a timer, and the request's context asked for a channel and a list of
// children) was 3.5% of the server's CPU on a hold refused from memory,
// which never waits on it.
func requestTimeout(d time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := newLazyDeadline(c.Request().Context(), time.Now().Add(d))
			defer ctx.stop()
			c.SetRequest(c.Request().WithContext(ctx))
			if err := next(c); err != nil {
				return problemOf(c.Request().Context(), err)
			}
			return nil
		}
	}
}

// lazyDeadline is context.WithDeadline(parent, deadline), cancelled by
// stop, that makes that context only when something asks for Done (a
// query, a derived context, context.AfterFunc): until then Err and
// Deadline answer from the parent and the clock, and Value from the
// parent, as that context would. One difference remains: context.Cause
// of a lazyDeadline past its deadline or stopped, on which nothing waited,
// is its parent's cause rather than the error Err reports (nothing here
// asks for it).
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time
	mu       sync.Mutex
	// state is lazy, made (ctx and cancel are WithDeadline's) or stopped
	// before anything waited (err is its error); the fields are set, under
	// mu, before state changes, and read after it has.
	state  atomic.Uint32
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

const (
	stateLazy uint32 = iota
	stateMade
	stateStopped
)

func newLazyDeadline(parent context.Context, deadline time.Time) *lazyDeadline {
	return &lazyDeadline{parent: parent, deadline: deadline}
}

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done makes the context, unless stop came first.
func (c *lazyDeadline) Done() <-chan struct{} {
	switch c.state.Load() {
	case stateMade:
		return c.ctx.Done()
	case stateStopped:
		return closedDone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state.Load() {
	case stateMade:
		return c.ctx.Done()
	case stateStopped:
		return closedDone
	}
	c.ctx, c.cancel = context.WithDeadline(c.parent, c.deadline)
	c.state.Store(stateMade)
	return c.ctx.Done()
}

func (c *lazyDeadline) Err() error {
	switch c.state.Load() {
	case stateMade:
		return c.ctx.Err()
	case stateStopped:
		return c.err
	}
	return c.errNow()
}

// errNow is what context.WithDeadline's Err says now: the parent's error,
// else DeadlineExceeded once the deadline has passed.
func (c *lazyDeadline) errNow() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *lazyDeadline) Value(key any) any {
	if c.state.Load() == stateMade {
		return c.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// stop cancels the context, as WithDeadline's cancel function does: its
// error is from then on what it was, or Canceled.
func (c *lazyDeadline) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state.Load() {
	case stateMade:
		c.cancel()
	case stateLazy:
		c.err = c.errNow()
		if c.err == nil {
			c.err = context.Canceled
		}
		c.state.Store(stateStopped)
	}
}

// closedDone is the Done channel of a lazyDeadline stopped before
// anything waited on it.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
