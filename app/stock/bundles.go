package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// MaxBundleComponents bounds the components of one bundle, and
// MaxBundleQuantity what one bundle takes of each.
const (
	MaxBundleComponents = 20
	MaxBundleQuantity   = 1_000_000
)

// Bundle is a SKU defined by its components: a hold line on it holds
// Quantity of each component per bundle (app/inventory, bundles.go).
// Version counts its definitions: a hold line records the version it
// used, and changing the definition never changes a hold already made.
type Bundle struct {
	SKU        string      `json:"sku"`
	Version    int64       `json:"version"`
	Components []Component `json:"components"`
	Reason     string      `json:"reason"`
	SetBy      string      `json:"set_by"`
	SetAt      time.Time   `json:"set_at"`
}

// Component is one SKU of a bundle: Quantity of it per bundle, from the
// location the bundle's other components come from, or, with Split, from
// whichever locations have it.
type Component struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
	Split    bool   `json:"split"`
}

// validate checks b's names and components: 1 to MaxBundleComponents of
// them, each a SKU other than the bundle, named once, with a quantity
// from 1 to MaxBundleQuantity; and a reason.
func (b *Bundle) validate() error {
	if err := domain.ValidName("sku", b.SKU); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(b.Reason) == "":
		return domain.Invalid("reason is required: why the bundle is defined so")
	case len(b.Components) == 0:
		return domain.Invalid("components is empty: a bundle needs at least one component (DELETE removes the bundle)")
	case len(b.Components) > MaxBundleComponents:
		return domain.Invalid("components has %d entries, at most %d are allowed", len(b.Components), MaxBundleComponents)
	}
	if err := domain.ValidText("reason", b.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, c := range b.Components {
		if err := domain.ValidName(fmt.Sprintf("components[%d].sku", i), c.SKU); err != nil {
			return err
		}
		switch {
		case c.SKU == b.SKU:
			return domain.Invalid("components[%d]: bundle %q cannot contain itself", i, b.SKU)
		case seen[c.SKU]:
			return domain.Invalid("components[%d]: SKU %q is named twice: give it once, with the quantity of both", i, c.SKU)
		case c.Quantity < 1 || c.Quantity > MaxBundleQuantity:
			return domain.Invalid("components[%d].quantity must be a whole number from 1 to %d", i, MaxBundleQuantity)
		}
		seen[c.SKU] = true
	}
	return nil
}

// SetBundle defines bundle b.SKU (again), as a new version, and returns
// it. Each component must be a SKU with stock (at some location, in some
// pool) and not a bundle: bundles do not nest, so no bundle contains
// itself, directly or through another. The bundle SKU must have no stock
// of its own, nor be a component of another bundle. Holds already made
// keep the version they used. Where the bundle has a low-stock threshold,
// whether it is low is decided again by the new definition, sending
// nothing (as setting a threshold does).
func (s *Service) SetBundle(ctx context.Context, b Bundle, actor string) (Bundle, error) {
	if err := b.validate(); err != nil {
		return Bundle{}, err
	}
	skus := make([]string, len(b.Components))
	for i, c := range b.Components {
		skus[i] = c.SKU
	}
	// Watch the components where the bundle has a threshold before taking
	// the bundles' lock (holds and stock rows are never waited for under
	// it); a watch the definition then does not need is ended after.
	if err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return db.New(tx).BundleWatchAdd(ctx, skus, b.SKU)
	}); err != nil {
		return Bundle{}, fmt.Errorf("watch the components of bundle %s: %w", b.SKU, err)
	}
	defer s.bundleWatchRefresh(ctx, b.SKU)
	return retryWatchBusy(func() (Bundle, error) { return s.setBundle(ctx, b, actor, skus) })
}

// setBundle is SetBundle's transaction.
func (s *Service) setBundle(ctx context.Context, b Bundle, actor string, skus []string) (Bundle, error) {
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Bundle, error) {
		q := db.New(tx)
		if err := q.BundlesLock(ctx); err != nil {
			return Bundle{}, fmt.Errorf("lock the bundles: %w", err)
		}
		if err := checkBundle(ctx, q, b); err != nil {
			return Bundle{}, err
		}
		version, err := q.BundleNextVersion(ctx, b.SKU)
		if err != nil {
			return Bundle{}, fmt.Errorf("the next version of bundle %s: %w", b.SKU, err)
		}
		var p db.BundleComponentsInsertParams
		p.BundleSku, p.Version = b.SKU, version
		for _, c := range b.Components {
			p.Skus, p.Quantities, p.Splits = append(p.Skus, c.SKU), append(p.Quantities, c.Quantity), append(p.Splits, c.Split)
		}
		if err := q.BundleComponentsInsert(ctx, p); err != nil {
			return Bundle{}, fmt.Errorf("insert the components of bundle %s: %w", b.SKU, err)
		}
		row, err := q.BundleSet(ctx, db.BundleSetParams{Sku: b.SKU, Version: version, Reason: b.Reason, SetBy: actor})
		if err != nil {
			return Bundle{}, fmt.Errorf("set bundle %s: %w", b.SKU, err)
		}
		if err := resetBundleThresholds(ctx, q, b.SKU, skus); err != nil {
			return Bundle{}, err
		}
		return bundleOf(row, b.Components), nil
	})
}

// checkBundle refuses, under the lock of every bundle definition, a bundle
// that would nest: its SKU has stock or is a component of a bundle, or a
// component is a bundle (naming it when the bundle would contain itself
// through it); and a component without stock anywhere.
func checkBundle(ctx context.Context, q *db.Queries, b Bundle) error {
	if exists, err := q.StockSKUExists(ctx, b.SKU); err != nil {
		return fmt.Errorf("look for SKU %s: %w", b.SKU, err)
	} else if exists {
		return domain.Invalid("SKU %q has stock of its own: a bundle is held as its components, so it has none (pick another SKU for the bundle)", b.SKU)
	}
	containing, err := q.BundlesContaining(ctx, b.SKU)
	if err != nil {
		return fmt.Errorf("bundles containing %s: %w", b.SKU, err)
	}
	if len(containing) > 0 {
		return domain.Invalid("SKU %q is a component of bundle %s: bundles do not nest", b.SKU, strings.Join(containing, ", "))
	}
	skus := make([]string, len(b.Components))
	for i, c := range b.Components {
		skus[i] = c.SKU
	}
	nested, err := q.BundlesAmong(ctx, skus)
	if err != nil {
		return fmt.Errorf("bundles among the components of %s: %w", b.SKU, err)
	}
	for _, n := range nested {
		if n.Component == b.SKU {
			return domain.Invalid("component %q is a bundle that contains %q: bundle %q would contain itself through it", n.BundleSku, b.SKU, b.SKU)
		}
	}
	if len(nested) > 0 {
		return domain.Invalid("component %q is a bundle: bundles do not nest, name its components instead", nested[0].BundleSku)
	}
	existing, err := q.StockSKUsExisting(ctx, skus)
	if err != nil {
		return fmt.Errorf("look for the components of %s: %w", b.SKU, err)
	}
	for _, sku := range skus {
		if !slices.Contains(existing, sku) {
			return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: sku,
				Detail: fmt.Sprintf("component %q has no stock at any location: adjust its stock first", sku)}
		}
	}
	return nil
}

// GetBundle returns bundle sku's current definition, not found when it is
// not a bundle.
func (s *Service) GetBundle(ctx context.Context, sku string) (Bundle, error) {
	q := db.New(s.pool)
	row, err := q.BundleGet(ctx, sku)
	if errors.Is(err, pgx.ErrNoRows) {
		return Bundle{}, errNoBundle(sku)
	}
	if err != nil {
		return Bundle{}, err
	}
	comps, err := q.BundleComponents(ctx, sku, row.Version)
	if err != nil {
		return Bundle{}, err
	}
	out := make([]Component, len(comps))
	for i, c := range comps {
		out[i] = Component{SKU: c.Sku, Quantity: c.Quantity, Split: c.Split}
	}
	return bundleOf(row, out), nil
}

// DeleteBundle removes bundle sku's definition (its versions are kept for
// the holds that used them) and its low-stock thresholds; not found when
// it is not a bundle. Holds already made keep what they hold.
func (s *Service) DeleteBundle(ctx context.Context, sku string) error {
	defer s.bundleWatchRefresh(ctx, sku)
	return s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.BundlesLock(ctx); err != nil {
			return fmt.Errorf("lock the bundles: %w", err)
		}
		n, err := q.BundleDelete(ctx, sku)
		if err != nil {
			return fmt.Errorf("delete bundle %s: %w", sku, err)
		}
		if n > 0 {
			if err := q.BundleLowLock(ctx); err != nil {
				return fmt.Errorf("lock the bundles' thresholds: %w", err)
			}
			if err := q.BundleThresholdsDeleteAll(ctx, sku); err != nil {
				return fmt.Errorf("remove the thresholds of bundle %s: %w", sku, err)
			}
		}
		if n == 0 {
			return errNoBundle(sku)
		}
		return nil
	})
}

func errNoBundle(sku string) error {
	return &domain.Error{Code: domain.CodeNotFound, SKU: sku, Detail: fmt.Sprintf("SKU %q is not a bundle", sku)}
}

func bundleOf(r db.Bundle, comps []Component) Bundle {
	return Bundle{SKU: r.Sku, Version: r.Version, Components: comps, Reason: r.Reason, SetBy: r.SetBy, SetAt: r.SetAt}
}

// BundleStock is what a bundle has available, computed from its
// components' main pools: at each location, the least over its
// components of what is available of it there (a split component: at
// every location together) divided by its quantity, rounded down; in
// all, the sum over the locations of the least of the components that are
// not split, but no more than the least of each split component's
// available everywhere divided by its quantity. A paused row has none
// available.
type BundleStock struct {
	Version    int64       `json:"version"`
	Components []Component `json:"components"`
	Available  int64       `json:"available"`
	Locations  []BundleAt  `json:"locations"`
}

// BundleAt is a bundle's availability at one location, and its low-stock
// threshold there (nil: none).
type BundleAt struct {
	Location     string `json:"location"`
	Available    int64  `json:"available"`
	LowThreshold *int64 `json:"low_threshold"`
}

// Low reports whether the bundle is at or below its threshold here.
func (a BundleAt) Low() bool { return a.LowThreshold != nil && a.Available <= *a.LowThreshold }

// bundleStock computes bundle b's availability from its components'
// stock rows (rows, by component SKU).
func bundleStock(b Bundle, rows map[string][]db.Stock) BundleStock {
	out := BundleStock{Version: b.Version, Components: b.Components, Locations: []BundleAt{}}
	at := map[string]map[string]int64{} // location -> component -> available
	total := map[string]int64{}
	var locations []string
	for _, c := range b.Components {
		for _, r := range rows[c.SKU] {
			if r.Pool != MainPool || r.Status != StockOnSale {
				continue
			}
			if at[r.Location] == nil {
				at[r.Location] = map[string]int64{}
				locations = append(locations, r.Location)
			}
			at[r.Location][c.SKU] += r.Available
			total[c.SKU] += r.Available
		}
	}
	slices.Sort(locations)
	splitMin := int64(-1)
	for _, c := range b.Components {
		if c.Split {
			if n := total[c.SKU] / c.Quantity; splitMin < 0 || n < splitMin {
				splitMin = n
			}
		}
	}
	for _, loc := range locations {
		n := splitMin
		for _, c := range b.Components {
			if c.Split {
				continue
			}
			if m := at[loc][c.SKU] / c.Quantity; n < 0 || m < n {
				n = m
			}
		}
		n = max(n, 0)
		out.Locations = append(out.Locations, BundleAt{Location: loc, Available: n})
		if splitMin < 0 || n < splitMin {
			out.Available += n
		}
	}
	if splitMin >= 0 {
		sum := int64(0)
		for _, l := range out.Locations {
			sum += l.Available
		}
		out.Available = min(sum, splitMin)
		if len(out.Locations) == 0 {
			out.Available = 0
		}
	}
	return out
}

// bundleStockOf is sku's stock view as a bundle's: no pools of its own,
// and its availability computed (unknown_sku when it is not a bundle
// either).
func bundleStockOf(ctx context.Context, q *db.Queries, sku string) (Stock, error) {
	views, err := bundleStocks(ctx, q, []string{sku})
	if err != nil {
		return Stock{}, err
	}
	st, ok := views[sku]
	if !ok {
		return Stock{}, &domain.Error{Code: domain.CodeUnknownSKU, SKU: sku, Detail: fmt.Sprintf("SKU %q has no stock", sku)}
	}
	return st, nil
}
