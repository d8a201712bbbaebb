// Package leader runs work that one instance at a time does: a loop that
// holds a session advisory lock on one connection and makes a pass every
// tick until a deadline. Each run is a periodic River job's; the next run,
// on whichever instance, waits for the lock and takes over where this one
// stops.
package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lock is a session advisory lock, taken and given back on the loop's
// connection.
type Lock struct {
	// Name says which lock, in errors.
	Name   string
	Try    func(context.Context) (bool, error)
	Unlock func(context.Context) (bool, error)
}

// Run is what one loop did.
type Run struct {
	// Passes counts the calls of pass.
	Passes int
	// Waited is how long the loop waited for the lock.
	Waited time.Duration
	// Skipped means another runner kept the lock until the deadline.
	Skipped bool
}

// lockPoll is how often a loop that finds the lock taken tries again.
const lockPoll = 50 * time.Millisecond

// releaseTimeout bounds giving the lock back.
const releaseTimeout = 5 * time.Second

// Loop takes lock on conn, waiting for it until until, then calls pass
// once and again every tick until until. It returns when until passes,
// when ctx ends (shutting down: not an error, the next run goes on) or
// with the first error of a pass. On return it rolls back a transaction
// a pass left open and gives the lock back; if that fails it closes conn,
// so that the pool never gets back a connection holding the lock.
func Loop(ctx context.Context, conn *pgx.Conn, lock Lock, until time.Time, tick time.Duration,
	pass func(context.Context) error) (Run, error) {
	var run Run
	start := time.Now()
	for {
		ok, err := lock.Try(ctx)
		if err != nil {
			return run, fmt.Errorf("take the %s lock: %w", lock.Name, err)
		}
		if ok {
			break
		}
		if !time.Now().Before(until) {
			run.Skipped = true
			return run, nil
		}
		if !sleep(ctx, min(lockPoll, time.Until(until))) {
			return run, nil
		}
	}
	run.Waited = time.Since(start)
	defer release(conn, lock)

	for {
		err := pass(ctx)
		run.Passes++
		if ctx.Err() != nil {
			return run, nil
		}
		if err != nil {
			return run, err
		}
		wait := time.Until(until)
		if wait <= 0 {
			return run, nil
		}
		if !sleep(ctx, min(tick, wait)) {
			return run, nil
		}
	}
}

// release gives lock back on conn, closing conn when it cannot.
func release(conn *pgx.Conn, lock Lock) {
	if conn.IsClosed() {
		return // the lock went with the session
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if conn.PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(ctx, "rollback"); err != nil {
			_ = conn.Close(ctx)
			return
		}
	}
	if _, err := lock.Unlock(ctx); err != nil {
		_ = conn.Close(ctx)
	}
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
