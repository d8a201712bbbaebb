package batch

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// The pipe's contract (see pipe): its one error comes out of RoundTrip,
// and is the first error any queued statement reported; a statement that
// fails rolls the transaction back, commit queued or not.

// queueExec queues one statement on p, as a sqlc :batchexec call does,
// and returns its result.
func queueExec(ctx context.Context, p *Pipe, sql string) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql)
	return p.SendBatch(ctx, b)
}

func TestPipeRoundTripFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `CREATE TABLE pipe_test (n int)`)
	require.NoError(t, err)
	rows := func() int { return dbtest.Count(t, pool, `SELECT count(*) FROM pipe_test`) }

	const fail = `SELECT 1/0`
	insert := `INSERT INTO pipe_test VALUES (1)`
	for _, c := range []struct {
		name       string
		statements []string
		readFirst  bool // the caller reads the first statement's result
	}{
		{"the first statement fails", []string{fail, insert, insert}, false},
		{"the middle statement fails", []string{insert, fail, insert}, false},
		{"the last statement fails", []string{insert, insert, fail}, false},
		{"the middle fails and the caller read the first", []string{insert, fail, insert}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			p := NewPipe(conn.Conn())
			p.Begin()
			var first pgx.BatchResults
			for i, sql := range c.statements {
				r := queueExec(ctx, p, sql)
				if i == 0 {
					first = r
				}
			}
			p.Commit()
			err = p.RoundTrip(ctx, func() {
				if c.readFirst {
					_, _ = first.Exec() // its own error, if any, is the pipe's to report
				}
			})
			var pe *pgconn.PgError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "22012", pe.Code, "the division by zero, whichever statement it was")
			Rollback(conn.Conn())
			require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus(), "no transaction left open")
			require.Zero(t, rows(), "nothing committed")
		})
	}

	t.Run("all statements succeed", func(t *testing.T) {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		p := NewPipe(conn.Conn())
		p.Begin()
		queueExec(ctx, p, insert)
		queueExec(ctx, p, insert)
		p.Commit()
		require.NoError(t, p.RoundTrip(ctx, nil))
		require.Equal(t, 2, rows())
		_, err = pool.Exec(ctx, `TRUNCATE pipe_test`)
		require.NoError(t, err)
	})

	t.Run("the connection breaks mid-batch", func(t *testing.T) {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		p := NewPipe(conn.Conn())
		p.Begin()
		queueExec(ctx, p, insert)
		queueExec(ctx, p, `SELECT pg_terminate_backend(pg_backend_pid())`)
		queueExec(ctx, p, insert)
		p.Commit()
		err = p.RoundTrip(ctx, nil)
		require.Error(t, err)
		Rollback(conn.Conn()) // must not hang or panic on a dead connection
		require.True(t, conn.Conn().IsClosed() || conn.Conn().PgConn().IsClosed(), "the broken connection is closed, so the pool drops it")
		require.Zero(t, rows(), "nothing committed")
	})

	t.Run("the caller reads only the results it needs", func(t *testing.T) {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		p := NewPipe(conn.Conn())
		p.Begin()
		queueExec(ctx, p, `SET LOCAL lock_timeout = '1s'`)
		queueExec(ctx, p, insert)
		b := &pgx.Batch{}
		b.Queue(`SELECT count(*) FROM pipe_test`)
		counting := p.SendBatch(ctx, b)
		later := queueExec(ctx, p, `SELECT 1`)
		p.Commit()
		var n int
		err = p.RoundTrip(ctx, func() {
			_ = counting.QueryRow().Scan(&n)
			_, outOfOrder := later.Exec()
			require.NoError(t, outOfOrder)
		})
		require.NoError(t, err)
		require.Equal(t, 1, n, "the count, not the result of a statement before it")
		_, err = pool.Exec(ctx, `TRUNCATE pipe_test`)
		require.NoError(t, err)
	})

	t.Run("a result read after a later one is refused", func(t *testing.T) {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		p := NewPipe(conn.Conn())
		first := queueExec(ctx, p, `SELECT 1`)
		second := queueExec(ctx, p, `SELECT 2`)
		err = p.RoundTrip(ctx, func() {
			_, _ = second.Exec()
			_, _ = first.Exec()
		})
		require.ErrorIs(t, err, errOutOfOrder)
	})

	t.Run("a query that is not a batch query is refused", func(t *testing.T) {
		p := NewPipe(nil)
		_, err := p.Exec(ctx, insert)
		require.ErrorIs(t, err, errNotPiped)
	})
}
