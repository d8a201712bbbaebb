package stock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Catalogue reads: the stock of many SKUs at once, the way a storefront's
// catalogue sync reads it (GET /v1/skus).
const (
	// MaxCataloguePage bounds a page of SKUs.
	MaxCataloguePage = 1000
	// MaxCatalogueBatch bounds the SKUs one batch names.
	MaxCatalogueBatch = 100
	// CatalogueScan is how many stock rows one filtered page reads at
	// most. A filter that few SKUs match (low stock in a catalogue of
	// millions) would otherwise read the whole catalogue for one page; a
	// page that has read this many rows ends there, with fewer SKUs than
	// asked (or none) and a cursor to read on from.
	CatalogueScan = 20_000
)

// CatalogueQuery asks for a page of SKUs in SKU order (the primary key's:
// the database's collation), each with every pool.
type CatalogueQuery struct {
	// After is the last SKU of the page before; "" for the first page.
	After string
	Limit int
	// LowStock keeps only SKUs with a pool at or below its low-stock
	// threshold.
	LowStock bool
	// UpdatedSince keeps only SKUs with a pool changed at or after it.
	UpdatedSince *time.Time
	// SKUs, when given, asks for these SKUs (a batch: one page, After
	// and Limit unused), the filters applied to them.
	SKUs []string
	// Location keeps only each SKU's entries at that location, and only
	// the SKUs that have one there; the other filters apply to them.
	Location string
}

// CataloguePage is a page of SKUs. Next is the After of the page after,
// nil on the last page; a filtered page may hold fewer SKUs than asked
// (see CatalogueScan) and still have a next. Missing, for a batch, lists
// the SKUs named that have no stock at all, in the order named.
type CataloguePage struct {
	SKUs    []Stock
	Missing []string
	Next    *string
}

func (cq CatalogueQuery) validate() error {
	if cq.Location != "" {
		if err := domain.ValidName("location", cq.Location); err != nil {
			return err
		}
	}
	if len(cq.SKUs) > 0 {
		if len(cq.SKUs) > MaxCatalogueBatch {
			return domain.Invalid("sku names %d SKUs: at most %d in one batch", len(cq.SKUs), MaxCatalogueBatch)
		}
		for _, sku := range cq.SKUs {
			if err := domain.ValidName("sku", sku); err != nil {
				return err
			}
		}
		return nil
	}
	if cq.Limit < 1 || cq.Limit > MaxCataloguePage {
		return domain.Invalid("limit must be from 1 to %d", MaxCataloguePage)
	}
	return nil
}

// Catalogue returns a page of SKUs: a keyset on the primary key, read in
// stretches of rows in the key's order (an index scan that stops at its
// LIMIT), so every page costs the same however deep into the catalogue,
// and nothing is counted. A plain page reads about as many rows as it
// answers; a filtered one (a location is a filter) reads at most
// CatalogueScan rows.
func (s *Service) Catalogue(ctx context.Context, cq CatalogueQuery) (CataloguePage, error) {
	if err := cq.validate(); err != nil {
		return CataloguePage{}, err
	}
	q := db.New(s.pool)
	if cq.Location != "" {
		if err := requireLocations(ctx, q, cq.Location); err != nil {
			return CataloguePage{}, err
		}
	}
	order, err := locationOrder(ctx, q)
	if err != nil {
		return CataloguePage{}, err
	}
	if len(cq.SKUs) > 0 {
		return catalogueBatch(ctx, q, cq, order)
	}
	filtered := cq.LowStock || cq.UpdatedSince != nil || cq.Location != ""
	budget := s.scanBudget()
	page := CataloguePage{SKUs: []Stock{}}
	after, least := cq.After, 0
	for {
		// Rows to read: a filtered page its whole budget at once; a plain
		// one about what the SKUs still wanted take (most have one pool,
		// and one more SKU says whether another page follows).
		n := budget
		if !filtered {
			want := cq.Limit + 1 - len(page.SKUs)
			n = want + want/4 + 1
		}
		n = max(n, least)
		rows, err := q.StockScan(ctx, after, int32(n))
		if err != nil {
			return CataloguePage{}, fmt.Errorf("read a stretch of SKUs: %w", err)
		}
		skus := groupBySKU(rows, order)
		full := len(rows) == n
		if full && len(skus) == 1 {
			// One SKU's pools fill the whole stretch: read a longer one.
			least = 2 * n
			continue
		}
		if full && len(skus) > 1 {
			// The stretch may end inside the last SKU's pools: it is read
			// again, whole, by the next stretch.
			skus = skus[:len(skus)-1]
		}
		var upto *string
		if full {
			upto = &skus[len(skus)-1].SKU
		}
		skus, more, err := withBundles(ctx, q, skus, after, upto, n)
		if err != nil {
			return CataloguePage{}, err
		}
		full = full || more
		for _, st := range skus {
			st, ok := cq.keep(st)
			if !ok {
				continue
			}
			if len(page.SKUs) == cq.Limit {
				// One more matches: the page is full and another follows.
				page.Next = &page.SKUs[cq.Limit-1].SKU
				return page, nil
			}
			page.SKUs = append(page.SKUs, st)
		}
		if !full {
			return page, nil // the end of the catalogue
		}
		after = skus[len(skus)-1].SKU
		if filtered {
			// Read as far as a page reads: the next goes on from here.
			page.Next = &after
			return page, nil
		}
	}
}

// keep returns the SKU as the page shows it (only its entries at the
// location asked for, if one was), and whether it passes the filters.
func (cq CatalogueQuery) keep(st Stock) (Stock, bool) {
	if st.Bundle != nil {
		return cq.keepBundle(st)
	}
	if cq.Location != "" {
		st.Pools = slices.DeleteFunc(slices.Clone(st.Pools), func(p Pool) bool { return p.Location != cq.Location })
		if len(st.Pools) == 0 {
			return st, false
		}
	}
	return st, cq.matches(st)
}

// matches reports whether a SKU passes the query's filters.
func (cq CatalogueQuery) matches(st Stock) bool {
	low, updated := !cq.LowStock, cq.UpdatedSince == nil
	for _, p := range st.Pools {
		if p.LowThreshold != nil && p.Available <= *p.LowThreshold {
			low = true
		}
		if cq.UpdatedSince != nil && !p.UpdatedAt.Before(*cq.UpdatedSince) {
			updated = true
		}
	}
	return low && updated
}

func catalogueBatch(ctx context.Context, q *db.Queries, cq CatalogueQuery, order map[string]int32) (CataloguePage, error) {
	var named []string
	for _, sku := range cq.SKUs {
		if !slices.Contains(named, sku) {
			named = append(named, sku)
		}
	}
	rows, err := q.StockBatch(ctx, named)
	if err != nil {
		return CataloguePage{}, fmt.Errorf("read SKUs: %w", err)
	}
	page := CataloguePage{SKUs: []Stock{}, Missing: []string{}}
	found := map[string]bool{}
	skus := groupBySKU(rows, order)
	for _, st := range skus {
		found[st.SKU] = true
	}
	var rest []string
	for _, sku := range named {
		if !found[sku] {
			rest = append(rest, sku)
		}
	}
	if skus, err = mergeBundles(ctx, q, skus, rest, false); err != nil {
		return CataloguePage{}, err
	}
	for _, st := range skus {
		found[st.SKU] = true
		if st, ok := cq.keep(st); ok {
			page.SKUs = append(page.SKUs, st)
		}
	}
	for _, sku := range named {
		if !found[sku] {
			page.Missing = append(page.Missing, sku)
		}
	}
	return page, nil
}

// locationOrder is every location's priority, to list a SKU's stock in.
func locationOrder(ctx context.Context, q *db.Queries) (map[string]int32, error) {
	rows, err := q.LocationsOrder(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the locations: %w", err)
	}
	out := make(map[string]int32, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Priority
	}
	return out, nil
}

// groupBySKU turns stock rows in SKU order into stock views, each SKU's
// entries as GET /v1/skus/{sku} lists them: locations by priority, then
// id; within one, main first, then pools by name.
func groupBySKU(rows []db.Stock, order map[string]int32) []Stock {
	var out []Stock
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].SKU != r.Sku {
			out = append(out, Stock{SKU: r.Sku})
		}
		last := &out[len(out)-1]
		last.Pools = append(last.Pools, newPool(r))
	}
	for i := range out {
		slices.SortStableFunc(out[i].Pools, func(a, b Pool) int {
			if c := cmp.Compare(order[a.Location], order[b.Location]); c != 0 {
				return c
			}
			if c := strings.Compare(a.Location, b.Location); c != 0 {
				return c
			}
			if (a.Pool == MainPool) != (b.Pool == MainPool) {
				if a.Pool == MainPool {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.Pool, b.Pool)
		})
	}
	return out
}

// scanBudget is how many stock rows a filtered catalogue page reads at
// most: CatalogueScan unless the service was given another.
func (s *Service) scanBudget() int {
	if s.catalogueScan > 0 {
		return s.catalogueScan
	}
	return CatalogueScan
}
