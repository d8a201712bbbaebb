package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// States of stock on hand, besides reserved and sold (which only holds
// move): what a move takes units from and gives them to. StateLost is
// where a write-off sends them: out of total.
const (
	StateAvailable      = "available"
	StateQualityControl = "quality_control"
	StateDamaged        = "damaged"
	StateSafetyStock    = "safety_stock"
	StateLost           = "lost"
)

// movable are the states a move takes from, and (with StateLost) gives to.
var movable = []string{StateAvailable, StateQualityControl, StateDamaged, StateSafetyStock}

// Move moves units of one stock row between states: available, quality
// control, damaged, safety stock; to StateLost it writes them off (they
// leave total). Location empty means DefaultLocation, Pool empty main.
type Move struct {
	SKU, Location, Pool string
	From, To            string
	Quantity            int64
	Reason              string
	Ref                 string
	Actor               string
}

func (m *Move) validate() error {
	if m.Pool == "" {
		m.Pool = MainPool
	}
	m.Location = locationOr(m.Location)
	for _, check := range []error{domain.ValidName("sku", m.SKU), domain.ValidName("location", m.Location), domain.ValidName("pool", m.Pool)} {
		if check != nil {
			return check
		}
	}
	switch {
	case !slices.Contains(movable, m.From):
		return domain.Invalid("from must be one of available, quality_control, damaged, safety_stock, not %q", m.From)
	case m.To != StateLost && !slices.Contains(movable, m.To):
		return domain.Invalid("to must be one of available, quality_control, damaged, safety_stock or lost (a write-off), not %q", m.To)
	case m.From == m.To:
		return domain.Invalid("from and to are both %s: a move goes from one state to another", m.From)
	case m.Quantity < 1 || m.Quantity > MaxAdjustment:
		return domain.Invalid("quantity must be a whole number from 1 to %d", MaxAdjustment)
	}
	if err := validReason(m.Reason); err != nil {
		return err
	}
	return domain.ValidRef("ref", m.Ref, domain.MaxTextLength)
}

// MoveOnce moves units between states at most once per key (see
// idempotency.Do), and answers the SKU's stock.
func (s *Service) MoveOnce(ctx context.Context, key idempotency.Key, m Move) (Stock, bool, error) {
	if err := m.validate(); err != nil {
		return Stock{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Stock, error) { return moveTx(ctx, tx, m) })
}

// MovePreview answers what MoveOnce would: the stock as the move would
// leave it, or its refusal; nothing changes.
func (s *Service) MovePreview(ctx context.Context, m Move) (Stock, error) {
	if err := m.validate(); err != nil {
		return Stock{}, err
	}
	return preview(ctx, s, func(ctx context.Context, tx pgx.Tx) (Stock, error) { return moveTx(ctx, tx, m) })
}

// moveTx locks the row, checks the state moved from has the units (409
// insufficient_<state> otherwise, naming it), moves them with one ledger
// row: kind move, or loss for a write-off.
func moveTx(ctx context.Context, tx pgx.Tx, m Move) (Stock, error) {
	q := db.New(tx)
	row, err := lockRow(ctx, q, m.SKU, m.Location, m.Pool)
	if err != nil {
		return Stock{}, err
	}
	if err := refuseEnded(ctx, q, m.SKU, m.Location, m.Pool); err != nil {
		return Stock{}, err
	}
	if have := stateOf(row, m.From); have < m.Quantity {
		return Stock{}, errShort(m.SKU, m.Location, m.Pool, m.From, have, m.Quantity, "move")
	}
	var d Counters
	d.add(m.From, -m.Quantity)
	kind := LedgerMove
	if m.To == StateLost {
		d.Total = -m.Quantity
		kind = LedgerLoss
	} else {
		d.add(m.To, m.Quantity)
	}
	if err := moveRow(ctx, q, m.SKU, m.Location, m.Pool, d, kind, m.Actor, m.Reason, m.Ref); err != nil {
		return Stock{}, err
	}
	return stockOf(ctx, q, m.SKU)
}

// lockRow locks one stock row for a change of its states: one that does
// not exist is unknown_sku, one of units with an identity serialized_pool
// (its units have no such states).
func lockRow(ctx context.Context, q *db.Queries, sku, location, pool string) (db.Stock, error) {
	row, err := q.StockLock(ctx, sku, location, pool)
	if errors.Is(err, pgx.ErrNoRows) {
		if lerr := requireLocations(ctx, q, location); lerr != nil {
			return db.Stock{}, lerr
		}
		return db.Stock{}, errNoPool(ctx, q, sku, location, pool, false)
	}
	if err != nil {
		return db.Stock{}, fmt.Errorf("lock %s/%s/%s: %w", sku, location, pool, err)
	}
	if row.Serialized {
		return db.Stock{}, errSerialized(sku, pool)
	}
	return row, nil
}

// moveRow moves a locked row's counters by d and records it in the ledger
// (kind, who, why), in the caller's transaction.
func moveRow(ctx context.Context, q *db.Queries, sku, location, pool string, d Counters, kind LedgerKind, actor, reason, ref string) error {
	_, err := q.StockMove(ctx, db.StockMoveParams{
		Sku: sku, Location: location, Pool: pool, DeltaTotal: d.Total, DeltaAvailable: d.Available, DeltaReserved: d.Reserved,
		DeltaSold: d.Sold, DeltaQualityControl: d.QualityControl, DeltaDamaged: d.Damaged, DeltaSafetyStock: d.SafetyStock,
		DeltaIncoming: d.Incoming, DeltaShort: d.Short,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return errSerialized(sku, pool)
	}
	if promisedPast(err) {
		return errIncomingPromised(sku, location, pool, kind)
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s/%s: %w", kind, sku, location, pool, err)
	}
	return appendLedger(ctx, q, db.LedgerAppendParams{
		Sku: sku, Location: location, Pool: pool, Kind: string(kind), DeltaTotal: d.Total, DeltaAvailable: d.Available,
		DeltaReserved: d.Reserved, DeltaSold: d.Sold, DeltaQualityControl: d.QualityControl, DeltaDamaged: d.Damaged,
		DeltaSafetyStock: d.SafetyStock, DeltaIncoming: d.Incoming, DeltaShort: d.Short,
		Actor: actor, ActorKey: domain.KeyName(ctx), Reason: domain.Optional(reason), Ref: domain.Optional(ref),
	})
}

// stateOf is a row's count of units in state.
func stateOf(r db.Stock, state string) int64 {
	switch state {
	case StateAvailable:
		return r.Available
	case StateQualityControl:
		return r.QualityControl
	case StateDamaged:
		return r.Damaged
	case StateSafetyStock:
		return r.SafetyStock
	case "incoming":
		return r.Incoming
	}
	return 0
}

// add moves counter state by n.
func (c *Counters) add(state string, n int64) {
	switch state {
	case StateAvailable:
		c.Available += n
	case StateQualityControl:
		c.QualityControl += n
	case StateDamaged:
		c.Damaged += n
	case StateSafetyStock:
		c.SafetyStock += n
	case "incoming":
		c.Incoming += n
	}
}

// errShort is the refusal of a change that would take a state of a row
// below zero: the code names the state (insufficient_damaged, ...).
func errShort(sku, location, pool, state string, have, want int64, what string) error {
	return &domain.Error{Code: domain.InsufficientCode(state), SKU: sku, Pool: pool, Location: location,
		Extra: map[string]any{"state": state, "has": have, "requested": want},
		Detail: fmt.Sprintf("SKU %q (pool %s) at %s has %d %s, %d to %s: no state goes below zero",
			sku, pool, location, have, stateName(state), want, what)}
}

func stateName(state string) string {
	switch state {
	case StateQualityControl:
		return "in quality control"
	case StateSafetyStock:
		return "in safety stock"
	case "incoming":
		return "incoming"
	}
	return state
}
