package inventory

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// TestDecideStrategies is the allocation of a line that names no location
// by each strategy, with split and without, without a database: priority
// takes the lowest priority number first; most_stock the location with
// the most left that fills the line (split: the most first); nearest the
// location closest to ship_to, those without coordinates last; ties keep
// priority order. What earlier holds of the batch took counts, and a
// named line is where it says whatever the strategy.
func TestDecideStrategies(t *testing.T) {
	t.Parallel()
	// paris (priority 1, 48.86N 2.35E), lyon (2, 45.76N 4.84E) and
	// berlin (2, 52.52N 13.40E; before lyon by id); madrid (3) has no
	// coordinates.
	at := func(location string, available int64, priority int32, lat, lon float64) lockedRow {
		r := rowAt("A1", location, stock.MainPool, available, priority)
		if !math.IsNaN(lat) {
			r.latitude, r.longitude = &lat, &lon
		}
		return r
	}
	four := func(paris, lyon, berlin, madrid int64) stockRows {
		return rowsOf(at("paris", paris, 1, 48.86, 2.35), at("lyon", lyon, 2, 45.76, 4.84), at("berlin", berlin, 2, 52.52, 13.40),
			at("madrid", madrid, 3, math.NaN(), 0))
	}
	marseille := &Coordinates{Latitude: 43.30, Longitude: 5.37}
	hamburg := &Coordinates{Latitude: 53.55, Longitude: 9.99}
	by := func(s Strategy, ship *Coordinates, items ...Item) hold {
		h := holdOf(items...)
		h.req.Strategy, h.req.ShipTo = s, ship
		return h
	}
	keyDefault := func(s Strategy, items ...Item) hold {
		h := holdOf(items...)
		h.req.DefaultStrategy = s
		return h
	}
	line := func(q int64) Item { return Item{SKU: "A1", Quantity: q} }
	split := func(q int64) Item { return Item{SKU: "A1", Quantity: q, Split: true} }

	for _, c := range []struct {
		name     string
		rows     stockRows
		holds    []hold
		verdicts []verdict
	}{
		{"priority: the lowest priority number that fills the line", four(5, 9, 9, 20),
			[]hold{by(StrategyPriority, nil, line(2))},
			[]verdict{granted(on("A1", "paris", 2))}},
		{"no strategy is priority", four(5, 9, 9, 20),
			[]hold{holdOf(line(2))},
			[]verdict{granted(on("A1", "paris", 2))}},
		{"most_stock: the most left", four(5, 9, 7, 20),
			[]hold{by(StrategyMostStock, nil, line(2))},
			[]verdict{granted(on("A1", "madrid", 2))}},
		{"most_stock: ties by priority", four(5, 9, 9, 1),
			[]hold{by(StrategyMostStock, nil, line(2))},
			[]verdict{granted(on("A1", "berlin", 2))}},
		{"most_stock: what earlier holds of the batch took counts", four(5, 9, 8, 1),
			[]hold{by(StrategyMostStock, nil, line(2)), by(StrategyMostStock, nil, line(2)), by(StrategyMostStock, nil, line(2))},
			[]verdict{granted(on("A1", "lyon", 2)), granted(on("A1", "berlin", 2)), granted(on("A1", "lyon", 2))}},
		{"most_stock split: the most first", four(3, 4, 2, 1),
			[]hold{by(StrategyMostStock, nil, split(6))},
			[]verdict{granted(on("A1", "lyon", 4), on("A1", "paris", 2))}},
		{"most_stock short everywhere: out of stock with the most one has", four(3, 4, 2, 1),
			[]hold{by(StrategyMostStock, nil, line(5))},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 5}, why: domain.CodeOutOfStock, left: 4}}},
		{"nearest: the closest that fills the line", four(5, 5, 5, 5),
			[]hold{by(StrategyNearest, marseille, line(2)), by(StrategyNearest, hamburg, line(2))},
			[]verdict{granted(on("A1", "lyon", 2)), granted(on("A1", "berlin", 2))}},
		{"nearest: the next closest when the closest cannot fill it", four(5, 1, 5, 5),
			[]hold{by(StrategyNearest, marseille, line(2))},
			[]verdict{granted(on("A1", "paris", 2))}},
		{"nearest: a location without coordinates comes last", four(0, 0, 0, 5),
			[]hold{by(StrategyNearest, marseille, line(2))},
			[]verdict{granted(on("A1", "madrid", 2))}},
		{"nearest split: the closest first", four(2, 1, 5, 5),
			[]hold{by(StrategyNearest, marseille, split(4))},
			[]verdict{granted(on("A1", "berlin", 1), on("A1", "lyon", 1), on("A1", "paris", 2))}},
		{"nearest: ties (one place) by priority", rowsOf(at("b", 5, 2, 50, 8), at("a", 5, 2, 50, 8), at("c", 5, 1, 50, 8)),
			[]hold{by(StrategyNearest, hamburg, line(1))},
			[]verdict{granted(Line{SKU: "A1", Location: "c", Pool: stock.MainPool, Quantity: 1})}},
		{"the key's default applies when the hold names none", four(5, 9, 7, 20),
			[]hold{keyDefault(StrategyMostStock, line(2)), func() hold { h := keyDefault(StrategyMostStock, line(2)); h.req.Strategy = StrategyPriority; return h }()},
			[]verdict{granted(on("A1", "madrid", 2)), granted(on("A1", "paris", 2))}},
		{"a named line stays where it is named", four(5, 9, 7, 20),
			[]hold{by(StrategyMostStock, nil, Item{SKU: "A1", Quantity: 2, Location: "paris"}), by(StrategyNearest, hamburg, Item{SKU: "A1", Quantity: 1, Location: "lyon"})},
			[]verdict{granted(on("A1", "paris", 2)), granted(on("A1", "lyon", 1))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			verdicts, _ := decideHolds(c.rows, c.holds)
			require.Equal(t, c.verdicts, withoutPlaces(verdicts))
		})
	}
}

// TestDistance: the great-circle distance of two known pairs of cities,
// within a kilometre or two.
func TestDistance(t *testing.T) {
	t.Parallel()
	paris := Coordinates{Latitude: 48.8566, Longitude: 2.3522}
	berlin := Coordinates{Latitude: 52.52, Longitude: 13.405}
	sydney := Coordinates{Latitude: -33.8688, Longitude: 151.2093}
	require.InDelta(t, 878, stock.DistanceKm(paris, berlin), 2)
	require.InDelta(t, 16960, stock.DistanceKm(paris, sydney), 20)
	require.InDelta(t, 0, stock.DistanceKm(paris, paris), 1e-9)
}

// TestStrategyValidation: a strategy that is not one, nearest without
// ship_to, and coordinates out of range are refused; the rest pass.
func TestStrategyValidation(t *testing.T) {
	t.Parallel()
	req := func(s Strategy, ship *Coordinates) HoldRequest {
		return HoldRequest{Items: []Item{{SKU: "A1", Quantity: 1}}, Strategy: s, ShipTo: ship}
	}
	for _, bad := range []HoldRequest{
		req("closest", nil), req(StrategyNearest, nil), req(StrategyNearest, &Coordinates{Latitude: 91}),
		req(StrategyNearest, &Coordinates{Longitude: -180.5}), req("", &Coordinates{Latitude: math.NaN()}),
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
	for _, good := range []HoldRequest{
		req("", nil), req(StrategyPriority, nil), req(StrategyMostStock, nil), req(StrategyNearest, &Coordinates{Latitude: -90, Longitude: 180}),
		req(StrategyPriority, &Coordinates{Latitude: 10, Longitude: 10}),
	} {
		require.NoError(t, good.Validate(), "%+v", good)
	}
}

// BenchmarkDecideByStrategy is the decision of a hold batch of 20
// single-unit holds, each on its own SKU, by each strategy, the SKUs at
// one location or at three (the bench's locations scenario): what
// allocation costs in Go, beside the batch's round trips.
func BenchmarkDecideByStrategy(b *testing.B) {
	spots := []Coordinates{{Latitude: 48.86, Longitude: 2.35}, {Latitude: 45.76, Longitude: 4.84}, {Latitude: 52.52, Longitude: 13.40}}
	for _, s := range Strategies {
		for _, places := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/%d-locations", s, places), func(b *testing.B) {
				var rows []lockedRow
				var holds []hold
				for i := range 20 {
					sku := fmt.Sprintf("loc-%05d", i)
					for l := range places {
						r := rowAt(sku, fmt.Sprintf("wh-%d", l+1), stock.MainPool, 1_000_000, int32(l+1))
						r.latitude, r.longitude = &spots[l].Latitude, &spots[l].Longitude
						rows = append(rows, r)
					}
					h := holdOf(Item{SKU: sku, Quantity: 1})
					h.req.Strategy = s
					if s == StrategyNearest {
						h.req.ShipTo = &Coordinates{Latitude: 43.30, Longitude: 5.37}
					}
					holds = append(holds, h)
				}
				st := newStockRows(rows)
				b.ReportAllocs()
				for b.Loop() {
					decideHolds(st, holds)
				}
			})
		}
	}
}
