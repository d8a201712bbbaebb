package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Threshold sets a pool's low-stock threshold.
type Threshold struct {
	SKU string
	// Location empty means DefaultLocation.
	Location string
	Pool     string
	// Threshold is the level at or below which available is low; nil
	// removes the threshold.
	Threshold *int64
	Actor     string
}

// SetThreshold sets (or removes) a pool's low-stock threshold and returns
// the SKU's stock. From the pool's next change on, a change that takes
// available from above the threshold to at or below it sends one stock.low
// event; available must rise above it again before the next. Setting a
// threshold a pool is already under sends nothing until then. On a bundle
// it is the threshold of what its components make at the location.
func (s *Service) SetThreshold(ctx context.Context, t Threshold) (Stock, error) {
	if t.Pool == "" {
		t.Pool = MainPool
	}
	t.Location = locationOr(t.Location)
	if err := domain.ValidName("location", t.Location); err != nil {
		return Stock{}, err
	}
	if err := domain.ValidName("sku", t.SKU); err != nil {
		return Stock{}, err
	}
	if err := domain.ValidName("pool", t.Pool); err != nil {
		return Stock{}, err
	}
	if t.Threshold != nil && (*t.Threshold < 0 || *t.Threshold > MaxAdjustment) {
		return Stock{}, domain.Invalid("threshold must be a whole number from 0 to %d, or null to remove it", MaxAdjustment)
	}
	bundle := false
	st, err := retryWatchBusy(func() (Stock, error) { return s.setThreshold(ctx, t, &bundle) })
	if bundle && t.Threshold == nil && err == nil {
		s.bundleWatchRefresh(ctx, t.SKU)
	}
	return st, err
}

// setThreshold is SetThreshold's transaction; bundle is set when t.SKU is
// a bundle.
func (s *Service) setThreshold(ctx context.Context, t Threshold, bundle *bool) (Stock, error) {
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Stock, error) {
		q := db.New(tx)
		_, err := q.StockThresholdSet(ctx, db.StockThresholdSetParams{Threshold: t.Threshold, SetBy: t.Actor, Sku: t.SKU, Location: t.Location, Pool: t.Pool})
		if errors.Is(err, pgx.ErrNoRows) {
			if err := requireLocations(ctx, q, t.Location); err != nil {
				return Stock{}, err
			}
			if b, err := q.BundleGet(ctx, t.SKU); err == nil {
				*bundle = true
				return setBundleThreshold(ctx, q, b, t)
			} else if !errors.Is(err, pgx.ErrNoRows) {
				return Stock{}, fmt.Errorf("look for bundle %s: %w", t.SKU, err)
			}
			return Stock{}, errNoPool(ctx, q, t.SKU, t.Location, t.Pool, false)
		}
		if err != nil {
			return Stock{}, fmt.Errorf("set the threshold of %s/%s/%s: %w", t.SKU, t.Location, t.Pool, err)
		}
		return stockOf(ctx, q, t.SKU)
	})
}
