package inventory

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// The decisions are pure: these tests need no database (go test
// ./app/inventory -run Decide).

func row(available int64) lockedRow { return lockedRow{available: available, status: StockOnSale} }

func holdOf(items ...Item) hold {
	return hold{lines: HoldRequest{Items: items}.lines(MainPool)}
}

func capped(max int64, items ...Item) hold {
	h := hold{req: HoldRequest{Campaign: "bf"}, lines: HoldRequest{Items: items}.lines("bf"), maxPerOrder: &max}
	return h
}

func granted() verdict { return verdict{granted: true} }

func refusedOn(sku, pool string, q int64, why domain.Code, left int64) verdict {
	return verdict{line: Line{SKU: sku, Pool: pool, Quantity: q}, why: why, left: left}
}

func TestDecideHolds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		rows     map[string]lockedRow
		holds    []hold
		verdicts []verdict
		taken    map[string]int64
	}{
		{
			name:     "exact fit",
			rows:     map[string]lockedRow{rowKey("A1", "main"): row(3)},
			holds:    []hold{holdOf(Item{SKU: "A1", Quantity: 3})},
			verdicts: []verdict{granted()},
			taken:    map[string]int64{rowKey("A1", "main"): 3},
		},
		{
			name: "running balance across the batch: each hold sees what the earlier ones left",
			rows: map[string]lockedRow{rowKey("A1", "main"): row(5)},
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 2}), holdOf(Item{SKU: "A1", Quantity: 1}),
			},
			verdicts: []verdict{granted(), granted(), refusedOn("A1", "main", 2, domain.CodeOutOfStock, 1), granted()},
			taken:    map[string]int64{rowKey("A1", "main"): 5},
		},
		{
			name: "multi-line is all or nothing: a refused hold takes nothing from its lines that fit",
			rows: map[string]lockedRow{rowKey("A1", "main"): row(5), rowKey("B2", "main"): row(1)},
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 4}, Item{SKU: "B2", Quantity: 2}),
				holdOf(Item{SKU: "A1", Quantity: 5}),
			},
			verdicts: []verdict{refusedOn("B2", "main", 2, domain.CodeOutOfStock, 1), granted()},
			taken:    map[string]int64{rowKey("A1", "main"): 5},
		},
		{
			name: "refused on its first line in lock order that does not fit",
			rows: map[string]lockedRow{rowKey("A1", "main"): row(0), rowKey("B2", "main"): row(0)},
			holds: []hold{
				holdOf(Item{SKU: "B2", Quantity: 1}, Item{SKU: "A1", Quantity: 1}),
			},
			verdicts: []verdict{refusedOn("A1", "main", 1, domain.CodeOutOfStock, 0)},
			taken:    map[string]int64{},
		},
		{
			name: "paused pool and unknown SKU",
			rows: map[string]lockedRow{rowKey("A1", "main"): {available: 10, status: StockPaused}, rowKey("B2", "main"): row(10)},
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 1}),
				holdOf(Item{SKU: "B2", Quantity: 1}, Item{SKU: "ZZ", Quantity: 1}),
				holdOf(Item{SKU: "B2", Quantity: 1}),
			},
			verdicts: []verdict{
				refusedOn("A1", "main", 1, domain.CodeSKUPaused, 0),
				refusedOn("ZZ", "main", 1, domain.CodeUnknownSKU, 0),
				granted(),
			},
			taken: map[string]int64{rowKey("B2", "main"): 1},
		},
		{
			name: "campaign cap per order, on the units of one SKU summed",
			rows: map[string]lockedRow{rowKey("A1", "bf"): row(10)},
			holds: []hold{
				capped(3, Item{SKU: "A1", Quantity: 2}, Item{SKU: "A1", Quantity: 2}),
				capped(3, Item{SKU: "A1", Quantity: 3}),
			},
			verdicts: []verdict{refusedOn("A1", "bf", 4, domain.CodeLimitExceeded, 3), granted()},
			taken:    map[string]int64{rowKey("A1", "bf"): 3},
		},
		{
			name: "the same SKU twice in one request counts as one line of the sum",
			rows: map[string]lockedRow{rowKey("A1", "main"): row(3)},
			holds: []hold{
				holdOf(Item{SKU: "A1", Quantity: 2}, Item{SKU: "A1", Quantity: 2}),
				holdOf(Item{SKU: "A1", Quantity: 1}, Item{SKU: "A1", Quantity: 2}),
			},
			verdicts: []verdict{refusedOn("A1", "main", 4, domain.CodeOutOfStock, 3), granted()},
			taken:    map[string]int64{rowKey("A1", "main"): 3},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			verdicts, taken := decideHolds(c.rows, c.holds)
			require.Equal(t, c.verdicts, verdicts)
			require.Equal(t, c.taken, taken)
		})
	}
}

func locked(status string, due bool, lines ...Line) *lockedHold {
	return &lockedHold{row: db.Reservation{ID: uuid.Nil, Status: status, ExpiresAt: time.Time{}}, due: due, lines: lines}
}

func TestDecideChanges(t *testing.T) {
	t.Parallel()
	a1, b2 := Line{SKU: "A1", Pool: "main", Quantity: 3}, Line{SKU: "B2", Pool: "main", Quantity: 2}
	confirm := Release{Status: StatusConfirmed, Kind: "confirm", Actor: "shop"}
	cancel := Release{Status: StatusReleased, Kind: "release", Actor: "shop", Reason: "cancelled"}
	rollback := Release{Status: StatusReleased, Kind: "rollback", Actor: "alice", Reason: "bad orders"}
	part := func(give map[string]int64) Release {
		g := map[string]giveBack{}
		for sku, n := range give {
			g[sku] = giveBack{quantity: n}
		}
		return Release{Kind: "release", Actor: "shop", Reason: "one less", give: g}
	}
	seats := Line{SKU: "S1", Pool: "main", Quantity: 3, Units: []string{"A-1", "A-2", "A-3"}}
	partUnits := func(units ...string) Release {
		return Release{Kind: "release", Actor: "shop", Reason: "one less", give: map[string]giveBack{"S1": {units: units}}}
	}
	for _, c := range []struct {
		name string
		how  Release
		hold *lockedHold
		want *holdChange // nil: no change
		err  domain.Code
	}{
		{"confirm a held hold sells all its lines", confirm, locked(StatusHeld, false, a1, b2),
			&holdChange{how: confirm, lines: []Line{a1, b2}}, ""},
		{"a hold no longer held is left alone", confirm, locked(StatusReleased, false, a1), nil, ""},
		{"confirmed is left alone by a release", cancel, locked(StatusConfirmed, false, a1), nil, ""},
		{"a late confirm expires the hold", confirm, locked(StatusHeld, true, a1),
			&holdChange{how: Release{Status: StatusExpired, Kind: "expire", Actor: "system:confirm", Reason: "hold expired before payment was confirmed"}, lines: []Line{a1}}, ""},
		{"a late release expires the hold", cancel, locked(StatusHeld, true, a1),
			&holdChange{how: Release{Status: StatusExpired, Kind: "expire", Actor: "system:release", Reason: "hold expired before it was released"}, lines: []Line{a1}}, ""},
		{"a late rollback expires the hold", rollback, locked(StatusHeld, true, a1, b2),
			&holdChange{how: Release{Status: StatusExpired, Kind: "expire", Actor: "system:rollback", Reason: "hold expired before it was rolled back"}, lines: []Line{a1, b2}}, ""},
		{"expiry takes a due hold", releaseByExpiry, locked(StatusHeld, true, a1), &holdChange{how: releaseByExpiry, lines: []Line{a1}}, ""},
		{"expiry leaves a hold not yet due", releaseByExpiry, locked(StatusHeld, false, a1), nil, ""},
		{"a partial release gives back some units of a line", part(map[string]int64{"A1": 1}), locked(StatusHeld, false, a1, b2),
			&holdChange{how: Release{Status: StatusHeld, Kind: "release_partial", Actor: "shop", Reason: "one less"}, lines: []Line{{SKU: "A1", Pool: "main", Quantity: 1}}}, ""},
		{"a partial release of everything releases the hold whole", part(map[string]int64{"A1": 3, "B2": 2}), locked(StatusHeld, false, a1, b2),
			&holdChange{how: Release{Status: StatusReleased, Kind: "release", Actor: "shop", Reason: "one less"}, lines: []Line{a1, b2}}, ""},
		{"a late partial release expires the hold", part(map[string]int64{"A1": 1}), locked(StatusHeld, true, a1, b2),
			&holdChange{how: Release{Status: StatusExpired, Kind: "expire", Actor: "system:release", Reason: "hold expired before it was partly released"}, lines: []Line{a1, b2}}, ""},
		{"a partial release of more than held is refused", part(map[string]int64{"A1": 4}), locked(StatusHeld, false, a1), nil, domain.CodeInvalid},
		{"a partial release by units gives back exactly those units", partUnits("A-3", "A-1"), locked(StatusHeld, false, seats, b2),
			&holdChange{how: Release{Status: StatusHeld, Kind: "release_partial", Actor: "shop", Reason: "one less"},
				lines: []Line{{SKU: "S1", Pool: "main", Quantity: 2, Units: []string{"A-1", "A-3"}}}}, ""},
		{"a partial release of every unit releases the hold whole", partUnits("A-1", "A-2", "A-3"), locked(StatusHeld, false, seats),
			&holdChange{how: Release{Status: StatusReleased, Kind: "release", Actor: "shop", Reason: "one less"}, lines: []Line{seats}}, ""},
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
	h := hold{lines: req.lines(MainPool)}
	for sku, a := range asks {
		if h.asks == nil {
			h.asks = map[string]unitAsk{}
		}
		h.asks[rowKey(sku, MainPool)] = a
	}
	return h
}

func TestDecideUnits(t *testing.T) {
	t.Parallel()
	// Row A, seats 1 to 6; seat 2 is held already.
	named := map[string]namedUnit{}
	for _, id := range []string{"A-1", "A-3", "A-4", "A-5", "A-6"} {
		named[id] = namedUnit{pool: MainPool, status: UnitAvailable}
	}
	named["A-2"] = namedUnit{pool: MainPool, status: UnitHeld}
	units := &poolUnits{
		named: named,
		free:  []string{"A-1", "A-3", "A-4", "A-5", "A-6"},
		runs:  map[int64][][]string{2: {{"A-3", "A-4", "A-5", "A-6"}}},
	}
	rows := map[string]lockedRow{rowKey("S1", MainPool): {available: 5, status: StockOnSale, serialized: true, units: units}}
	holds := []hold{
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-4", "A-3"}}),
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-4", "A-2", "A-5"}}),
		seatsHold(t, Item{SKU: "S1", Quantity: 2, Adjacent: true}),
		seatsHold(t, Item{SKU: "S1", Quantity: 1}),
		seatsHold(t, Item{SKU: "S1", Quantity: 1}),
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-3"}}),
	}
	verdicts, taken := decideHolds(rows, holds)
	k := rowKey("S1", MainPool)
	require.Equal(t, []verdict{
		{granted: true, picked: map[string][]string{k: {"A-3", "A-4"}}},
		{line: Line{SKU: "S1", Pool: MainPool, Quantity: 3}, why: domain.CodeUnitUnavailable, units: []string{"A-2", "A-4"}},
		{granted: true, picked: map[string][]string{k: {"A-5", "A-6"}}},
		{granted: true, picked: map[string][]string{k: {"A-1"}}},
		{line: Line{SKU: "S1", Pool: MainPool, Quantity: 1}, why: domain.CodeOutOfStock, left: 0},
		// Sold out by the batch: a seat named is still told taken.
		{line: Line{SKU: "S1", Pool: MainPool, Quantity: 1}, why: domain.CodeUnitUnavailable, units: []string{"A-3"}},
	}, verdicts)
	require.Equal(t, map[string]int64{k: 5}, taken)

	// Sold out before the batch: a line naming taken seats is told which,
	// whatever the counters say.
	soldOut := map[string]lockedRow{k: {available: 0, status: StockOnSale, serialized: true, units: &poolUnits{
		named: map[string]namedUnit{"A-2": {pool: MainPool, status: UnitHeld}, "A-3": {pool: MainPool, status: UnitSold}},
	}}}
	verdicts, _ = decideHolds(soldOut, []hold{seatsHold(t, Item{SKU: "S1", Units: []string{"A-3", "A-2", "A-9"}})})
	require.Equal(t, []verdict{
		{line: Line{SKU: "S1", Pool: MainPool, Quantity: 3}, why: domain.CodeUnitUnavailable, units: []string{"A-2", "A-3", "A-9"}},
	}, verdicts)

	// A line of a quantity beside a line naming units picks the rest.
	mixed := seatsHold(t, Item{SKU: "S1", Units: []string{"A-6"}}, Item{SKU: "S1", Quantity: 2})
	verdicts, _ = decideHolds(rows, []hold{mixed})
	require.Equal(t, []verdict{{granted: true, picked: map[string][]string{k: {"A-1", "A-3", "A-6"}}}}, verdicts)

	// Adjacent: the first run with room; none left once the run is broken.
	split := map[string]lockedRow{rowKey("S1", MainPool): {available: 5, status: StockOnSale, serialized: true, units: units}}
	verdicts, _ = decideHolds(split, []hold{
		seatsHold(t, Item{SKU: "S1", Units: []string{"A-4"}}),
		seatsHold(t, Item{SKU: "S1", Quantity: 2, Adjacent: true}),
		seatsHold(t, Item{SKU: "S1", Quantity: 2, Adjacent: true}),
	})
	require.Equal(t, map[string][]string{k: {"A-5", "A-6"}}, verdicts[1].picked)
	require.Equal(t, verdict{line: Line{SKU: "S1", Pool: MainPool, Quantity: 2}, why: domain.CodeOutOfStock, left: -1}, verdicts[2])
}
