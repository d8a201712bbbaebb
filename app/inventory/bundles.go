package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Bundles, held as their components.
//
// A hold line on a bundle (stock.Bundle) becomes, before the hold is
// queued, one line per component: the bundle line's quantity times the
// component's, each carrying the bundle line (BundleLine: the bundle, its
// quantity, the version of the definition used). They are lines of the
// same hold, so the same group-committed batch decides them, all or
// nothing. The components that are not split are taken from one location,
// the first (in the hold's strategy's order) that has every one of them;
// a split component is allocated as a split line is. The lines are
// written with their bundle line (reservation_lines.bundle_*), and
// confirm, release and expiry act on them as on any line.
//
// The definitions come from the process's memory of them, loaded at the
// first hold and again whenever it is found out of date:
//
//   - A batch with bundle lines reads, with its locks, the current
//     version of each bundle its holds expanded (BundleVersions); a hold
//     expanded by a definition since replaced or deleted is not decided:
//     memory is loaded again, and the hold expanded again goes with the
//     next batch. So no hold uses a definition that was not current when
//     its batch read it, whichever instance changed it.
//   - A SKU defined a bundle on another instance since this one loaded
//     them has no stock of its own: its batch refuses it unknown_sku, and
//     the hold looks the SKU up among the bundles; found, memory is loaded
//     again and the hold made once more.
//
// A component SKU is taken for one line of a hold: a SKU both held
// directly and as a component, or a component of two bundles of the hold,
// is refused (each line records one bundle line).

// bundleDef is a bundle's definition as a hold expands it.
type bundleDef struct {
	version    int64
	components []stock.Component
}

// bundleMemory is the process's memory of the bundles' current
// definitions, by bundle SKU: nil until loaded.
type bundleMemory struct {
	defs atomic.Pointer[map[string]bundleDef]
	mu   sync.Mutex // one load at a time
}

// bundleDefs returns the definitions in memory, loading them first if
// they never were.
func (s *Service) bundleDefs(ctx context.Context) (map[string]bundleDef, error) {
	if m := s.bundles.defs.Load(); m != nil {
		return *m, nil
	}
	return s.loadBundles(ctx)
}

// loadBundles reads every bundle's current definition into memory.
func (s *Service) loadBundles(ctx context.Context) (map[string]bundleDef, error) {
	s.bundles.mu.Lock()
	defer s.bundles.mu.Unlock()
	rows, err := db.New(s.pool).BundlesCurrent(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the bundles: %w", err)
	}
	m := map[string]bundleDef{}
	for _, r := range rows {
		d := m[r.BundleSku]
		d.version = r.Version
		d.components = append(d.components, stock.Component{SKU: r.Sku, Quantity: r.Quantity, Split: r.Split})
		m[r.BundleSku] = d
	}
	s.bundles.defs.Store(&m)
	return m, nil
}

// SetBundle defines a bundle (stock.Service.SetBundle); this instance's
// holds use the new definition at once.
func (s *Service) SetBundle(ctx context.Context, b stock.Bundle, actor string) (stock.Bundle, error) {
	out, err := s.Service.SetBundle(ctx, b, actor)
	if err == nil {
		_, err = s.loadBundles(ctx)
	}
	return out, err
}

// DeleteBundle removes a bundle (stock.Service.DeleteBundle); this
// instance's holds stop expanding it at once.
func (s *Service) DeleteBundle(ctx context.Context, sku string) error {
	err := s.Service.DeleteBundle(ctx, sku)
	if err == nil {
		_, err = s.loadBundles(ctx)
	}
	return err
}

// holdPool is the pool every line of req draws on: its campaign's, or
// main.
func holdPool(req HoldRequest) string {
	if req.Campaign != "" {
		return req.Campaign
	}
	return stock.MainPool
}

// holdWants is req's wants (HoldRequest.wants), its bundle lines expanded
// into their components by the definitions in memory.
func (s *Service) holdWants(ctx context.Context, req HoldRequest) ([]want, error) {
	pool := holdPool(req)
	defs, err := s.bundleDefs(ctx)
	if err != nil {
		return nil, err
	}
	if len(defs) == 0 {
		return req.wants(pool), nil
	}
	for _, it := range req.Items {
		if _, ok := defs[it.SKU]; ok {
			return expandBundles(req, pool, defs)
		}
	}
	return req.wants(pool), nil
}

// expandBundles is req's wants with each line on a bundle of defs
// replaced by its components' (see the top of this file), in lock order.
func expandBundles(req HoldRequest, pool string, defs map[string]bundleDef) ([]want, error) {
	plain := req
	plain.Items = nil
	var comps []want
	for i, it := range req.Items {
		d, ok := defs[it.SKU]
		if !ok {
			plain.Items = append(plain.Items, it)
			continue
		}
		switch {
		case it.Units != nil || it.Adjacent:
			return nil, domain.Invalid("items[%d]: SKU %q is a bundle: give it a quantity (its components' units are picked for it)", i, it.SKU)
		case it.Partial:
			return nil, domain.Invalid("items[%d]: SKU %q is a bundle: partial goes with a SKU's own line, a bundle is held whole", i, it.SKU)
		}
		b := &BundleLine{SKU: it.SKU, Quantity: it.Quantity, Version: d.version}
		for _, c := range d.components {
			if it.Quantity > MaxQuantity/c.Quantity {
				return nil, domain.Invalid("items[%d]: %d of bundle %q take %d x %d of %q, over %d", i, it.Quantity, it.SKU, it.Quantity, c.Quantity, c.SKU, MaxQuantity)
			}
			comps = append(comps, want{SKU: c.SKU, Location: it.Location, Pool: pool, Quantity: it.Quantity * c.Quantity,
				Split: c.Split || it.Split, bundle: b})
		}
	}
	var out []want
	if len(plain.Items) > 0 {
		out = plain.wants(pool)
	}
	by := make(map[string]*BundleLine, len(out)+len(comps))
	for _, w := range out {
		by[w.SKU] = nil
	}
	for _, w := range comps {
		other, taken := by[w.SKU]
		switch {
		case taken && other == nil:
			return nil, domain.Invalid("items: SKU %q is a line of the hold and a component of bundle %q: a hold takes a SKU for one line (make the bundle's line hold it all, or two holds)", w.SKU, w.bundle.SKU)
		case taken && other.SKU == w.bundle.SKU:
			return nil, domain.Invalid("items: bundle %q is on two lines: give it once, with the quantity of both", w.bundle.SKU)
		case taken:
			return nil, domain.Invalid("items: SKU %q is a component of bundles %q and %q: a hold takes a SKU for one line (hold them in two holds)", w.SKU, other.SKU, w.bundle.SKU)
		}
		by[w.SKU] = w.bundle
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b want) int { return compareLines(a.row(), b.row()) })
	return out, nil
}

// bundleUnseen reports whether err, a hold's refusal unknown_sku, names a
// SKU of req that memory does not know as a bundle but the database does
// (defined on another instance since memory was loaded): memory is then
// loaded again, and the hold is to be made once more.
func (s *Service) bundleUnseen(ctx context.Context, req HoldRequest, err error) bool {
	var e *domain.Error
	if !errors.As(err, &e) || e.Code != domain.CodeUnknownSKU || e.SKU == "" {
		return false
	}
	if !slices.ContainsFunc(req.Items, func(it Item) bool { return it.SKU == e.SKU }) {
		return false
	}
	if defs, derr := s.bundleDefs(ctx); derr != nil {
		return false
	} else if _, known := defs[e.SKU]; known {
		return false
	}
	if _, gerr := db.New(s.pool).BundleGet(ctx, e.SKU); gerr != nil {
		if !errors.Is(gerr, pgx.ErrNoRows) {
			s.log.Warn("look a SKU up among the bundles", "sku", e.SKU, "err", gerr)
		}
		return false
	}
	_, lerr := s.loadBundles(ctx)
	return lerr == nil
}

// bundlesOf is what a hold batch reads of its bundles: the SKUs of the
// bundles its holds expanded (nil: none).
func bundlesOf(leaders []*holdCall) []string {
	var skus []string
	for _, c := range leaders {
		for _, w := range c.h.wants {
			if w.bundle != nil && !w.reheld && !slices.Contains(skus, w.bundle.SKU) {
				skus = append(skus, w.bundle.SKU)
			}
		}
	}
	return skus
}

// staleBundles takes out of the batch's holds to decide those expanded by
// a definition that is not current (versions: each bundle's version as
// the batch read it, a bundle deleted missing): memory is loaded again
// and each is expanded again, to go with the next batch (b.later), or
// refused if it no longer expands.
func (s *Service) staleBundles(ctx context.Context, b *batchPlan, versions map[string]int64) {
	var deciding []*holdCall
	loaded := false
	for _, c := range b.deciding {
		if !expandedStale(c.h.wants, versions) {
			deciding = append(deciding, c)
			continue
		}
		if !loaded {
			if _, err := s.loadBundles(ctx); err != nil {
				s.log.Warn("load the bundles again", "err", err)
			}
			loaded = true
		}
		wants, err := s.holdWants(ctx, c.h.req)
		if err != nil {
			b.stopped, b.stopErrs = append(b.stopped, c), append(b.stopErrs, err)
			continue
		}
		c.h.wants, c.rows = wants, rowKeysOf(c.h)
		b.later = append(b.later, c)
	}
	b.deciding = deciding
}

// expandedStale reports whether wants name a bundle line whose version is
// not versions'.
func expandedStale(wants []want, versions map[string]int64) bool {
	for _, w := range wants {
		if w.bundle != nil && !w.reheld && versions[w.bundle.SKU] != w.bundle.Version {
			return true
		}
	}
	return false
}

// together takes the components of bundle line b that are not split and
// name no location (of wants) from one location: the first, among the
// locations the hold may use in its strategy's order, that has every one
// of them; or returns the refusal at the first of those locations.
func (d *holdDecision) together(b *BundleLine, wants []want) (verdict, bool) {
	var group []want
	for _, w := range wants {
		if w.bundle == b && !w.Split && w.Location == "" {
			group = append(group, w)
		}
	}
	eligible, v, ok := d.eligible(group[0])
	if !ok {
		return v, false
	}
	var refusal verdict
	for _, k := range eligible {
		at := d.st.rows[k].location
		picked, v, ok := d.fitAt(group, at)
		if ok {
			for i, w := range group {
				d.take(rowKey(w.SKU, at, w.Pool), w.Quantity, picked[i])
			}
			return verdict{}, true
		}
		if refusal.why == "" {
			refusal = v
		}
	}
	if refusal.why == domain.CodeOutOfStock && refusal.left >= 0 {
		refusal.left, refusal.places = d.mostAnywhere(refusal.line), len(eligible)
	}
	return refusal, false
}

// fitAt reports whether every want of group fits at location at, with
// the units it picks for each; or the refusal of the first that does not.
func (d *holdDecision) fitAt(group []want, at string) ([][]string, verdict, bool) {
	picked := make([][]string, len(group))
	for i, w := range group {
		k := rowKey(w.SKU, at, w.Pool)
		r, ok := d.st.rows[k]
		if !ok || !r.active || r.stopped != "" || !d.h.mayUse(at) || r.status != stock.StockOnSale {
			return nil, verdict{line: w, why: domain.CodeOutOfStock}, false
		}
		ask, asked := d.h.asks[poolKey(w.SKU, w.Pool)]
		units, v := fits(r, k, w, ask, asked, d.left(k), d.unitsTaken, d.mineUnits)
		if !v.granted {
			return nil, v, false
		}
		picked[i] = units
	}
	return picked, verdict{}, true
}

// mostAnywhere is the most want w's pool has left for the hold at one
// location it may use, on sale.
func (d *holdDecision) mostAnywhere(w want) int64 {
	best := int64(0)
	for _, k := range d.st.places[poolKey(w.SKU, w.Pool)] {
		r := d.st.rows[k]
		if r.active && r.stopped == "" && d.h.mayUse(r.location) && r.status == stock.StockOnSale {
			best = max(best, d.left(k))
		}
	}
	return best
}

// bundleRefusal is the refusal of a hold on component line l of a bundle,
// out of stock: it names the bundle line and the component.
func bundleRefusal(l want, v verdict) error {
	b := l.bundle
	left := strconv.FormatInt(v.left, 10)
	why := "no location this hold may use has that many with every other component (the most at one is " + left + ")"
	switch {
	case l.Location != "":
		why = l.Location + " has " + left
	case l.Split:
		why = "the locations this hold may use have " + left + " in all"
	}
	return &domain.Error{Code: domain.CodeOutOfStock, SKU: b.SKU, Pool: l.Pool, Location: l.Location,
		Detail: fmt.Sprintf("bundle %q: %d of it take %d of component %q (pool %s): %s", b.SKU, b.Quantity, l.Quantity, l.SKU, l.Pool, why)}
}
