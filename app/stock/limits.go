package stock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// MaxLimit bounds each limit of a SKU's pool (a hold line's quantity
// bound), and MaxCustomerWindowSeconds max_per_customer's window (366
// days).
const (
	MaxLimit                 = 1_000_000
	MaxCustomerWindowSeconds = 366 * 24 * 3600
)

// Limits are the limits on what one hold, and one customer, may take of a
// SKU's pool, at every location together; nil: not set. The hold engine
// enforces them (app/inventory, limits.go).
type Limits struct {
	SKU  string `json:"sku"`
	Pool string `json:"pool"`
	// MaxPerOrder and MinPerOrder bound the units of the SKU in one hold;
	// Step makes it a multiple (a pack size).
	MaxPerOrder *int64 `json:"max_per_order"`
	MinPerOrder *int64 `json:"min_per_order"`
	Step        *int64 `json:"step"`
	// MaxPerCustomer bounds the units one customer's holds hold or bought
	// (the holds carrying their customer_ref), made in the last
	// CustomerWindowSeconds (nil: ever).
	MaxPerCustomer        *int64    `json:"max_per_customer"`
	CustomerWindowSeconds *int64    `json:"customer_window_seconds"`
	SetBy                 string    `json:"set_by"`
	SetAt                 time.Time `json:"set_at"`
}

// Describe says l's limits in one line, those set only:
// "max_per_order 12, step 6, max_per_customer 2 per 24h0m0s".
func (l Limits) Describe() string {
	var parts []string
	for _, v := range []struct {
		name string
		v    *int64
	}{{"max_per_order", l.MaxPerOrder}, {"min_per_order", l.MinPerOrder}, {"step", l.Step}} {
		if v.v != nil {
			parts = append(parts, fmt.Sprintf("%s %d", v.name, *v.v))
		}
	}
	if n := l.MaxPerCustomer; n != nil {
		per := "ever"
		if w := l.CustomerWindowSeconds; w != nil {
			per = "per " + (time.Duration(*w) * time.Second).String()
		}
		parts = append(parts, fmt.Sprintf("max_per_customer %d %s", *n, per))
	}
	return strings.Join(parts, ", ")
}

// LimitsOfSKU returns the limits of each of a SKU's pools that has any,
// by pool.
func (s *Service) LimitsOfSKU(ctx context.Context, sku string) (map[string]Limits, error) {
	rows, err := db.New(s.pool).SkuLimitsOfSKU(ctx, sku)
	if err != nil {
		return nil, fmt.Errorf("read the limits of %s: %w", sku, err)
	}
	out := make(map[string]Limits, len(rows))
	for _, r := range rows {
		out[r.Pool] = limitsOf(r)
	}
	return out, nil
}

func limitsOf(r db.SkuLimit) Limits {
	return Limits{SKU: r.Sku, Pool: r.Pool, MaxPerOrder: r.MaxPerOrder, MinPerOrder: r.MinPerOrder, Step: r.Step,
		MaxPerCustomer: r.MaxPerCustomer, CustomerWindowSeconds: r.CustomerWindowSeconds, SetBy: r.SetBy, SetAt: r.SetAt}
}

// validate checks l's names and values: each limit from 1 to MaxLimit,
// at least one set, min_per_order at most max_per_order, both multiples
// of step, and a window only with max_per_customer.
func (l *Limits) validate() error {
	if l.Pool == "" {
		l.Pool = MainPool
	}
	if err := domain.ValidName("sku", l.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("pool", l.Pool); err != nil {
		return err
	}
	for _, v := range []struct {
		name string
		v    *int64
	}{{"max_per_order", l.MaxPerOrder}, {"min_per_order", l.MinPerOrder}, {"step", l.Step}, {"max_per_customer", l.MaxPerCustomer}} {
		if v.v != nil && (*v.v < 1 || *v.v > MaxLimit) {
			return domain.Invalid("%s must be a whole number from 1 to %d, or null for none", v.name, MaxLimit)
		}
	}
	switch w := l.CustomerWindowSeconds; {
	case l.MaxPerOrder == nil && l.MinPerOrder == nil && l.Step == nil && l.MaxPerCustomer == nil:
		return domain.Invalid("no limit given: set max_per_order, min_per_order, step or max_per_customer (DELETE removes them all)")
	case w != nil && (*w < 1 || *w > MaxCustomerWindowSeconds):
		return domain.Invalid("customer_window_seconds must be from 1 to %d, or null to count every hold", MaxCustomerWindowSeconds)
	case w != nil && l.MaxPerCustomer == nil:
		return domain.Invalid("customer_window_seconds is the window of max_per_customer: set that too")
	case l.MinPerOrder != nil && l.MaxPerOrder != nil && *l.MinPerOrder > *l.MaxPerOrder:
		return domain.Invalid("min_per_order (%d) is above max_per_order (%d): no hold could pass", *l.MinPerOrder, *l.MaxPerOrder)
	case l.Step == nil:
		return nil
	case l.MinPerOrder != nil && *l.MinPerOrder%*l.Step != 0:
		return domain.Invalid("min_per_order (%d) is not a multiple of step (%d)", *l.MinPerOrder, *l.Step)
	case l.MaxPerOrder != nil && *l.MaxPerOrder%*l.Step != 0:
		return domain.Invalid("max_per_order (%d) is not a multiple of step (%d)", *l.MaxPerOrder, *l.Step)
	}
	return nil
}

// SetLimits sets every limit of a SKU's pool at once (a limit left nil is
// removed) and returns them. The pool must have stock at some location.
// Holds already made keep what they hold; the next hold batch on the pool
// decides on the new limits.
func (s *Service) SetLimits(ctx context.Context, l Limits, actor string) (Limits, error) {
	if err := l.validate(); err != nil {
		return Limits{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Limits, error) {
		q := db.New(tx)
		if err := requirePool(ctx, q, l.SKU, l.Pool); err != nil {
			return Limits{}, err
		}
		row, err := q.SkuLimitsSet(ctx, db.SkuLimitsSetParams{Sku: l.SKU, Pool: l.Pool, MaxPerOrder: l.MaxPerOrder,
			MinPerOrder: l.MinPerOrder, Step: l.Step, MaxPerCustomer: l.MaxPerCustomer,
			CustomerWindowSeconds: l.CustomerWindowSeconds, SetBy: actor})
		if err != nil {
			return Limits{}, fmt.Errorf("set the limits of %s/%s: %w", l.SKU, l.Pool, err)
		}
		return limitsOf(row), nil
	})
}

// GetLimits returns the limits of a SKU's pool (pool empty: main), not
// found when none is set.
func (s *Service) GetLimits(ctx context.Context, sku, pool string) (Limits, error) {
	if pool == "" {
		pool = MainPool
	}
	row, err := db.New(s.pool).SkuLimitsGet(ctx, sku, pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return Limits{}, &domain.Error{Code: domain.CodeNotFound, SKU: sku, Pool: pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) has no limits", sku, pool)}
	}
	if err != nil {
		return Limits{}, err
	}
	return limitsOf(row), nil
}

// DeleteLimits removes every limit of a SKU's pool; not found when it had
// none.
func (s *Service) DeleteLimits(ctx context.Context, sku, pool string) error {
	if pool == "" {
		pool = MainPool
	}
	return s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		n, err := db.New(tx).SkuLimitsDelete(ctx, sku, pool)
		if err != nil {
			return fmt.Errorf("remove the limits of %s/%s: %w", sku, pool, err)
		}
		if n == 0 {
			return &domain.Error{Code: domain.CodeNotFound, SKU: sku, Pool: pool,
				Detail: fmt.Sprintf("SKU %q (pool %s) has no limits", sku, pool)}
		}
		return nil
	})
}

// requirePool refuses a SKU without stock (not found: the SKU is what the
// request addresses) or without the pool at any location (unknown_pool).
func requirePool(ctx context.Context, q *db.Queries, sku, pool string) error {
	ok, err := q.SkuLimitsPoolExists(ctx, sku, pool)
	if err != nil {
		return fmt.Errorf("look for %s/%s: %w", sku, pool, err)
	}
	if ok {
		return nil
	}
	exists, err := q.StockSKUExists(ctx, sku)
	if err != nil {
		return fmt.Errorf("look for SKU %s: %w", sku, err)
	}
	if exists {
		return &domain.Error{Code: domain.CodeUnknownPool, Reference: true, SKU: sku, Pool: pool,
			Detail: fmt.Sprintf("SKU %q has no pool %q", sku, pool)}
	}
	return &domain.Error{Code: domain.CodeUnknownSKU, SKU: sku, Pool: pool, Detail: fmt.Sprintf("SKU %q has no stock", sku)}
}
