package stock

import (
	"context"
	"fmt"
	"slices"

	"github.com/stockhold/stockhold/app/db"
)

// Bundles in the catalogue. A bundle has no stock rows, so the key a
// catalogue page walks does not have it: each stretch of stock rows is
// merged with the bundles whose SKUs fall in the same range (BundlesScan),
// in the database's collation (SKUsInOrder, one more round trip, only
// when the range has a bundle), each with its availability computed from
// its components' rows as GET /v1/skus/{sku} computes it.

// withBundles merges into skus, a stretch of stock views after after (and,
// with upto, at most upto), the bundles in that range. more says that lim
// bundles were read and more may follow: the stretch then ends at the
// last bundle read, and the next goes on from there.
func withBundles(ctx context.Context, q *db.Queries, skus []Stock, after string, upto *string, lim int) ([]Stock, bool, error) {
	names, err := q.BundlesScan(ctx, after, upto, int32(lim))
	if err != nil {
		return nil, false, fmt.Errorf("read a stretch of bundles: %w", err)
	}
	more := len(names) == lim
	out, err := mergeBundles(ctx, q, skus, names, more)
	return out, more, err
}

// mergeBundles merges the bundles among names into skus (stock views in
// the database's collation), in that collation; a SKU with stock rows
// stays as they show it. With cut, the merge ends at the last of names.
func mergeBundles(ctx context.Context, q *db.Queries, skus []Stock, names []string, cut bool) ([]Stock, error) {
	if len(names) == 0 {
		return skus, nil
	}
	views, err := bundleStocks(ctx, q, names)
	if err != nil || len(views) == 0 {
		return skus, err
	}
	all := slices.Clone(names)
	byName := make(map[string]Stock, len(skus)+len(views))
	for _, st := range skus {
		byName[st.SKU] = st
		all = append(all, st.SKU)
	}
	for sku, st := range views {
		if _, ok := byName[sku]; !ok {
			byName[sku] = st
		}
	}
	order, err := q.SKUsInOrder(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("order SKUs and bundles: %w", err)
	}
	out := make([]Stock, 0, len(byName))
	for _, sku := range order {
		if st, ok := byName[sku]; ok { // a bundle deleted since it was listed is not
			out = append(out, st)
		}
		if cut && sku == names[len(names)-1] {
			break
		}
	}
	return out, nil
}

// bundleStocks returns the stock views of those of skus that are bundles,
// by SKU: no pools, and the availability their current definitions
// compute from their components' rows (bundleStock).
func bundleStocks(ctx context.Context, q *db.Queries, skus []string) (map[string]Stock, error) {
	defs, err := q.BundlesCurrentOf(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("read bundles: %w", err)
	}
	if len(defs) == 0 {
		return nil, nil
	}
	bundles := map[string]*Bundle{}
	var order, components []string
	for _, d := range defs {
		b, ok := bundles[d.BundleSku]
		if !ok {
			b = &Bundle{SKU: d.BundleSku, Version: d.Version, SetAt: d.SetAt}
			bundles[d.BundleSku] = b
			order = append(order, d.BundleSku)
		}
		b.Components = append(b.Components, Component{SKU: d.Sku, Quantity: d.Quantity, Split: d.Split})
		if !slices.Contains(components, d.Sku) {
			components = append(components, d.Sku)
		}
	}
	rows, err := q.StockBatch(ctx, components)
	if err != nil {
		return nil, fmt.Errorf("read bundles' components: %w", err)
	}
	bySKU := map[string][]db.Stock{}
	for _, r := range rows {
		bySKU[r.Sku] = append(bySKU[r.Sku], r)
	}
	thresholds, err := q.BundleThresholdsOf(ctx, order)
	if err != nil {
		return nil, fmt.Errorf("read bundles' thresholds: %w", err)
	}
	out := make(map[string]Stock, len(order))
	for _, sku := range order {
		b := bundles[sku]
		bs := bundleStock(*b, bySKU)
		for _, t := range thresholds {
			if t.Sku != sku {
				continue
			}
			for i := range bs.Locations {
				if bs.Locations[i].Location == t.Location {
					bs.Locations[i].LowThreshold = &t.Threshold
				}
			}
		}
		changed := b.SetAt
		for _, c := range b.Components {
			for _, r := range bySKU[c.SKU] {
				if r.Pool == MainPool && r.UpdatedAt.After(changed) {
					changed = r.UpdatedAt
				}
			}
		}
		out[sku] = Stock{SKU: sku, Pools: []Pool{}, Bundle: &bs, changed: changed}
	}
	return out, nil
}

// keepBundle is keep for a bundle: at a location, only its availability
// there (available stays what it is in all); low stock when it is at or
// below its threshold at a location (that location, with one); updated
// since when its definition or a component's main pool changed since.
func (cq CatalogueQuery) keepBundle(st Stock) (Stock, bool) {
	if cq.Location != "" {
		bs := *st.Bundle
		bs.Locations = slices.DeleteFunc(slices.Clone(bs.Locations), func(a BundleAt) bool { return a.Location != cq.Location })
		if len(bs.Locations) == 0 {
			return st, false
		}
		st.Bundle = &bs
	}
	if cq.LowStock && !slices.ContainsFunc(st.Bundle.Locations, BundleAt.Low) {
		return st, false
	}
	return st, cq.UpdatedSince == nil || !st.changed.Before(*cq.UpdatedSince)
}
