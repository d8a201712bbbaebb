// Package dbtx runs a function in a transaction of its own, as River's
// dbutil.WithTx and WithTxV do: the one way a service opens a transaction
// that returns a value, rather than declaring the value first and setting
// it from inside a closure.
package dbtx

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Beginner is what begins a transaction: a *pgxpool.Pool, a *pgx.Conn, or
// a pgx.Tx (a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction on db, committing when fn returns nil
// and rolling back otherwise.
func WithTx(ctx context.Context, db Beginner, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return fn(ctx, tx) })
}

// WithTxV is WithTx for a function that returns a value, which it returns
// with fn's error: when fn fails, its value too (a preview's answer rides
// on the error that rolls it back).
func WithTxV[T any](ctx context.Context, db Beginner, fn func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	var out T
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
		out, err = fn(ctx, tx)
		return err
	})
	return out, err
}
