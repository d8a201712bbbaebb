package inventory

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// The decisions are pure: these tests need no database (go test
// ./app/inventory -run Decide).

const def = stock.DefaultLocation

// rowAt is a row of sku's pool at location, on sale, its location active with
// priority.
func rowAt(sku, location, pool string, available int64, priority int32) lockedRow {
	return lockedRow{sku: sku, location: location, pool: pool, available: available, status: stock.StockOnSale, active: true, priority: priority}
}

// row is a row of sku's main pool at the default location.
func row(sku string, available int64) lockedRow { return rowAt(sku, def, stock.MainPool, available, 0) }

func rowsOf(rows ...lockedRow) stockRows { return newStockRows(rows) }

func holdOf(items ...Item) hold {
	return hold{wants: HoldRequest{Items: items}.wants(stock.MainPool)}
}

func capped(max int64, items ...Item) hold {
	h := hold{req: HoldRequest{Campaign: "bf"}, wants: HoldRequest{Items: items}.wants("bf"), maxPerOrder: &max}
	return h
}

// granted is the verdict of a hold granted with lines (sku, location,
// quantity) on main.
func granted(lines ...Line) verdict { return verdict{granted: true, lines: lines} }

func on(sku, location string, q int64) Line {
	return Line{SKU: sku, Location: location, Pool: stock.MainPool, Quantity: q}
}

func refusedOn(sku, pool string, q int64, why domain.Code, left int64) verdict {
	return verdict{line: want{SKU: sku, Pool: pool, Quantity: q}, why: why, left: left}
}

func TestDecideHolds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		rows     stockRows
		holds    []hold
		verdicts []verdict
		taken    map[string]int64
	}{
		{
			name:     "exact fit",
			rows:     rowsOf(row("A1", 3)),
			holds:    []hold{holdOf(Item{SKU: "A1", Quantity: 3})},
			verdicts: []verdict{granted(on("A1", def, 3))},
			taken:    map[string]int64{rowKey("A1", def, "main"): 3},
		},
		{
			name: "running balance across the batch: each hold sees what the earlier ones left",
			rows: rowsOf(row("A1", 5)),
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 1}),
			},
			verdicts: []verdict{granted(on("A1", def, 2)), granted(on("A1", def, 2)), refusedOn("A1", "main", 2, domain.CodeOutOfStock, 1), granted(on("A1", def, 1))},
			taken:    map[string]int64{rowKey("A1", def, "main"): 5},
		},
		{
			name: "multi-line is all or nothing: a refused hold takes nothing from its lines that fit",
			rows: rowsOf(row("A1", 5), row("B2", 1)),
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 4}, Item{SKU: "B2", Quantity: 2}),
				holdOf(Item{SKU: "A1", Quantity: 5}),
			},
			verdicts: []verdict{refusedOn("B2", "main", 2, domain.CodeOutOfStock, 1), granted(on("A1", def, 5))},
			taken:    map[string]int64{rowKey("A1", def, "main"): 5},
		},
		{
			name: "refused on its first line in lock order that does not fit",
			rows: rowsOf(row("A1", 0), row("B2", 0)),
			holds: []hold{
				holdOf(Item{SKU: "B2", Quantity: 1}, Item{SKU: "A1", Quantity: 1}),
			},
			verdicts: []verdict{refusedOn("A1", "main", 1, domain.CodeOutOfStock, 0)},
			taken:    map[string]int64{},
		},
		{
			name: "paused pool and unknown SKU",
			rows: rowsOf(lockedRow{sku: "A1", location: def, pool: stock.MainPool, available: 10, status: stock.StockPaused, active: true}, row("B2", 10)),
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 1}),
				holdOf(Item{SKU: "B2", Quantity: 1}, Item{SKU: "ZZ", Quantity: 1}),
				holdOf(Item{SKU: "B2", Quantity: 1}),
			},
			verdicts: []verdict{
				refusedOn("A1", "main", 1, domain.CodeSKUPaused, 0),
				refusedOn("ZZ", "main", 1, domain.CodeUnknownSKU, 0),
				granted(on("B2", def, 1)),
			},
			taken: map[string]int64{rowKey("B2", def, "main"): 1},
		},
		{
			name: "campaign cap per order, on the units of one SKU summed",
			rows: rowsOf(rowAt("A1", def, "bf", 10, 0)),
			holds: []hold{
				capped(3, Item{SKU: "A1", Quantity: 2}, Item{SKU: "A1", Quantity: 2}),
				capped(3, Item{SKU: "A1", Quantity: 3}),
			},
			verdicts: []verdict{refusedOn("A1", "bf", 4, domain.CodeLimitExceeded, 3),
				granted(Line{SKU: "A1", Location: def, Pool: "bf", Quantity: 3})},
			taken: map[string]int64{rowKey("A1", def, "bf"): 3},
		},
		{
			name: "campaign cap per order, on a SKU's units at every location summed",
			rows: rowsOf(rowAt("A1", "paris", "bf", 10, 1), rowAt("A1", "berlin", "bf", 10, 2), rowAt("B2", "paris", "bf", 10, 1)),
			holds: []hold{
				capped(2, Item{SKU: "A1", Quantity: 2, Location: "paris"}, Item{SKU: "A1", Quantity: 2, Location: "berlin"}),
				capped(2, Item{SKU: "A1", Quantity: 1, Location: "paris"}, Item{SKU: "A1", Quantity: 2, Split: true}),
				capped(2, Item{SKU: "A1", Quantity: 1, Location: "paris"}, Item{SKU: "B2", Quantity: 2, Location: "paris"}),
			},
			verdicts: []verdict{{line: want{SKU: "A1", Location: "berlin", Pool: "bf", Quantity: 4}, why: domain.CodeLimitExceeded, left: 2},
				{line: want{SKU: "A1", Pool: "bf", Quantity: 3, Split: true}, why: domain.CodeLimitExceeded, left: 2},
				granted(Line{SKU: "A1", Location: "paris", Pool: "bf", Quantity: 1}, Line{SKU: "B2", Location: "paris", Pool: "bf", Quantity: 2})},
			taken: map[string]int64{rowKey("A1", "paris", "bf"): 1, rowKey("B2", "paris", "bf"): 2},
		},
		{
			name: "the same SKU twice in one request counts as one line of the sum",
			rows: rowsOf(row("A1", 3)),
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 2}, Item{SKU: "A1", Quantity: 2}),
				holdOf(Item{SKU: "A1", Quantity: 1}, Item{SKU: "A1", Quantity: 2}),
			},
			verdicts: []verdict{refusedOn("A1", "main", 4, domain.CodeOutOfStock, 3), granted(on("A1", def, 3))},
			taken:    map[string]int64{rowKey("A1", def, "main"): 3},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			verdicts, taken := decideHolds(c.rows, c.holds)
			require.Equal(t, c.verdicts, withoutPlaces(verdicts))
			require.Equal(t, c.taken, taken)
		})
	}
}

// TestDecideAllocation is the allocation of lines to locations: named, or
// by priority (lowest first, ties by id), the first location that fills the
// whole line, split only when asked, never at an inactive location, one
// whose sales are stopped, or one the key may not use; all or nothing
// across lines, and a running balance across the batch.
func TestDecideAllocation(t *testing.T) {
	t.Parallel()
	// Three warehouses: paris first, then lyon, then berlin (priority 2,
	// tied with lyon, after it by id... berlin < lyon by id, so berlin
	// goes before lyon).
	three := func(paris, lyon, berlin int64) stockRows {
		return rowsOf(rowAt("A1", "paris", stock.MainPool, paris, 1), rowAt("A1", "lyon", stock.MainPool, lyon, 2), rowAt("A1", "berlin", stock.MainPool, berlin, 2))
	}
	bound := func(h hold, locations ...string) hold { h.req.Locations = locations; return h }
	inactive := three(5, 5, 5)
	r := inactive.rows[rowKey("A1", "paris", stock.MainPool)]
	r.active = false
	inactive.rows[rowKey("A1", "paris", stock.MainPool)] = r
	stopped := three(5, 5, 5)
	r = stopped.rows[rowKey("A1", "paris", stock.MainPool)]
	r.stopped = "flood"
	stopped.rows[rowKey("A1", "paris", stock.MainPool)] = r
	pausedFirst := three(5, 5, 5)
	r = pausedFirst.rows[rowKey("A1", "paris", stock.MainPool)]
	r.status = stock.StockPaused
	pausedFirst.rows[rowKey("A1", "paris", stock.MainPool)] = r

	for _, c := range []struct {
		name     string
		rows     stockRows
		holds    []hold
		verdicts []verdict
	}{
		{"lowest priority first", three(5, 5, 5),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2})},
			[]verdict{granted(on("A1", "paris", 2))}},
		{"the first location that fills the whole line; ties by id", three(1, 5, 5),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2})},
			[]verdict{granted(on("A1", "berlin", 2))}},
		{"no one location has it all: out of stock, naming the most one has", three(2, 2, 3),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 4})},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 4}, why: domain.CodeOutOfStock, left: 3}}},
		{"split takes the line from several in priority order", three(2, 2, 3),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 6, Split: true})},
			[]verdict{granted(on("A1", "berlin", 3), on("A1", "lyon", 1), on("A1", "paris", 2))}},
		{"split short of the total is refused", three(2, 2, 3),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 8, Split: true})},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 8, Split: true}, why: domain.CodeOutOfStock, left: 7}}},
		{"a named location is used even when another comes first", three(5, 5, 5),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2, Location: "lyon"})},
			[]verdict{granted(on("A1", "lyon", 2))}},
		{"a named location that lacks it is refused, whoever else has it", three(5, 1, 5),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2, Location: "lyon"})},
			[]verdict{{line: want{SKU: "A1", Location: "lyon", Pool: stock.MainPool, Quantity: 2}, why: domain.CodeOutOfStock, left: 1}}},
		{"an inactive location is skipped", inactive,
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2})},
			[]verdict{granted(on("A1", "berlin", 2))}},
		{"an inactive location named is refused", inactive,
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2, Location: "paris"})},
			[]verdict{{line: want{SKU: "A1", Location: "paris", Pool: stock.MainPool, Quantity: 2}, why: domain.CodeLocationInactive}}},
		{"a location whose sales are stopped is skipped, and refused when named", stopped,
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 2, Location: "paris"})},
			[]verdict{granted(on("A1", "berlin", 2)),
				{line: want{SKU: "A1", Location: "paris", Pool: stock.MainPool, Quantity: 2}, why: domain.CodeStopSale, reason: "flood"}}},
		{"a paused row is skipped", pausedFirst,
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2})},
			[]verdict{granted(on("A1", "berlin", 2))}},
		{"a key bound to locations allocates only there", three(5, 5, 5),
			[]hold{bound(holdOf(Item{SKU: "A1", Quantity: 2}), "lyon"), bound(holdOf(Item{SKU: "A1", Quantity: 9, Split: true}), "lyon", "paris")},
			[]verdict{granted(on("A1", "lyon", 2)),
				{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 9, Split: true}, why: domain.CodeOutOfStock, left: 8}}},
		{"the running balance moves allocation on to the next location", three(3, 5, 0),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 1})},
			[]verdict{granted(on("A1", "paris", 2)), granted(on("A1", "lyon", 2)), granted(on("A1", "paris", 1))}},
		{"a named line and an allocated line of one SKU in one hold share what is left", three(3, 0, 0),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2, Location: "paris"}, Item{SKU: "A1", Quantity: 2})},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 2}, why: domain.CodeOutOfStock, left: 1}}},
		{"all or nothing across lines: a line that cannot be allocated refuses the hold",
			rowsOf(rowAt("A1", "paris", stock.MainPool, 5, 1), rowAt("B2", "lyon", stock.MainPool, 1, 2)),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2}, Item{SKU: "B2", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 5})},
			[]verdict{{line: want{SKU: "B2", Pool: stock.MainPool, Quantity: 2}, why: domain.CodeOutOfStock, left: 1}, granted(on("A1", "paris", 5))}},
		{"a SKU at no active location the key may use is out of stock", three(5, 5, 5),
			[]hold{bound(holdOf(Item{SKU: "A1", Quantity: 1}), "madrid")},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeOutOfStock}}},
		{"a named line and an allocated line landing on one row are one line", three(5, 5, 5),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2, Location: "paris"}, Item{SKU: "A1", Quantity: 1})},
			[]verdict{granted(on("A1", "paris", 3))}},
		{"a named line and a split line over its row are one line there", three(3, 2, 3),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 2, Location: "paris"}, Item{SKU: "A1", Quantity: 6, Split: true})},
			[]verdict{granted(on("A1", "berlin", 3), on("A1", "lyon", 2), on("A1", "paris", 3))}},
		{"the only location stopped: stop_sale, not out of stock", rowsOf(lockedRow{sku: "A1", location: def, pool: stock.MainPool,
			available: 50, status: stock.StockOnSale, active: true, stopped: "stocktake"}),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 1}), holdOf(Item{SKU: "A1", Quantity: 1, Split: true})},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeStopSale, reason: "stocktake", at: def},
				{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 1, Split: true}, why: domain.CodeStopSale, reason: "stocktake", at: def}}},
		{"every location stopped or inactive: stop_sale at the first stopped", func() stockRows {
			rows := three(5, 5, 5)
			for _, loc := range []string{"paris", "lyon"} {
				r := rows.rows[rowKey("A1", loc, stock.MainPool)]
				r.stopped = "flood " + loc
				rows.rows[rowKey("A1", loc, stock.MainPool)] = r
			}
			r := rows.rows[rowKey("A1", "berlin", stock.MainPool)]
			r.active = false
			rows.rows[rowKey("A1", "berlin", stock.MainPool)] = r
			return rows
		}(),
			[]hold{holdOf(Item{SKU: "A1", Quantity: 1}), bound(holdOf(Item{SKU: "A1", Quantity: 1}), "lyon", "berlin")},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeStopSale, reason: "flood paris", at: "paris"},
				{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeStopSale, reason: "flood lyon", at: "lyon"}}},
		{"stopped where the key may not hold is not why: out of stock", stopped,
			[]hold{bound(holdOf(Item{SKU: "A1", Quantity: 1}), "madrid")},
			[]verdict{{line: want{SKU: "A1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeOutOfStock}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			verdicts, _ := decideHolds(c.rows, c.holds)
			require.Equal(t, c.verdicts, withoutPlaces(verdicts))
		})
	}
}

// withoutPlaces is verdicts with places, which only words a refusal,
// left out (TestRefusalPlaces checks it).
func withoutPlaces(vs []verdict) []verdict {
	out := slices.Clone(vs)
	for i := range out {
		out[i].places = 0
	}
	return out
}

// TestRefusalPlaces: a line refused out_of_stock says how many locations
// it could have come from, so that a SKU at one location is refused in
// the words it always was.
func TestRefusalPlaces(t *testing.T) {
	t.Parallel()
	verdicts, _ := decideHolds(rowsOf(row("A1", 1)), []hold{holdOf(Item{SKU: "A1", Quantity: 2})})
	require.Equal(t, 1, verdicts[0].places)
	three := rowsOf(rowAt("A1", "paris", stock.MainPool, 1, 1), rowAt("A1", "lyon", stock.MainPool, 1, 2), rowAt("A1", "berlin", stock.MainPool, 1, 2))
	verdicts, _ = decideHolds(three, []hold{holdOf(Item{SKU: "A1", Quantity: 2})})
	require.Equal(t, 3, verdicts[0].places)
	verdicts, _ = decideHolds(three, []hold{holdOf(Item{SKU: "A1", Quantity: 5, Split: true})})
	require.Equal(t, 3, verdicts[0].places)
}

func locked(status HoldStatus, due bool, lines ...Line) *lockedHold {
	return &lockedHold{row: db.Reservation{ID: uuid.Nil, Status: string(status), ExpiresAt: time.Time{}}, due: due, lines: lines}
}

func TestDecideChanges(t *testing.T) {
	t.Parallel()
	a1, b2 := on("A1", def, 3), on("B2", def, 2)
	confirm := Outcome{Status: StatusConfirmed, Kind: "confirm", Actor: "shop"}
	cancel := Outcome{Status: StatusReleased, Kind: "release", Actor: "shop", Reason: "cancelled"}
	rollback := Outcome{Status: StatusReleased, Kind: "rollback", Actor: "alice", Reason: "bad orders"}
	part := func(give map[string]int64) Outcome {
		g := map[string]giveBack{}
		for sku, n := range give {
			g[giveKey(sku, "")] = giveBack{quantity: n}
		}
		return Outcome{Kind: "release", Actor: "shop", Reason: "one less", give: g}
	}
	seats := Line{SKU: "S1", Location: def, Pool: "main", Quantity: 3, Units: []string{"A-1", "A-2", "A-3"}}
	partUnits := func(units ...string) Outcome {
		return Outcome{Kind: "release", Actor: "shop", Reason: "one less", give: map[string]giveBack{giveKey("S1", ""): {units: units}}}
	}
	a1paris, a1lyon := on("A1", "paris", 2), on("A1", "lyon", 1)
	partAt := func(location string, n int64) Outcome {
		return Outcome{Kind: "release", Actor: "shop", Reason: "one less", give: map[string]giveBack{giveKey("A1", location): {quantity: n}}}
	}
	for _, c := range []struct {
		name string
		how  Outcome
		hold *lockedHold
		want *holdChange // nil: no change
		err  domain.Code
	}{
		{"confirm a held hold sells all its lines", confirm, locked(StatusHeld, false, a1, b2),
			&holdChange{how: confirm, lines: []Line{a1, b2}}, ""},
		{"a hold no longer held is left alone", confirm, locked(StatusReleased, false, a1), nil, ""},
		{"confirmed is left alone by a release", cancel, locked(StatusConfirmed, false, a1), nil, ""},
		{"a late confirm expires the hold", confirm, locked(StatusHeld, true, a1),
			&holdChange{how: Outcome{Status: StatusExpired, Kind: "expire", Actor: "system:confirm", Reason: "hold expired before payment was confirmed"}, lines: []Line{a1}}, ""},
		{"a late release expires the hold", cancel, locked(StatusHeld, true, a1),
			&holdChange{how: Outcome{Status: StatusExpired, Kind: "expire", Actor: "system:release", Reason: "hold expired before it was released"}, lines: []Line{a1}}, ""},
		{"a late rollback expires the hold", rollback, locked(StatusHeld, true, a1, b2),
			&holdChange{how: Outcome{Status: StatusExpired, Kind: "expire", Actor: "system:rollback", Reason: "hold expired before it was rolled back"}, lines: []Line{a1, b2}}, ""},
		{"expiry takes a due hold", releaseByExpiry, locked(StatusHeld, true, a1), &holdChange{how: releaseByExpiry, lines: []Line{a1}}, ""},
		{"expiry leaves a hold not yet due", releaseByExpiry, locked(StatusHeld, false, a1), nil, ""},
		{"a partial release gives back some units of a line", part(map[string]int64{"A1": 1}), locked(StatusHeld, false, a1, b2),
			&holdChange{how: Outcome{Status: StatusHeld, Kind: "release_partial", Actor: "shop", Reason: "one less"}, lines: []Line{on("A1", def, 1)}}, ""},
		{"a partial release of a SKU held at several locations names the location", partAt("paris", 1), locked(StatusHeld, false, a1lyon, a1paris),
			&holdChange{how: Outcome{Status: StatusHeld, Kind: "release_partial", Actor: "shop", Reason: "one less"}, lines: []Line{on("A1", "paris", 1)}}, ""},
		{"a partial release of a SKU held at several locations without one is refused", partAt("", 1), locked(StatusHeld, false, a1lyon, a1paris), nil, domain.CodeInvalid},
		{"a partial release at a location the hold does not hold it is refused", partAt("berlin", 1), locked(StatusHeld, false, a1lyon, a1paris), nil, domain.CodeInvalid},
		{"a partial release of everything releases the hold whole", part(map[string]int64{"A1": 3, "B2": 2}), locked(StatusHeld, false, a1, b2),
			&holdChange{how: Outcome{Status: StatusReleased, Kind: "release", Actor: "shop", Reason: "one less"}, lines: []Line{a1, b2}}, ""},
		{"a late partial release expires the hold", part(map[string]int64{"A1": 1}), locked(StatusHeld, true, a1, b2),
			&holdChange{how: Outcome{Status: StatusExpired, Kind: "expire", Actor: "system:release", Reason: "hold expired before it was partly released"}, lines: []Line{a1, b2}}, ""},
		{"a partial release of more than held is refused", part(map[string]int64{"A1": 4}), locked(StatusHeld, false, a1), nil, domain.CodeInvalid},
		{"a partial release by units gives back exactly those units", partUnits("A-3", "A-1"), locked(StatusHeld, false, seats, b2),
			&holdChange{how: Outcome{Status: StatusHeld, Kind: "release_partial", Actor: "shop", Reason: "one less"},
				lines: []Line{{SKU: "S1", Location: def, Pool: "main", Quantity: 2, Units: []string{"A-1", "A-3"}}}}, ""},
		{"a partial release of every unit releases the hold whole", partUnits("A-1", "A-2", "A-3"), locked(StatusHeld, false, seats),
			&holdChange{how: Outcome{Status: StatusReleased, Kind: "release", Actor: "shop", Reason: "one less"}, lines: []Line{seats}}, ""},
		{"a partial release of a unit the hold does not hold is refused", partUnits("A-1", "B-1"), locked(StatusHeld, false, seats), nil, domain.CodeInvalid},
		{"a partial release of a bare quantity of units is refused", part(map[string]int64{"S1": 1}), locked(StatusHeld, false, seats), nil, domain.CodeInvalid},
		{"a partial release of a SKU the hold does not have is refused", part(map[string]int64{"C3": 1}), locked(StatusHeld, false, a1), nil, domain.CodeInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.how.decide(c.hold)
			if c.err != "" {
				require.ErrorIs(t, err, &domain.Error{Code: c.err})
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// seatsHold is a hold of items on main as Service.Hold builds it.
func seatsHold(t *testing.T, items ...Item) hold {
	t.Helper()
	req := HoldRequest{Items: items}
	asks, err := req.asks()
	require.NoError(t, err)
	h := hold{wants: req.wants(stock.MainPool)}
	for sku, a := range asks {
		if h.asks == nil {
			h.asks = map[string]unitAsk{}
		}
		h.asks[poolKey(sku, stock.MainPool)] = a
	}
	return h
}

func TestDecideUnits(t *testing.T) {
	t.Parallel()
	// Row A, seats 1 to 6; seat 2 is held already.
	named := map[string]namedUnit{}
	for _, id := range []string{"A-1", "A-3", "A-4", "A-5", "A-6"} {
		named[id] = namedUnit{location: def, pool: stock.MainPool, status: stock.UnitAvailable}
	}
	named["A-2"] = namedUnit{location: def, pool: stock.MainPool, status: stock.UnitHeld}
	units := &poolUnits{
		named: named,
		free:  []string{"A-1", "A-3", "A-4", "A-5", "A-6"},
		runs:  map[int64][][]string{2: {{"A-3", "A-4", "A-5", "A-6"}}},
	}
	seatRow := func() stockRows {
		r := row("S1", 5)
		r.serialized, r.units = true, units
		return rowsOf(r)
	}
	rows := seatRow()
	holds := []hold{
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-4", "A-3"}}),
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-4", "A-2", "A-5"}}),
		seatsHold(t, Item{SKU: "S1", Quantity: 2, Adjacent: true}),
		seatsHold(t, Item{SKU: "S1", Quantity: 1}),
		seatsHold(t, Item{SKU: "S1", Quantity: 1}),
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-3"}}),
	}
	verdicts, taken := decideHolds(rows, holds)
	k := rowKey("S1", def, stock.MainPool)
	seatsGranted := func(q int64, ids ...string) verdict {
		return verdict{granted: true, lines: []Line{on("S1", def, q)}, picked: map[string][]string{k: ids}}
	}
	require.Equal(t, []verdict{
		seatsGranted(2, "A-3", "A-4"),
		{line: want{SKU: "S1", Pool: stock.MainPool, Quantity: 3}, why: domain.CodeUnitUnavailable, units: []string{"A-2", "A-4"}},
		seatsGranted(2, "A-5", "A-6"),
		seatsGranted(1, "A-1"),
		{line: want{SKU: "S1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeOutOfStock, left: 0, places: 1},
		// Sold out by the batch: a seat named is still told taken.
		{line: want{SKU: "S1", Pool: stock.MainPool, Quantity: 1}, why: domain.CodeUnitUnavailable, units: []string{"A-3"}},
	}, verdicts)
	require.Equal(t, map[string]int64{k: 5}, taken)

	// Sold out before the batch: a line naming taken seats is told which,
	// whatever the counters say.
	gone := row("S1", 0)
	gone.serialized, gone.units = true, &poolUnits{named: map[string]namedUnit{
		"A-2": {location: def, pool: stock.MainPool, status: stock.UnitHeld}, "A-3": {location: def, pool: stock.MainPool, status: stock.UnitSold}}}
	verdicts, _ = decideHolds(rowsOf(gone), []hold{seatsHold(t, Item{SKU: "S1", Units: []string{"A-3", "A-2", "A-9"}})})
	require.Equal(t, []verdict{
		{line: want{SKU: "S1", Pool: stock.MainPool, Quantity: 3}, why: domain.CodeUnitUnavailable, units: []string{"A-2", "A-3", "A-9"}},
	}, verdicts)

	// A line of a quantity beside a line naming units picks the rest.
	mixed := seatsHold(t, Item{SKU: "S1", Units: []string{"A-6"}}, Item{SKU: "S1", Quantity: 2})
	verdicts, _ = decideHolds(seatRow(), []hold{mixed})
	require.Equal(t, []verdict{seatsGranted(3, "A-1", "A-3", "A-6")}, verdicts)

	// Two quantity lines, one naming the pool's location, one allocated:
	// one line of both, with as many different seats.
	twice := seatsHold(t, Item{SKU: "S1", Quantity: 1, Location: def}, Item{SKU: "S1", Quantity: 2})
	verdicts, taken = decideHolds(seatRow(), []hold{twice})
	require.Equal(t, []verdict{seatsGranted(3, "A-1", "A-3", "A-4")}, verdicts)
	require.Equal(t, map[string]int64{k: 3}, taken)

	// Adjacent: the first run with room; none left once the run is broken.
	verdicts, _ = decideHolds(seatRow(), []hold{
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-4"}}),
		seatsHold(t, Item{SKU: "S1", Quantity: 2, Adjacent: true}),
		seatsHold(t, Item{SKU: "S1", Quantity: 2, Adjacent: true}),
	})
	require.Equal(t, map[string][]string{k: {"A-5", "A-6"}}, verdicts[1].picked)
	require.Equal(t, verdict{line: want{SKU: "S1", Pool: stock.MainPool, Quantity: 2}, why: domain.CodeOutOfStock, left: -1}, verdicts[2])
}

// TestEnoughRuns: the first read of windows takes one more than the units
// a batch picks without naming them, plus a unit of room for every eight
// named; it is enough when as many windows as that name none of the named
// units, or when the pool had no more.
func TestEnoughRuns(t *testing.T) {
	t.Parallel()
	// Sixteen seats named, two together: 2 + 1 + 16/8 = 5 windows first,
	// 16 + 2 + 1 = 19 when they are not enough.
	n := &unitNeed{sku: "S1", pool: stock.MainPool, runs: []int64{2}, most: 18}
	for p := 1; p <= 16; p++ {
		n.named = append(n.named, "A-"+strconv.Itoa(p*2))
	}
	require.Equal(t, int32(5), n.runsLim(false))
	require.Equal(t, int32(19), n.runsLim(true))

	windows := func(ids ...string) *poolUnits {
		u := &poolUnits{runs: map[int64][][]string{}}
		for i := 0; i+1 < len(ids); i += 2 {
			u.runs[2] = append(u.runs[2], []string{ids[i], ids[i+1]})
		}
		return u
	}
	require.True(t, n.enoughRuns(windows("B-1", "B-2", "B-3", "B-4", "B-5", "B-6", "A-2", "A-3", "A-4", "A-5")),
		"three of five windows name no named seat: one for the pair, one each for two units the others could pick")
	require.False(t, n.enoughRuns(windows("B-1", "B-2", "B-3", "B-4", "A-1", "A-2", "A-3", "A-4", "A-5", "A-6")),
		"two clean windows of five: the pair may find none")
	require.True(t, n.enoughRuns(windows("A-1", "A-2", "A-3", "A-4")), "fewer windows than asked: the pool has no more")

	// Nothing named: the first read takes them all.
	unnamed := &unitNeed{sku: "S1", pool: stock.MainPool, runs: []int64{2}, most: 3}
	require.Equal(t, int32(4), unnamed.runsLim(false))
	require.True(t, unnamed.enoughRuns(windows("A-1", "A-2", "A-3", "A-4", "A-5", "A-6", "A-7", "A-8")))
}
