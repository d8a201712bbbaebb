package inventory

import (
	"cmp"
	"math"
	"slices"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Strategy is how the hold batch allocates a line that names no location
// among the locations of its pool that may take it (decide.go): priority,
// the lowest priority number first; most_stock, the location with the most
// left that fills the line (with split: the most first); nearest, the
// location closest to the hold's ShipTo (locations without coordinates
// after those with). Ties keep priority order, so priority breaks them.
type Strategy string

// The strategies.
const (
	StrategyPriority  Strategy = "priority"
	StrategyMostStock Strategy = "most_stock"
	StrategyNearest   Strategy = "nearest"
)

// Strategies lists every strategy.
var Strategies = []Strategy{StrategyPriority, StrategyMostStock, StrategyNearest}

// ValidStrategy refuses a strategy that is none of Strategies; empty is
// valid (the default).
func ValidStrategy(what string, s Strategy) error {
	if s == "" || slices.Contains(Strategies, s) {
		return nil
	}
	return domain.Invalid("%s must be priority, most_stock or nearest, not %q", what, s)
}

// Coordinates are a point on Earth, in degrees (stock.Coordinates).
type Coordinates = stock.Coordinates

// strategy is the hold's strategy: as asked, else its key's default, else
// the shop's (Hold sets DefaultStrategy to Config.Strategy when the key
// has none), else priority.
func (h hold) strategy() Strategy {
	switch {
	case h.req.Strategy != "":
		return h.req.Strategy
	case h.req.DefaultStrategy != "":
		return h.req.DefaultStrategy
	}
	return StrategyPriority
}

// order returns the eligible rows keys (in priority order) in the order the
// hold's strategy tries them: by what each has left for the hold, most
// first (most_stock), or by distance to its ShipTo, nearest first
// (nearest); a stable sort, so ties keep priority order. It sorts keys,
// which eligible made for it, in place.
func (d *holdDecision) order(keys []string) []string {
	var rank func(k string) float64
	switch d.h.strategy() {
	case StrategyMostStock:
		rank = func(k string) float64 { return -float64(d.left(k)) }
	case StrategyNearest:
		if d.h.req.ShipTo == nil {
			return keys
		}
		rank = func(k string) float64 {
			r := d.st.rows[k]
			if r.latitude == nil || r.longitude == nil {
				return math.Inf(1)
			}
			return stock.DistanceKm(*d.h.req.ShipTo, Coordinates{Latitude: *r.latitude, Longitude: *r.longitude})
		}
	default:
		return keys
	}
	type ranked struct {
		k string
		r float64
	}
	rs := make([]ranked, len(keys))
	for i, k := range keys {
		rs[i] = ranked{k, rank(k)}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return cmp.Compare(a.r, b.r) })
	for i := range rs {
		keys[i] = rs[i].k
	}
	return keys
}
