package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// setBundleThreshold is SetThreshold for bundle b: its threshold at
// t.Location fires on the availability its components make there (the
// figure bundleStock computes), once per crossing like a pool's. The
// crossings are decided at the commit of each change to a watched
// component row (migrations/00158_bundle_thresholds.sql,
// 00160_bundle_watch_in_step.sql): the components' main pools at the
// location are watched first, waiting for the changes in flight on them,
// and the threshold is written and decided under the bundles' lock, after
// those changes. A bundle has its components' main pools only: another
// pool is refused. A removed threshold's watches are ended after the
// commit (SetThreshold).
func setBundleThreshold(ctx context.Context, q *db.Queries, b db.Bundle, t Threshold) (Stock, error) {
	if t.Pool != MainPool {
		return Stock{}, &domain.Error{Code: domain.CodeUnknownPool, Reference: true, SKU: b.Sku, Pool: t.Pool, Location: t.Location,
			Detail: fmt.Sprintf("SKU %q is a bundle: its threshold is on what its components' main pools make, it has no pool %q", b.Sku, t.Pool)}
	}
	if t.Threshold != nil {
		comps, err := q.BundleComponents(ctx, b.Sku, b.Version)
		if err != nil {
			return Stock{}, fmt.Errorf("read the components of bundle %s: %w", b.Sku, err)
		}
		var skus, split []string
		for _, c := range comps {
			skus = append(skus, c.Sku)
			if c.Split {
				split = append(split, c.Sku)
			}
		}
		if err := q.BundleWatchAt(ctx, skus, t.Location, split); err != nil {
			return Stock{}, fmt.Errorf("watch the components of bundle %s: %w", b.Sku, err)
		}
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
	if t.Threshold == nil {
		if err := q.BundleThresholdDelete(ctx, b.Sku, t.Location); err != nil {
			return Stock{}, fmt.Errorf("remove the threshold of bundle %s at %s: %w", b.Sku, t.Location, err)
		}
		return bundleStockOf(ctx, q, b.Sku)
	}
	comps, err := q.BundleComponents(ctx, row.Sku, row.Version)
	if err != nil {
		return Stock{}, fmt.Errorf("read the components of bundle %s: %w", b.Sku, err)
	}
	skus := make([]string, len(comps))
	for i, c := range comps {
		skus[i] = c.Sku
	}
	if ok, err := q.BundleComponentsAt(ctx, t.Location, b.Sku); err != nil {
		return Stock{}, fmt.Errorf("look for the components of bundle %s at %s: %w", b.Sku, t.Location, err)
	} else if !ok {
		return Stock{}, &domain.Error{Code: domain.CodeUnknownPool, Reference: true, SKU: b.Sku, Pool: t.Pool, Location: t.Location,
			Detail: fmt.Sprintf("bundle %q has no component with a main pool%s: it makes nothing there", b.Sku, at(t.Location))}
	}
	if _, err := q.BundleThresholdSet(ctx, db.BundleThresholdSetParams{Sku: b.Sku, Location: t.Location, Threshold: *t.Threshold, SetBy: t.Actor}); err != nil {
		return Stock{}, fmt.Errorf("set the threshold of bundle %s at %s: %w", b.Sku, t.Location, err)
	}
	if err := bundleWatchCatchUp(ctx, q, b.Sku, skus); err != nil {
		return Stock{}, err
	}
	if err := q.BundleThresholdDecide(ctx, b.Sku, t.Location); err != nil {
		return Stock{}, fmt.Errorf("decide whether bundle %s is low at %s: %w", b.Sku, t.Location, err)
	}
	return bundleStockOf(ctx, q, b.Sku)
}

// errWatchBusy is bundleWatchCatchUp's refusal to wait, under the bundles'
// lock, for a component row in use: the transaction is tried again
// (retryWatchBusy), watching the row before the lock.
var errWatchBusy = errors.New("a component row to watch is in use")

// watchBusyTries is how many times retryWatchBusy runs a transaction.
const watchBusyTries = 5

// retryWatchBusy runs tx again while it fails with errWatchBusy, up to
// watchBusyTries times in all; the last such failure is a busy refusal
// (503, retry in a moment), not an error of the service.
func retryWatchBusy[T any](tx func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		out, err := tx()
		if !errors.Is(err, errWatchBusy) {
			return out, err
		}
		if i == watchBusyTries {
			return out, &domain.Error{Code: domain.CodeBusy, Detail: fmt.Sprintf(
				"a component row of the bundle stayed in use through %d tries; nothing changed; retry in a moment", watchBusyTries)}
		}
	}
}

// bundleWatchCatchUp watches, under the bundles' lock, the rows of
// bundle's components skus that a threshold needs and that were created
// since the watch before the lock (their creation decided by the
// thresholds it saw). It does not wait for a row in use: errWatchBusy.
func bundleWatchCatchUp(ctx context.Context, q *db.Queries, bundle string, skus []string) error {
	_, err := q.BundleWatchCatchUp(ctx, skus)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available: NOWAIT
		return fmt.Errorf("watch the components of bundle %s: %w", bundle, errWatchBusy)
	}
	if err != nil {
		return fmt.Errorf("watch the components of bundle %s: %w", bundle, err)
	}
	return nil
}

// resetBundleThresholds decides again, by the definition just written,
// whether bundle sku is low where it has a threshold, and watches its
// components skus there: before the bundles' lock, waiting for the changes
// in flight on them (a threshold set since the watch before the
// definition's transaction: usually nothing to change), then under it,
// the rows created since.
func resetBundleThresholds(ctx context.Context, q *db.Queries, sku string, skus []string) error {
	if err := q.BundleWatchAdd(ctx, skus, sku); err != nil {
		return fmt.Errorf("watch the components of bundle %s: %w", sku, err)
	}
	if err := q.BundleLowLock(ctx); err != nil {
		return fmt.Errorf("lock the bundles' thresholds: %w", err)
	}
	if err := bundleWatchCatchUp(ctx, q, sku, skus); err != nil {
		return err
	}
	if err := q.BundleThresholdsReset(ctx, sku); err != nil {
		return fmt.Errorf("decide again whether bundle %s is low: %w", sku, err)
	}
	return nil
}

// bundleWatchRefresh ends, after a definition of bundle sku was set or
// deleted or a threshold of it removed, the watch of the SKUs it no
// longer needs (a component of an earlier version, a location without a
// threshold now), under the bundles' lock so that it reads every
// threshold and definition written. Best effort: a watch left on costs a
// look at the bundles' thresholds at the commit of a change to that row,
// nothing more.
func (s *Service) bundleWatchRefresh(ctx context.Context, sku string) {
	err := s.inTx(context.WithoutCancel(ctx), func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.BundleLowLock(ctx); err != nil {
			return err
		}
		skus, err := q.BundleComponentsEver(ctx, sku)
		if err != nil {
			return err
		}
		return q.BundleWatchTrim(ctx, skus)
	})
	if err != nil {
		s.log.Warn("end the watch of a bundle's former components", "bundle", sku, "err", err)
	}
}
