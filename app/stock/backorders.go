package stock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// MaxBackorderHorizonDays bounds a backorder policy's horizon (a year).
const MaxBackorderHorizonDays = 366

// Backorders is the backorder policy of a SKU's pool: how far holds may
// promise beyond what each of its stock rows has on hand. The hold engine
// takes a line's units from available first and promises the rest
// (app/inventory, backorders.go); the CHECK stock_backordered refuses any
// promise past BelowZero plus, with a horizon, everything incoming.
type Backorders struct {
	SKU  string `json:"sku"`
	Pool string `json:"pool"`
	// BelowZero is how many units each row may promise whatever is on
	// its way (0: none).
	BelowZero int64 `json:"below_zero"`
	// HorizonDays, when set, lets each row promise what is on its way:
	// the transfers in transit to it and its open inbound lines expected
	// within that many days.
	HorizonDays *int32 `json:"horizon_days"`
	SetBy       string `json:"set_by"`
	// SetAt is when it was set.
	SetAt time.Time `json:"set_at"`
	// Rows are what each location of the pool has promised.
	Rows []BackorderRow `json:"rows"`
}

// BackorderRow is what one stock row of a pool with a policy promised:
// backordered units of held and confirmed holds, not yet on hand, within
// what the policy lets it promise now (allowed: below_zero plus what is
// on its way within the horizon).
type BackorderRow struct {
	Location    string `json:"location"`
	Backordered int64  `json:"backordered"`
	Allowed     int64  `json:"allowed"`
}

func (b *Backorders) validate() error {
	if b.Pool == "" {
		b.Pool = MainPool
	}
	if err := domain.ValidName("sku", b.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("pool", b.Pool); err != nil {
		return err
	}
	switch h := b.HorizonDays; {
	case b.BelowZero < 0 || b.BelowZero > MaxLimit:
		return domain.Invalid("below_zero must be a whole number from 0 to %d", MaxLimit)
	case h != nil && (*h < 0 || *h > MaxBackorderHorizonDays):
		return domain.Invalid("horizon_days must be from 0 to %d, or null to promise nothing on its way", MaxBackorderHorizonDays)
	case h == nil && b.BelowZero == 0:
		return domain.Invalid("the policy allows nothing: set below_zero above 0 or horizon_days (DELETE removes the policy)")
	}
	return nil
}

// SetBackorders sets the backorder policy of a SKU's pool and returns it
// with what each location has promised. A policy that would allow a
// location less than it has already promised is refused (422
// backorders_promised) and changes nothing: release those holds, or wait
// for their stock, first. The pool must have stock at some location.
func (s *Service) SetBackorders(ctx context.Context, b Backorders, actor string) (Backorders, error) {
	if err := b.validate(); err != nil {
		return Backorders{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Backorders, error) {
		q := db.New(tx)
		if err := requirePool(ctx, q, b.SKU, b.Pool); err != nil {
			return Backorders{}, err
		}
		rows, err := lockBackorderRows(ctx, q, b.SKU, b.Pool, b.BelowZero, b.HorizonDays)
		if err != nil {
			return Backorders{}, err
		}
		if err := promisedWithin(b.SKU, b.Pool, rows); err != nil {
			return Backorders{}, err
		}
		row, err := q.SkuBackordersSet(ctx, db.SkuBackordersSetParams{Sku: b.SKU, Pool: b.Pool, BelowZero: b.BelowZero,
			HorizonDays: b.HorizonDays, SetBy: actor})
		if err != nil {
			return Backorders{}, fmt.Errorf("set the backorder policy of %s/%s: %w", b.SKU, b.Pool, err)
		}
		if err := q.StockBackorderPolicySet(ctx, db.StockBackorderPolicySetParams{Sku: b.SKU, Pool: b.Pool,
			BelowZero: b.BelowZero, HorizonDays: b.HorizonDays}); err != nil {
			return Backorders{}, fmt.Errorf("keep the backorder policy of %s/%s on its rows: %w", b.SKU, b.Pool, err)
		}
		return backordersOf(row, rows), nil
	})
}

// GetBackorders returns the backorder policy of a SKU's pool (pool empty:
// main) with what each location has promised; not found when none is
// set.
func (s *Service) GetBackorders(ctx context.Context, sku, pool string) (Backorders, error) {
	if pool == "" {
		pool = MainPool
	}
	q := db.New(s.pool)
	row, err := q.SkuBackordersGet(ctx, sku, pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return Backorders{}, errNoBackorders(sku, pool)
	}
	if err != nil {
		return Backorders{}, err
	}
	read, err := q.StockBackorderRowsRead(ctx, row.HorizonDays, sku, pool)
	if err != nil {
		return Backorders{}, fmt.Errorf("read the rows of %s/%s: %w", sku, pool, err)
	}
	rows := make([]BackorderRow, 0, len(read))
	for _, r := range read {
		rows = append(rows, BackorderRow{Location: r.Location, Backordered: r.Backordered, Allowed: row.BelowZero + r.IncomingSoon})
	}
	return backordersOf(row, rows), nil
}

// DeleteBackorders removes the backorder policy of a SKU's pool: refused
// (422 backorders_promised) while a location has promises outstanding;
// not found when it had none.
func (s *Service) DeleteBackorders(ctx context.Context, sku, pool string) error {
	if pool == "" {
		pool = MainPool
	}
	return s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if _, err := q.SkuBackordersGet(ctx, sku, pool); errors.Is(err, pgx.ErrNoRows) {
			return errNoBackorders(sku, pool)
		} else if err != nil {
			return err
		}
		rows, err := lockBackorderRows(ctx, q, sku, pool, 0, nil)
		if err != nil {
			return err
		}
		if err := promisedWithin(sku, pool, rows); err != nil {
			return err
		}
		if err := q.SkuBackordersDelete(ctx, sku, pool); err != nil {
			return fmt.Errorf("remove the backorder policy of %s/%s: %w", sku, pool, err)
		}
		return q.StockBackorderPolicySet(ctx, db.StockBackorderPolicySetParams{Sku: sku, Pool: pool})
	})
}

// lockBackorderRows locks the pool's rows and returns what each promised
// and would be allowed under a policy of belowZero and horizon.
func lockBackorderRows(ctx context.Context, q *db.Queries, sku, pool string, belowZero int64, horizon *int32) ([]BackorderRow, error) {
	rows, err := q.StockBackorderRowsLock(ctx, horizon, sku, pool)
	if err != nil {
		return nil, fmt.Errorf("lock the rows of %s/%s: %w", sku, pool, err)
	}
	out := make([]BackorderRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, BackorderRow{Location: r.Location, Backordered: r.Backordered, Allowed: belowZero + r.IncomingSoon})
	}
	return out, nil
}

// promisedWithin refuses a policy that allows a row less than it has
// promised.
func promisedWithin(sku, pool string, rows []BackorderRow) error {
	var over []string
	for _, r := range rows {
		if r.Backordered > r.Allowed {
			over = append(over, fmt.Sprintf("%s has promised %d, the policy would allow %d", r.Location, r.Backordered, r.Allowed))
		}
	}
	if len(over) == 0 {
		return nil
	}
	return &domain.Error{Code: domain.CodeBackordersPromised, SKU: sku, Pool: pool,
		Detail: fmt.Sprintf("SKU %q (pool %s): %s; release those holds or let receipts fill them first", sku, pool, strings.Join(over, "; "))}
}

func errNoBackorders(sku, pool string) error {
	return &domain.Error{Code: domain.CodeNotFound, SKU: sku, Pool: pool,
		Detail: fmt.Sprintf("SKU %q (pool %s) has no backorder policy", sku, pool)}
}

func backordersOf(r db.SkuBackorder, rows []BackorderRow) Backorders {
	return Backorders{SKU: r.Sku, Pool: r.Pool, BelowZero: r.BelowZero, HorizonDays: r.HorizonDays,
		SetBy: r.SetBy, SetAt: r.SetAt, Rows: rows}
}

// fillBackorders fills, in a receipt's transaction and under the lock of
// the stock row it delivered units to, the units holds were promised
// there: of the units delivered (at most what is available), confirmed
// holds first, then held ones, each oldest first, one ledger row of kind
// backorder_fill per hold filled (its event: hold.backorder_filled). A
// hold being changed right now is skipped (BackorderHoldsLock); what no
// hold takes stays available.
func fillBackorders(ctx context.Context, q *db.Queries, sku, location, pool string, units int64, actor, ref string) error {
	ids, err := q.BackorderHoldsLock(ctx, sku, location, pool)
	if err != nil {
		return fmt.Errorf("lock the holds promised %s/%s/%s: %w", sku, location, pool, err)
	}
	if len(ids) == 0 {
		return nil
	}
	_, err = q.BackordersFill(ctx, db.BackordersFillParams{Sku: sku, Location: location, Pool: pool, Ids: ids, Units: units,
		Actor: actor, ActorKey: domain.KeyName(ctx), Ref: domain.Optional(ref)})
	if err != nil {
		return fmt.Errorf("fill the holds promised %s/%s/%s: %w", sku, location, pool, err)
	}
	return nil
}

// promisedPast reports whether err is the CHECK stock_backordered refusing
// a change: it would leave a row's holds promised more than its policy
// allows of what is available and on its way.
func promisedPast(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "stock_backordered"
}

// promiseFits reports whether locked row r still keeps what it promised
// within its policy after its available moves by available and its
// incoming by incoming: the CHECK stock_backordered, for a caller that
// names the row it refuses (bulk adjustments, whose one statement the
// CHECK would refuse as a whole).
func promiseFits(r db.Stock, available, incoming int64) bool {
	room := r.BackorderLimit + r.Available + available
	if r.BackorderHorizonDays != nil {
		room += r.Incoming + incoming
	}
	return r.Backordered <= room
}

// waitingOn is how many of locked row r's available units what it
// promised rests on: what no policy room (below_zero, with a horizon
// what is on its way) covers.
func waitingOn(r db.Stock) int64 {
	cover := r.BackorderLimit
	if r.BackorderHorizonDays != nil {
		cover += r.Incoming
	}
	return min(r.Available, max(0, r.Backordered-cover))
}

// errIncomingPromised refuses a change of kind that takes units holds were
// promised (an inbound closed short or cancelled, a transfer's units
// lost or cancelled, available taken away: by an adjustment, a move, a
// count, a transfer out, a campaign's pool filled) off a row.
func errIncomingPromised(sku, location, pool string, kind LedgerKind) error {
	return &domain.Error{Code: domain.CodeIncomingPromised, SKU: sku, Pool: pool, Location: location,
		Detail: fmt.Sprintf("%s of SKU %q (pool %s) at %s would leave its holds promised more than its backorder policy allows of what is available and on its way: release those holds (GET /v1/skus/%s/backorders shows what is promised) or raise below_zero first",
			kind, sku, pool, location, sku)}
}
