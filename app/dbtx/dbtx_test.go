package dbtx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/dbtx"
)

// TestWithTxV: a value comes back from a committed transaction, and with
// its error from one rolled back, whose writes are gone.
func TestWithTxV(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, "CREATE TABLE t (n int)")
	require.NoError(t, err)

	n, err := dbtx.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (int, error) {
		var n int
		err := tx.QueryRow(ctx, "INSERT INTO t VALUES (1) RETURNING n").Scan(&n)
		return n, err
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	errBack := errors.New("roll back")
	n, err = dbtx.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (int, error) {
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES (2)")
		require.NoError(t, err)
		return 2, errBack
	})
	require.ErrorIs(t, err, errBack)
	require.Equal(t, 2, n, "the value rides with the error")

	var count int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&count))
	require.Equal(t, 1, count, "the rolled back row is gone")
}
