package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Transfer moves available units of one SKU between two pools, such as main
// and a campaign's pool.
type Transfer struct {
	SKU      string
	From     string
	To       string
	Quantity int64
	Actor    string
	Reason   string
	// Ref ties the pair of ledger rows together (a campaign id).
	Ref string
}

// TransferTx moves t.Quantity available units inside the caller's
// transaction, as a pair of transfer ledger rows. The destination row is
// created if missing. The two rows are locked in pool order, the order every
// writer uses. It fails with insufficient_available (and moves nothing) when
// the source lacks the units.
func TransferTx(ctx context.Context, tx pgx.Tx, t Transfer) error {
	if t.Quantity <= 0 {
		return domain.Invalid("transfer quantity must be positive")
	}
	q := db.New(tx)
	if _, err := q.StockCreate(ctx, t.SKU, t.To); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("create %s/%s: %w", t.SKU, t.To, err)
	}
	for _, pool := range []string{t.From, t.To} {
		if row, err := q.StockGet(ctx, t.SKU, pool); err == nil && row.Serialized {
			return errSerialized(t.SKU, pool)
		}
	}
	take := func() error {
		_, err := q.StockTake(ctx, t.Quantity, t.SKU, t.From)
		if errors.Is(err, pgx.ErrNoRows) {
			return &domain.Error{Code: domain.CodeInsufficientAvailable, SKU: t.SKU, Pool: t.From,
				Detail: fmt.Sprintf("SKU %q (pool %s) has less than %d available to transfer to %s", t.SKU, t.From, t.Quantity, t.To)}
		}
		if err != nil {
			return fmt.Errorf("take %s/%s: %w", t.SKU, t.From, err)
		}
		return appendTransfer(ctx, q, t, t.From, -t.Quantity)
	}
	give := func() error {
		_, err := q.StockMove(ctx, db.StockMoveParams{Sku: t.SKU, Pool: t.To, DeltaTotal: t.Quantity, DeltaAvailable: t.Quantity})
		if err != nil {
			return fmt.Errorf("give %s/%s: %w", t.SKU, t.To, err)
		}
		return appendTransfer(ctx, q, t, t.To, t.Quantity)
	}
	first, second := take, give
	if t.To < t.From {
		first, second = give, take
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

func appendTransfer(ctx context.Context, q *db.Queries, t Transfer, pool string, delta int64) error {
	return appendLedger(ctx, q, db.LedgerAppendParams{
		Sku: t.SKU, Pool: pool, Kind: "transfer", DeltaTotal: delta, DeltaAvailable: delta,
		Actor: t.Actor, Reason: domain.Optional(t.Reason), Ref: domain.Optional(t.Ref),
	})
}
