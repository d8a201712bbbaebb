package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestStrategiesOverTheDatabase: with paris, lyon and berlin placed on the
// map, a hold allocated nearest to Marseille takes lyon's stock, one
// nearest to Hamburg berlin's, most_stock the location with the most, and
// priority paris (the lowest number); a key's default applies to a hold
// that names none. Then 300 holds of every strategy (split or not) race
// on a few units per location: what is granted is exactly what there was,
// and no location goes below zero (the books close at the end).
func TestStrategiesOverTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	place := func(id string, priority int32, lat, lon float64) {
		_, _, err := svc.CreateLocationOnce(ctx, idempotency.NewKey("ops", "loc-"+id), stock.NewLocation{ID: id, Name: id, Priority: priority,
			Coordinates: &stock.Coordinates{Latitude: lat, Longitude: lon}, Actor: "ops"})
		require.NoError(t, err)
	}
	place("paris", -3, 48.86, 2.35)
	place("lyon", -2, 45.76, 4.84)
	place("berlin", -1, 52.52, 13.40)
	stockAt := map[string]int64{"paris": 5, "lyon": 5, "berlin": 9}
	for loc, n := range stockAt {
		dbtest.StockInAt(t, b.pool, "MAP", loc, n)
	}
	hold := func(key string, s inventory.Strategy, def inventory.Strategy, ship *inventory.Coordinates, items ...inventory.Item) (inventory.Reservation, error) {
		r, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: key, Items: items, Strategy: s, DefaultStrategy: def, ShipTo: ship})
		return r, err
	}
	where := func(r inventory.Reservation) string {
		out := ""
		for _, l := range r.Lines() {
			out += fmt.Sprintf("%s:%d ", l.Location, l.Quantity)
		}
		return out
	}
	one := inventory.Item{SKU: "MAP", Quantity: 1}
	for _, c := range []struct {
		key    string
		s, def inventory.Strategy
		ship   *inventory.Coordinates
		item   inventory.Item
		want   string
	}{
		{"marseille", inventory.StrategyNearest, "", &inventory.Coordinates{Latitude: 43.30, Longitude: 5.37}, one, "lyon:1 "},
		{"hamburg", inventory.StrategyNearest, "", &inventory.Coordinates{Latitude: 53.55, Longitude: 9.99}, one, "berlin:1 "},
		{"most", inventory.StrategyMostStock, "", nil, one, "berlin:1 "},
		{"priority", "", "", nil, one, "paris:1 "},
		{"key default", "", inventory.StrategyMostStock, nil, one, "berlin:1 "},
		{"asked beats the key's", inventory.StrategyPriority, inventory.StrategyMostStock, nil, one, "paris:1 "},
		{"nearest split", inventory.StrategyNearest, "", &inventory.Coordinates{Latitude: 43.30, Longitude: 5.37},
			inventory.Item{SKU: "MAP", Quantity: 6, Split: true}, "lyon:4 paris:2 "},
	} {
		r, err := hold(c.key, c.s, c.def, c.ship, c.item)
		require.NoError(t, err, c.key)
		require.Equal(t, c.want, where(r), c.key)
	}
	_, err := hold("nearest nowhere", inventory.StrategyNearest, "", nil, one)
	require.Equal(t, domain.CodeInvalid, code(err), "nearest without ship_to")

	// What is left (paris 1, lyon 0, berlin 6), raced by every strategy.
	left := int64(0)
	st, err := svc.GetStock(ctx, "MAP")
	require.NoError(t, err)
	for _, p := range st.Pools {
		left += p.Available
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int64
		errs    []error
	)
	strategies := []inventory.Strategy{inventory.StrategyPriority, inventory.StrategyMostStock, inventory.StrategyNearest}
	for w := range 6 {
		wg.Go(func() {
			for i := range 50 {
				s := strategies[(w+i)%3]
				it := inventory.Item{SKU: "MAP", Quantity: int64(1 + i%2), Split: i%4 == 0}
				r, err := hold(fmt.Sprintf("race-%d-%d", w, i), s, "", &inventory.Coordinates{Latitude: 50, Longitude: float64(i % 10)}, it)
				mu.Lock()
				switch {
				case err == nil:
					for _, l := range r.Lines() {
						granted += l.Quantity
					}
				case code(err) != domain.CodeOutOfStock && code(err) != domain.CodeBusy:
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, left, granted, "every unit left is held once, no more")
	st, err = svc.GetStock(ctx, "MAP")
	require.NoError(t, err)
	for _, p := range st.Pools {
		require.Zero(t, p.Available, p.Location)
	}
}

// TestShopDefaultStrategy: a shop whose STOCKHOLD_STRATEGY is most_stock
// allocates a hold that names no strategy, by a key with none, to the
// location with the most; a key's default and the hold's own come first.
func TestShopDefaultStrategy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Strategy: inventory.StrategyMostStock}})
	for id, priority := range map[string]int32{"paris": -2, "berlin": -1} {
		_, _, err := svc.CreateLocationOnce(ctx, idempotency.NewKey("ops", "loc-"+id), stock.NewLocation{ID: id, Name: id, Priority: priority, Actor: "ops"})
		require.NoError(t, err)
	}
	dbtest.StockInAt(t, b.pool, "MAP", "paris", 5)
	dbtest.StockInAt(t, b.pool, "MAP", "berlin", 9)
	for _, c := range []struct {
		key    string
		s, def inventory.Strategy
		want   string
	}{
		{"shop", "", "", "berlin"},
		{"key", "", inventory.StrategyPriority, "paris"},
		{"asked", inventory.StrategyPriority, "", "paris"},
	} {
		r, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: c.key, Strategy: c.s, DefaultStrategy: c.def,
			Items: []inventory.Item{{SKU: "MAP", Quantity: 1}}})
		require.NoError(t, err, c.key)
		require.Equal(t, c.want, r.Lines()[0].Location, c.key)
	}
}
