package inventory

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/dbtx"
)

// inTx runs fn in a transaction (dbtx.WithTx), committing when it returns
// nil. Such a transaction may put stock back on a row: no hold is refused
// from memory on a read made before it (see soldout.go).
func (s *Service) inTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	defer s.soldOut.written()
	return dbtx.WithTx(ctx, s.pool, fn)
}

// inTxV is inTx for a function that returns a value (dbtx.WithTxV).
func inTxV[T any](ctx context.Context, s *Service, fn func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	defer s.soldOut.written()
	return dbtx.WithTxV(ctx, s.pool, fn)
}

// InTx is inTx for another package's transaction that puts stock back
// through inventory's functions (a campaign's finish giving its pools back
// to main): once it ends, this instance refuses no hold from memory on a
// read made before it, as after the service's own writes.
func (s *Service) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTx(ctx, func(_ context.Context, tx pgx.Tx) error { return fn(tx) })
}
