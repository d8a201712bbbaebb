package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// PoolTransfer moves available units of one SKU between two pools at one
// location, such as main and a campaign's pool. (Stock moving between
// locations is a Transfer: see transfers.go.)
type PoolTransfer struct {
	SKU string
	// Location empty means DefaultLocation.
	Location string
	From     string
	To       string
	Quantity int64
	Actor    string
	Reason   string
	// Ref ties the pair of ledger rows together (a campaign id).
	Ref string
	// Units names the units to move, for a pool of units with an identity
	// (Quantity is then their number); none named: the first Quantity
	// available in seat order.
	Units []string
}

// PoolTransferTx moves t.Quantity available units inside the caller's
// transaction, as a pair of transfer ledger rows. The destination row is
// created if missing. The two rows are locked in pool order, the order every
// writer uses. It fails with insufficient_available (and moves nothing) when
// the source lacks the units.
func PoolTransferTx(ctx context.Context, tx pgx.Tx, t PoolTransfer) error {
	if t.Quantity <= 0 {
		return domain.Invalid("transfer quantity must be positive")
	}
	t.Location = locationOr(t.Location)
	q := db.New(tx)
	if _, err := q.StockCreate(ctx, t.SKU, t.Location, t.To); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("create %s/%s/%s: %w", t.SKU, t.Location, t.To, err)
	}
	if src, err := q.StockGet(ctx, t.SKU, t.Location, t.From); err == nil && src.Serialized {
		return transferUnits(ctx, q, t)
	}
	if dst, err := q.StockGet(ctx, t.SKU, t.Location, t.To); err == nil && dst.Serialized {
		return errSerialized(t.SKU, t.To)
	}
	if len(t.Units) > 0 {
		return ErrUnitsUnavailable(t.SKU, t.From, t.Units) // a pool without units
	}
	take := func() error {
		_, err := q.StockTake(ctx, db.StockTakeParams{Quantity: t.Quantity, Sku: t.SKU, Location: t.Location, Pool: t.From})
		if errors.Is(err, pgx.ErrNoRows) {
			return &domain.Error{Code: domain.CodeInsufficientAvailable, SKU: t.SKU, Pool: t.From, Location: t.Location,
				Detail: fmt.Sprintf("SKU %q (pool %s)%s has less than %d available to transfer to %s", t.SKU, t.From, at(t.Location), t.Quantity, t.To)}
		}
		if promisedPast(err) {
			return errIncomingPromised(t.SKU, t.Location, t.From, LedgerTransfer)
		}
		if err != nil {
			return fmt.Errorf("take %s/%s: %w", t.SKU, t.From, err)
		}
		return appendTransfer(ctx, q, t, t.From, -t.Quantity)
	}
	give := func() error {
		_, err := q.StockMove(ctx, db.StockMoveParams{Sku: t.SKU, Location: t.Location, Pool: t.To, DeltaTotal: t.Quantity, DeltaAvailable: t.Quantity})
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

func appendTransfer(ctx context.Context, q *db.Queries, t PoolTransfer, pool string, delta int64, units ...string) error {
	return appendLedger(ctx, q, db.LedgerAppendParams{
		Sku: t.SKU, Location: t.Location, Pool: pool, Kind: string(LedgerTransfer), DeltaTotal: delta, DeltaAvailable: delta,
		Actor: t.Actor, Reason: domain.Optional(t.Reason), Ref: domain.Optional(t.Ref), Units: units,
	})
}

// transferUnits is TransferTx for a pool of units with an identity: it
// moves t.Quantity available units (t.Units when named, else the first in
// seat order) to the other pool, which becomes serialized, and names them
// in both ledger rows. Both stock rows are locked first, in pool order, as
// every change to units does. A destination with stock of its own without
// units is refused (serialized_pool), as is a source short of available
// units (insufficient_available) or a named unit that is not an available
// unit of it (unit_unavailable).
func transferUnits(ctx context.Context, q *db.Queries, t PoolTransfer) error {
	pools := []string{t.From, t.To}
	if t.To < t.From {
		pools[0], pools[1] = t.To, t.From
	}
	for _, pool := range pools {
		row, err := q.StockLock(ctx, t.SKU, t.Location, pool)
		if err != nil {
			return fmt.Errorf("lock %s/%s/%s: %w", t.SKU, t.Location, pool, err)
		}
		if pool == t.To && !row.Serialized && row.Total > 0 {
			return errSerialized(t.SKU, t.To)
		}
	}
	ids := t.Units
	if ids == nil {
		ids = []string{}
	}
	moved, err := q.UnitsMovePool(ctx, db.UnitsMovePoolParams{Sku: t.SKU, Location: t.Location, FromPool: t.From, ToPool: t.To, Ids: ids, Lim: int32(t.Quantity)})
	if err != nil {
		return fmt.Errorf("move units of %s from %s to %s: %w", t.SKU, t.From, t.To, err)
	}
	if len(t.Units) > 0 && len(moved) < len(t.Units) {
		var bad []string
		for _, id := range t.Units {
			if !slices.Contains(moved, id) {
				bad = append(bad, id)
			}
		}
		return ErrUnitsUnavailable(t.SKU, t.From, bad)
	}
	n := int64(len(moved))
	if n < t.Quantity {
		return &domain.Error{Code: domain.CodeInsufficientAvailable, SKU: t.SKU, Pool: t.From,
			Detail: fmt.Sprintf("SKU %q (pool %s) has %d units available, %d to transfer to %s", t.SKU, t.From, n, t.Quantity, t.To)}
	}
	for _, side := range []struct {
		pool  string
		delta int64
	}{{t.From, -n}, {t.To, n}} {
		if _, err := q.StockShiftUnits(ctx, db.StockShiftUnitsParams{Delta: side.delta, Sku: t.SKU, Location: t.Location, Pool: side.pool}); err != nil {
			return fmt.Errorf("shift %s/%s: %w", t.SKU, side.pool, err)
		}
		if err := appendTransfer(ctx, q, t, side.pool, side.delta, moved...); err != nil {
			return err
		}
	}
	return nil
}
