package inventory

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/stock"
)

// TestPlacePicks is which rows a batch locks of a pool memory has figures
// for, without a database: the location each plain line's strategy picks
// on memory's figures (less what the batch's earlier lines picked there),
// and the whole pool (no pick) for a line memory cannot fill, a line that
// is not plain (split, partial, a customer's, sent on by a refusal), an
// entry past its trust or read before one of the instance's writes.
func TestPlacePicks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// paris (priority 1, 5 left), lyon (2, 9) and berlin (2, 7).
	entry := func() *placeEntry {
		paris, lyon, berlin := rowAt("A1", "paris", stock.MainPool, 5, 1), rowAt("A1", "lyon", stock.MainPool, 9, 2), rowAt("A1", "berlin", stock.MainPool, 7, 2)
		for _, r := range []*lockedRow{&paris, &lyon, &berlin} {
			lat, lon := 0.0, 0.0
			switch r.location {
			case "paris":
				lat, lon = 48.86, 2.35
			case "lyon":
				lat, lon = 45.76, 4.84
			case "berlin":
				lat, lon = 52.52, 13.40
			}
			r.latitude, r.longitude = &lat, &lon
		}
		return &placeEntry{st: rowsOf(paris, lyon, berlin), readAt: t0, writes: 7}
	}
	call := func(s Strategy, items ...Item) *holdCall {
		h := holdOf(items...)
		h.req.Strategy = s
		if s == StrategyNearest {
			h.req.ShipTo = &Coordinates{Latitude: 43.30, Longitude: 5.37} // marseille: lyon
		}
		return &holdCall{h: h}
	}
	line := func(q int64) Item { return Item{SKU: "A1", Quantity: q} }
	customer := call(StrategyPriority, line(1))
	customer.h.req.CustomerRef = "c-1"
	customerAt := call(StrategyPriority, Item{SKU: "A1", Location: "lyon", Quantity: 1})
	customerAt.h.req.CustomerRef = "c-2"
	sentOn := call(StrategyPriority, line(1))
	sentOn.lockAll = true
	picked := func(locations ...string) map[string][]string {
		return map[string][]string{poolKey("A1", stock.MainPool): locations}
	}
	fresh := soldOutSeen{at: t0.Add(900 * time.Millisecond), writes: 7}

	for _, c := range []struct {
		name    string
		seen    soldOutSeen
		leaders []*holdCall
		want    map[string][]string
	}{
		{"priority: the first that fills", fresh, []*holdCall{call(StrategyPriority, line(2))}, picked("paris")},
		{"priority: ties by location id", fresh, []*holdCall{call(StrategyPriority, line(6))}, picked("berlin")},
		{"most_stock", fresh, []*holdCall{call(StrategyMostStock, line(1))}, picked("lyon")},
		{"nearest", fresh, []*holdCall{call(StrategyNearest, line(1))}, picked("lyon")},
		{"what earlier lines picked counts", fresh,
			[]*holdCall{call(StrategyPriority, line(4)), call(StrategyPriority, line(4)), call(StrategyMostStock, line(3))},
			picked("paris", "berlin", "lyon")},
		{"what batches since the read took counts", fresh, []*holdCall{call(StrategyMostStock, line(1))}, picked("berlin")},
		{"a line memory cannot fill locks every row", fresh, []*holdCall{call(StrategyPriority, line(10))}, nil},
		{"a split line on the pool locks every row", fresh,
			[]*holdCall{call(StrategyPriority, line(1)), call(StrategyPriority, Item{SKU: "A1", Quantity: 2, Split: true})}, nil},
		{"a partial line", fresh, []*holdCall{call(StrategyPriority, Item{SKU: "A1", Quantity: 2, Partial: true, MinQuantity: 1})}, nil},
		{"a customer's hold", fresh, []*holdCall{customer}, nil},
		{"a customer's hold naming its location", fresh, []*holdCall{call(StrategyPriority, line(1)), customerAt}, nil},
		{"a hold a refusal sent on", fresh, []*holdCall{sentOn}, nil},
		{"a line naming its location picks nothing", fresh, []*holdCall{call(StrategyPriority, Item{SKU: "A1", Location: "lyon", Quantity: 1})}, nil},
		{"memory past its trust", soldOutSeen{at: t0.Add(time.Second), writes: 7}, []*holdCall{call(StrategyPriority, line(1))}, nil},
		{"read before a write of the instance", soldOutSeen{at: t0.Add(time.Millisecond), writes: 8}, []*holdCall{call(StrategyPriority, line(1))}, nil},
	} {
		m := newPlaceMemory(time.Second)
		e := entry()
		if c.name == "what batches since the read took counts" {
			e.took = map[string]int64{rowKey("A1", "lyon", stock.MainPool): 3} // lyon 6, berlin 7
		}
		m.pools[poolKey("A1", stock.MainPool)] = e
		got := m.picks(c.leaders, c.seen)
		if len(c.want) == 0 {
			require.Empty(t, got, c.name)
			continue
		}
		require.Equal(t, c.want, got, c.name)
	}
	require.Nil(t, newPlaceMemory(-1).picks([]*holdCall{call(StrategyPriority, line(1))}, fresh), "memory off")
}

// TestPlaceRemember is what a committed batch leaves in memory: a pool it
// locked everywhere at more than one location, less what it granted; the
// rows it picked of a pool in part, updated; nothing of a pool at one
// location, or serialized, or with a backorder policy; nothing older
// than what memory has.
func TestPlaceRemember(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := soldOutSeen{at: t0, writes: 3}
	serialized := rowAt("S1", "lyon", stock.MainPool, 4, 2)
	serialized.serialized = true
	promising := rowAt("P1", "lyon", stock.MainPool, 4, 2)
	promising.promise = &rowPromise{}
	st := rowsOf(rowAt("A1", "paris", stock.MainPool, 5, 1), rowAt("A1", "lyon", stock.MainPool, 9, 2),
		rowAt("B1", "paris", stock.MainPool, 5, 1),
		rowAt("S1", "paris", stock.MainPool, 5, 1), serialized,
		rowAt("P1", "paris", stock.MainPool, 5, 1), promising)
	taken := map[string]int64{rowKey("A1", "paris", stock.MainPool): 2}
	everywhere := map[string]bool{}
	for _, sku := range []string{"A1", "B1", "S1", "P1"} {
		everywhere[poolKey(sku, stock.MainPool)] = true
	}
	m := newPlaceMemory(time.Second)
	m.remember(seen, st, taken, everywhere, nil)
	require.Len(t, m.pools, 1, "only A1: B1 is at one location, S1 serialized, P1 promising")
	e := m.pools[poolKey("A1", stock.MainPool)]
	require.Equal(t, t0, e.readAt)
	require.Equal(t, uint64(3), e.writes)
	left := func() map[string]int64 {
		out := map[string]int64{}
		for k, r := range e.st.rows {
			out[r.location] = r.available - e.took[k]
		}
		return out
	}
	require.Equal(t, map[string]int64{"paris": 3, "lyon": 9}, left())

	// A later batch that locked lyon only, and took 4 there.
	later := soldOutSeen{at: t0.Add(100 * time.Millisecond), writes: 3}
	m.remember(later, rowsOf(rowAt("A1", "lyon", stock.MainPool, 8, 2)), map[string]int64{rowKey("A1", "lyon", stock.MainPool): 4}, nil,
		map[string][]string{poolKey("A1", stock.MainPool): {"lyon"}})
	require.Equal(t, map[string]int64{"paris": 3, "lyon": 4}, left())
	require.Equal(t, t0, e.readAt, "the entry's trust still runs from the read of every row")

	// A batch whose read began before the entry's changes nothing.
	m.remember(soldOutSeen{at: t0.Add(-time.Millisecond), writes: 3}, rowsOf(rowAt("A1", "paris", stock.MainPool, 1, 1), rowAt("A1", "lyon", stock.MainPool, 1, 2)),
		nil, map[string]bool{poolKey("A1", stock.MainPool): true}, nil)
	require.Equal(t, t0, m.pools[poolKey("A1", stock.MainPool)].readAt)

	m.forget([]string{poolKey("A1", stock.MainPool)})
	require.Empty(t, m.pools)
}

// TestPlaceMemoryFull: a full memory remembers no new pool while its
// entries are trusted, sweeps the stale ones once they are not, and
// sweeps at most four times per trust.
func TestPlaceMemoryFull(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newPlaceMemory(time.Second)
	for i := range placeMemoryMax {
		m.pools[poolKey(fmt.Sprintf("F%d", i), stock.MainPool)] = &placeEntry{readAt: t0.Add(time.Duration(i%2) * time.Second)}
	}
	everywhere := map[string]bool{poolKey("NEW", stock.MainPool): true}
	st := rowsOf(rowAt("NEW", "paris", stock.MainPool, 5, 1), rowAt("NEW", "lyon", stock.MainPool, 5, 2))
	remembered := func(at time.Time) bool {
		m.remember(soldOutSeen{at: at}, st, nil, everywhere, nil)
		_, ok := m.pools[poolKey("NEW", stock.MainPool)]
		return ok
	}
	require.False(t, remembered(t0.Add(900*time.Millisecond)), "every entry trusted: no room")
	require.Len(t, m.pools, placeMemoryMax)
	require.False(t, remembered(t0.Add(1050*time.Millisecond)), "half the entries stale, but swept 150 ms ago: no sweep yet")
	require.Len(t, m.pools, placeMemoryMax)
	require.True(t, remembered(t0.Add(1200*time.Millisecond)), "swept: the stale half dropped")
	require.Len(t, m.pools, placeMemoryMax/2+1)
}

// BenchmarkPlacePicks is what picking from memory costs a batch of 20
// holds over 20 pools at three locations, by strategy: the work a batch
// adds to lock one row per line instead of three.
func BenchmarkPlacePicks(b *testing.B) {
	spots := []Coordinates{{Latitude: 48.86, Longitude: 2.35}, {Latitude: 45.76, Longitude: 4.84}, {Latitude: 52.52, Longitude: 13.40}}
	t0 := time.Now()
	for _, s := range Strategies {
		b.Run(string(s), func(b *testing.B) {
			m := newPlaceMemory(time.Hour)
			var leaders []*holdCall
			for i := range 20 {
				sku := fmt.Sprintf("loc-%05d", i)
				var rows []lockedRow
				for l := range 3 {
					r := rowAt(sku, fmt.Sprintf("wh-%d", l+1), stock.MainPool, 1_000_000, int32(l+1))
					r.latitude, r.longitude = &spots[l].Latitude, &spots[l].Longitude
					rows = append(rows, r)
				}
				m.pools[poolKey(sku, stock.MainPool)] = &placeEntry{st: newStockRows(rows), readAt: t0}
				h := holdOf(Item{SKU: sku, Quantity: 1})
				h.req.Strategy = s
				if s == StrategyNearest {
					h.req.ShipTo = &Coordinates{Latitude: 43.30, Longitude: 5.37}
				}
				leaders = append(leaders, &holdCall{h: h})
			}
			seen := soldOutSeen{at: t0}
			b.ReportAllocs()
			for b.Loop() {
				if len(m.picks(leaders, seen)) != 20 {
					b.Fatal("not every pool picked")
				}
			}
		})
	}
}
