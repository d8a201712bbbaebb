package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// setBundleThreshold is SetThreshold for bundle b: its threshold at
// t.Location fires on the availability its components make there (the
// figure bundleStock computes), once per crossing like a pool's. The
// crossings are decided at the commit of each change to a component
// (migrations/00158_bundle_thresholds.sql): the components' main pools at
// the location are watched from this transaction on. A bundle has its
// components' main pools only: another pool is refused.
func setBundleThreshold(ctx context.Context, q *db.Queries, b db.Bundle, t Threshold) (Stock, error) {
	if t.Pool != MainPool {
		return Stock{}, &domain.Error{Code: domain.CodeUnknownPool, Reference: true, SKU: b.Sku, Pool: t.Pool, Location: t.Location,
			Detail: fmt.Sprintf("SKU %q is a bundle: its threshold is on what its components' main pools make, it has no pool %q", b.Sku, t.Pool)}
	}
	if err := q.BundleLowLock(ctx); err != nil {
		return Stock{}, fmt.Errorf("lock the bundles' thresholds: %w", err)
	}
	// Read again under the lock: a definition replaced or deleted since is
	// what the threshold goes with.
	row, err := q.BundleGet(ctx, b.Sku)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stock{}, errNoBundle(b.Sku)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("read bundle %s: %w", b.Sku, err)
	}
	comps, err := q.BundleComponents(ctx, row.Sku, row.Version)
	if err != nil {
		return Stock{}, fmt.Errorf("read the components of bundle %s: %w", b.Sku, err)
	}
	skus := make([]string, len(comps))
	for i, c := range comps {
		skus[i] = c.Sku
	}
	if t.Threshold == nil {
		if err := q.BundleThresholdDelete(ctx, b.Sku, t.Location); err != nil {
			return Stock{}, fmt.Errorf("remove the threshold of bundle %s at %s: %w", b.Sku, t.Location, err)
		}
	} else {
		if ok, err := q.BundleComponentsAt(ctx, t.Location, b.Sku); err != nil {
			return Stock{}, fmt.Errorf("look for the components of bundle %s at %s: %w", b.Sku, t.Location, err)
		} else if !ok {
			return Stock{}, &domain.Error{Code: domain.CodeUnknownPool, Reference: true, SKU: b.Sku, Pool: t.Pool, Location: t.Location,
				Detail: fmt.Sprintf("bundle %q has no component with a main pool%s: it makes nothing there", b.Sku, at(t.Location))}
		}
		if _, err := q.BundleThresholdSet(ctx, db.BundleThresholdSetParams{Sku: b.Sku, Location: t.Location, Threshold: *t.Threshold, SetBy: t.Actor}); err != nil {
			return Stock{}, fmt.Errorf("set the threshold of bundle %s at %s: %w", b.Sku, t.Location, err)
		}
	}
	if err := q.BundleWatchRefresh(ctx, skus); err != nil {
		return Stock{}, fmt.Errorf("watch the components of bundle %s: %w", b.Sku, err)
	}
	return bundleStockOf(ctx, q, b.Sku)
}

// resetBundleThresholds decides again, by the definition just written,
// whether bundle sku is low where it has a threshold, and watches its
// components skus there (a threshold set since the watch before the
// definition's transaction: usually nothing to change).
func resetBundleThresholds(ctx context.Context, q *db.Queries, sku string, skus []string) error {
	if err := q.BundleWatchAdd(ctx, skus, sku); err != nil {
		return fmt.Errorf("watch the components of bundle %s: %w", sku, err)
	}
	if err := q.BundleLowLock(ctx); err != nil {
		return fmt.Errorf("lock the bundles' thresholds: %w", err)
	}
	if err := q.BundleThresholdsReset(ctx, sku); err != nil {
		return fmt.Errorf("decide again whether bundle %s is low: %w", sku, err)
	}
	return nil
}

// bundleWatchRefresh ends, after a definition of bundle sku was set or
// deleted, the watch of the SKUs it no longer needs (a component of an
// earlier version). Best effort: a watch left on costs a look at the
// bundles' thresholds at the commit of a change to that row, nothing more.
func (s *Service) bundleWatchRefresh(ctx context.Context, sku string) {
	err := s.inTx(context.WithoutCancel(ctx), func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		skus, err := q.BundleComponentsEver(ctx, sku)
		if err != nil {
			return err
		}
		return q.BundleWatchRefresh(ctx, skus)
	})
	if err != nil {
		s.log.Warn("end the watch of a bundle's former components", "bundle", sku, "err", err)
	}
}
