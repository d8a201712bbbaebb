package inventory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// lowsOf is the stock.low events of sku in the feed from the start.
func lowsOf(t *testing.T, pool *pgxpool.Pool, sku string) []events.Event {
	t.Helper()
	eventstest.WaitServed(t, pool)
	var out []events.Event
	for _, e := range eventstest.ReadAll(t, pool, events.Start) {
		if e.Type == events.StockLow && e.SKU == sku {
			out = append(out, e)
		}
	}
	return out
}

func setBundleThreshold(t *testing.T, svc *inventory.Service, sku string, threshold int64) stock.Stock {
	t.Helper()
	st, err := svc.SetThreshold(context.Background(), stock.Threshold{SKU: sku, Threshold: &threshold, Actor: "ops"})
	require.NoError(t, err)
	return st
}

// TestBundleLowOnComponentChanges: a bundle's threshold fires on the
// availability its components make: a hold of a component that takes the
// bundle from above its threshold to it sends one stock.low of the
// bundle; further changes while it stays there send none; once above
// again, the next crossing (a hold of the bundle itself) sends another. A
// bundle without a threshold, on the same components, sends none.
func TestBundleLowOnComponentChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 10)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})
	defineBundle(t, svc, "CUP", stock.Component{SKU: "MUG", Quantity: 1})
	st := setBundleThreshold(t, svc, "BOX", 3)
	require.Equal(t, []stock.BundleAt{{Location: "default", Available: 5, LowThreshold: ptr(int64(3))}}, st.Bundle.Locations)

	_, _, err := svc.Hold(ctx, holdReq("mug", item("MUG", 1))) // 9 mugs, 10 coasters: 5 boxes
	require.NoError(t, err)
	require.Empty(t, lowsOf(t, b.pool, "BOX"))
	coasters, _, err := svc.Hold(ctx, holdReq("coasters", item("COASTER", 4))) // 6 coasters: 3 boxes
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("mugs", item("MUG", 5))) // 4 mugs, 6 coasters: 3 boxes still
	require.NoError(t, err)
	lows := lowsOf(t, b.pool, "BOX")
	require.Len(t, lows, 1, "one crossing, one event: %v", lows)
	require.Equal(t, "default", lows[0].Location)
	require.Equal(t, stock.MainPool, lows[0].Pool)
	require.Nil(t, lows[0].ReservationID)
	require.Equal(t, map[string]any{"threshold": int64(3), "available": int64(3), "version": int64(1), "component": "COASTER"}, lows[0].Data)

	_, err = svc.Release(ctx, coasters.ID, shop, "back") // 4 mugs, 10 coasters: 4 boxes, above again
	require.NoError(t, err)
	require.Len(t, lowsOf(t, b.pool, "BOX"), 1, "rising sends nothing")
	_, _, err = svc.Hold(ctx, holdReq("box", item("BOX", 1))) // 3 mugs, 8 coasters: 3 boxes
	require.NoError(t, err)
	lows = lowsOf(t, b.pool, "BOX")
	require.Len(t, lows, 2, "the second crossing: %v", lows)
	require.EqualValues(t, 2, lows[1].Data["version"])
	require.True(t, lows[1].Position.After(lows[0].Position))

	require.Empty(t, lowsOf(t, b.pool, "CUP"), "no threshold, no event")
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM bundle_lows`).Scan(&n))
	require.Equal(t, 2, n)
}

// TestBundleLowRace races holds of one unit of either component of a
// bundle over two instances, down to none, twice (everything released in
// between): the bundle crosses its threshold once each time, and the feed
// has exactly one stock.low of it each time, however the holds commit.
func TestBundleLowRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "PART-A", 100)
	dbtest.StockIn(t, b.pool, "PART-B", 100)
	defineBundle(t, svc, "KIT", stock.Component{SKU: "PART-A", Quantity: 1}, stock.Component{SKU: "PART-B", Quantity: 1})
	setBundleThreshold(t, svc, "KIT", 50)
	for round := range 2 {
		granted := raceHolds(t, svc, other, 240, func(i int) inventory.HoldRequest {
			return holdReq(fmt.Sprint("r", round, "-", i), item([]string{"PART-A", "PART-B"}[i%2], 1))
		})
		require.Equal(t, 200, granted)
		require.Len(t, lowsOf(t, b.pool, "KIT"), round+1, "round %d", round)
		rows, err := b.pool.Query(ctx, `SELECT id FROM reservations WHERE status = 'held'`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		require.NoError(t, err)
		for _, id := range ids {
			_, err := svc.Release(ctx, id, shop, "again")
			require.NoError(t, err)
		}
		require.Equal(t, [3]int64{100, 0, 0}, counters(t, b, "PART-A"))
	}
}

// TestBundleLowSplitComponent: a split component counts at every location
// together, so a hold of it at one location can take the bundle to its
// threshold at another: the stock.low is the bundle's at the threshold's
// location. A component that is not split moves the bundle only where it
// is.
func TestBundleLowSplitComponent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockInAt(t, b.pool, "MUG", "east", 10)
	dbtest.StockIn(t, b.pool, "TRAY", 10)
	dbtest.StockInAt(t, b.pool, "TRAY", "east", 10)
	defineBundle(t, svc, "PAIR", stock.Component{SKU: "MUG", Quantity: 2, Split: true}, stock.Component{SKU: "TRAY", Quantity: 1})
	setBundleThreshold(t, svc, "PAIR", 5) // at default: 20 mugs anywhere make 10 pairs, 10 trays there

	_, _, err := svc.Hold(ctx, holdReq("trays-east", inventory.Item{SKU: "TRAY", Quantity: 9, Location: "east"}))
	require.NoError(t, err)
	require.Empty(t, lowsOf(t, b.pool, "PAIR"), "trays at east make no pair at default")
	_, _, err = svc.Hold(ctx, holdReq("mugs-east", inventory.Item{SKU: "MUG", Quantity: 10, Location: "east"}))
	require.NoError(t, err)
	lows := lowsOf(t, b.pool, "PAIR")
	require.Len(t, lows, 1, "10 mugs left anywhere: 5 pairs at default")
	require.Equal(t, "default", lows[0].Location, "the bundle's location, not the component's")
	require.Equal(t, map[string]any{"threshold": int64(5), "available": int64(5), "version": int64(1), "component": "MUG"}, lows[0].Data)
}
