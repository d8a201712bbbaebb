package leader_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/leader"
)

// lockOn is an advisory lock taken on conn, as the queries of the loops
// that use this package take theirs.
func lockOn(conn *pgx.Conn) leader.Lock {
	return leader.Lock{
		Name: "test",
		Try: func(ctx context.Context) (ok bool, err error) {
			err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(4242)`).Scan(&ok)
			return ok, err
		},
		Unlock: func(ctx context.Context) (ok bool, err error) {
			err = conn.QueryRow(ctx, `SELECT pg_advisory_unlock(4242)`).Scan(&ok)
			return ok, err
		},
	}
}

// TestOneLoopAtATime: a second loop waits while the first holds the lock,
// takes over once it gives the lock back, and a loop that never gets it by
// its deadline reports it skipped; a pass that fails ends the loop with
// its error and the lock is given back, with the transaction it left open
// rolled back.
func TestOneLoopAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	acquire := func() *pgx.Conn {
		pc, err := pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(pc.Release)
		return pc.Conn()
	}
	first, second, third := acquire(), acquire(), acquire()

	var running atomic.Int32
	firstIn := make(chan struct{})
	releaseFirst := make(chan struct{})
	type result struct {
		run leader.Run
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		run, err := leader.Loop(ctx, first, lockOn(first), time.Now().Add(time.Minute), time.Millisecond,
			func(context.Context) error {
				if running.Add(1) != 1 {
					return errors.New("two loops ran a pass at once")
				}
				defer running.Add(-1)
				select {
				case <-firstIn:
				default:
					close(firstIn)
				}
				<-releaseFirst
				return errPassFailed
			})
		firstDone <- result{run, err}
	}()
	<-firstIn

	// The third loop's deadline passes while the first holds the lock.
	run, err := leader.Loop(ctx, third, lockOn(third), time.Now().Add(100*time.Millisecond), time.Millisecond,
		func(context.Context) error { return errors.New("a pass without the lock") })
	require.NoError(t, err)
	require.True(t, run.Skipped)
	require.Zero(t, run.Passes)

	secondDone := make(chan result, 1)
	go func() {
		passes := 0
		run, err := leader.Loop(ctx, second, lockOn(second), time.Now().Add(time.Minute), time.Millisecond,
			func(context.Context) error {
				if running.Add(1) != 1 {
					return errors.New("two loops ran a pass at once")
				}
				defer running.Add(-1)
				if passes++; passes == 3 {
					return errPassFailed
				}
				return nil
			})
		secondDone <- result{run, err}
	}()

	// The first pass leaves a transaction open, then fails.
	_, err = first.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	close(releaseFirst)
	r := <-firstDone
	require.ErrorIs(t, r.err, errPassFailed)
	require.Equal(t, 1, r.run.Passes)
	require.False(t, first.IsClosed(), "the lock was given back on a connection the pool can take back")
	require.Equal(t, byte('I'), first.PgConn().TxStatus(), "the open transaction was rolled back")

	r = <-secondDone
	require.ErrorIs(t, r.err, errPassFailed)
	require.Equal(t, 3, r.run.Passes, "the second loop took over once the first gave the lock back")
	require.Positive(t, r.run.Waited)

	var held int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held))
	require.Zero(t, held, "no loop keeps the lock after it returns")
}

var errPassFailed = errors.New("pass failed")

// TestLoopStopsAtItsDeadlineAndOnShutdown: passes every tick until the
// deadline; a cancelled context ends the loop without an error.
func TestLoopStopsAtItsDeadlineAndOnShutdown(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	pc, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer pc.Release()

	run, err := leader.Loop(context.Background(), pc.Conn(), lockOn(pc.Conn()), time.Now().Add(200*time.Millisecond), 50*time.Millisecond,
		func(context.Context) error { return nil })
	require.NoError(t, err)
	require.GreaterOrEqual(t, run.Passes, 2)
	require.LessOrEqual(t, run.Passes, 5, "a pass every tick, not more")

	ctx, cancel := context.WithCancel(context.Background())
	passes := 0
	run, err = leader.Loop(ctx, pc.Conn(), lockOn(pc.Conn()), time.Now().Add(time.Hour), time.Millisecond,
		func(context.Context) error {
			if passes++; passes == 2 {
				cancel()
			}
			return nil
		})
	require.NoError(t, err, "shutting down is not an error")
	require.Equal(t, 2, run.Passes)
}
