package inventory

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// inTx runs fn in a transaction, committing when it returns nil. Such a
// transaction may put stock back on a row: no hold is refused from memory
// on a read made before it (see soldout.go).
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, fn)
	s.soldOut.written()
	return err
}

// InTx is inTx for another package's transaction that puts stock back
// through inventory's functions (a campaign's finish giving its pools back
// to main): once it ends, this instance refuses no hold from memory on a
// read made before it, as after the service's own writes.
func (s *Service) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTx(ctx, fn)
}
