package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

func defineBundle(t *testing.T, svc *inventory.Service, sku string, comps ...stock.Component) stock.Bundle {
	t.Helper()
	b, err := svc.SetBundle(context.Background(), stock.Bundle{SKU: sku, Components: comps, Reason: "test"}, "ops")
	require.NoError(t, err)
	return b
}

// counters is a SKU's main pool's available, reserved and sold at every
// location together.
func counters(t *testing.T, b *bundle, sku string) [3]int64 {
	t.Helper()
	var c [3]int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT coalesce(sum(available), 0), coalesce(sum(reserved), 0), coalesce(sum(sold), 0)
		FROM stock WHERE sku = $1 AND pool = 'main'`, sku).Scan(&c[0], &c[1], &c[2]))
	return c
}

// TestBundleHold: a hold on a bundle holds its components, every one from
// the one location that has them all, each line naming its bundle line;
// confirm and release act on them; a location that lacks one component
// is passed over, and when none has them all the hold is refused and
// takes nothing, unless the component is split.
func TestBundleHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 3)
	dbtest.StockInAt(t, b.pool, "MUG", "east", 10)
	dbtest.StockInAt(t, b.pool, "COASTER", "east", 10)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})

	// default (priority first) has coasters for one box, not two: both
	// come from east.
	r, _, err := svc.Hold(ctx, holdReq("two-boxes", item("BOX", 2)))
	require.NoError(t, err)
	want := &inventory.BundleLine{SKU: "BOX", Quantity: 2, Version: 1}
	require.Equal(t, []inventory.Line{
		{SKU: "COASTER", Location: "east", Pool: "main", Quantity: 4, Bundle: want},
		{SKU: "MUG", Location: "east", Pool: "main", Quantity: 2, Bundle: want},
	}, r.Lines())
	require.Equal(t, want, r.Items[0].Bundle, "the answer says which bundle line each item came from")
	got, err := svc.Get(ctx, r.ID, shop)
	require.NoError(t, err)
	require.Equal(t, r.Lines(), got.Lines(), "the lines as stored say it too")
	again, replayed, err := svc.Hold(ctx, holdReq("two-boxes", item("BOX", 2)))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, r.Items, again.Items, "a replay answers the same")

	one, _, err := svc.Hold(ctx, holdReq("one-box", item("BOX", 1)))
	require.NoError(t, err)
	require.Equal(t, "default", one.Items[0].Location, "default has one box: it comes first")

	_, err = svc.Confirm(ctx, r.ID, shop)
	require.NoError(t, err)
	_, err = svc.Release(ctx, one.ID, shop, "changed mind")
	require.NoError(t, err)
	require.Equal(t, [3]int64{9, 0, 4}, counters(t, b, "COASTER"), "the confirmed box's coasters are sold, the released one's back")

	// No location has 3 mugs and 6 coasters once east holds 8 mugs.
	_, _, err = svc.Hold(ctx, holdReq("mugs", inventory.Item{SKU: "MUG", Quantity: 8, Location: "east"}))
	require.NoError(t, err)
	before := [2][3]int64{counters(t, b, "MUG"), counters(t, b, "COASTER")}
	_, _, err = svc.Hold(ctx, holdReq("three", item("BOX", 3)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "%v", err)
	require.Contains(t, err.Error(), `bundle "BOX"`)
	after := [2][3]int64{counters(t, b, "MUG"), counters(t, b, "COASTER")}
	require.Equal(t, before, after, "a refusal takes nothing")

	// Coasters split: the mugs from default, the coasters from both.
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2, Split: true})
	r, _, err = svc.Hold(ctx, holdReq("three-split", item("BOX", 3)))
	require.NoError(t, err)
	v2 := &inventory.BundleLine{SKU: "BOX", Quantity: 3, Version: 2}
	require.Equal(t, []inventory.Line{
		{SKU: "COASTER", Location: "default", Pool: "main", Quantity: 3, Bundle: v2},
		{SKU: "COASTER", Location: "east", Pool: "main", Quantity: 3, Bundle: v2},
		{SKU: "MUG", Location: "default", Pool: "main", Quantity: 3, Bundle: v2},
	}, r.Lines())
	got, err = svc.Get(ctx, one.ID, shop)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Items[0].Bundle.Version, "a new definition never changes a hold made before it")

	// Expiry acts on the component lines.
	pastExpiry(t, b.pool, r.ID)
	run, err := svc.ExpireLoop(ctx, time.Now())
	require.NoError(t, err)
	require.Positive(t, run.Released)
	require.Equal(t, [3]int64{9, 0, 4}, counters(t, b, "COASTER"), "the expired hold's coasters are back")
}

// TestBundleHoldRefusesBadLines: a bundle line takes a quantity; a SKU is
// held for one line of a hold.
func TestBundleHoldRefusesBadLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "QUOTA", 10)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	defineBundle(t, svc, "ADULT", stock.Component{SKU: "QUOTA", Quantity: 1})
	defineBundle(t, svc, "CHILD", stock.Component{SKU: "QUOTA", Quantity: 1})
	for i, items := range [][]inventory.Item{
		{{SKU: "ADULT", Units: []string{"A-1"}}},
		{{SKU: "ADULT", Quantity: 2, Partial: true}},
		{item("ADULT", 1), item("CHILD", 1)},
		{item("ADULT", 1), item("QUOTA", 1)},
		{item("ADULT", 1), {SKU: "ADULT", Quantity: 1, Location: "default"}},
		{item("ADULT", 1_000_001)},
	} {
		_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("bad", i), items...))
		require.Equal(t, domain.CodeInvalid, code(err), "case %d: %v", i, err)
	}
	require.Equal(t, [3]int64{10, 0, 0}, counters(t, b, "QUOTA"))
}

// TestBundleDefinedElsewhere: an instance whose memory of the bundles is
// out of date holds by the definition current when its batch reads it: a
// bundle defined on another instance, changed there, or deleted there.
func TestBundleDefinedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "A", 100)
	dbtest.StockIn(t, b.pool, "B", 100)
	_, _, err := other.Hold(ctx, holdReq("load", item("A", 1))) // other loads its memory: no bundles
	require.NoError(t, err)

	defineBundle(t, svc, "KIT", stock.Component{SKU: "A", Quantity: 1})
	r, _, err := other.Hold(ctx, holdReq("k1", item("KIT", 1)))
	require.NoError(t, err, "a bundle defined on another instance")
	require.Equal(t, &inventory.BundleLine{SKU: "KIT", Quantity: 1, Version: 1}, r.Items[0].Bundle)

	defineBundle(t, svc, "KIT", stock.Component{SKU: "B", Quantity: 2})
	r, _, err = other.Hold(ctx, holdReq("k2", item("KIT", 1)))
	require.NoError(t, err)
	require.Equal(t, []inventory.Line{{SKU: "B", Location: "default", Pool: "main", Quantity: 2,
		Bundle: &inventory.BundleLine{SKU: "KIT", Quantity: 1, Version: 2}}}, r.Lines(), "changed on another instance")

	require.NoError(t, svc.DeleteBundle(ctx, "KIT"))
	_, _, err = other.Hold(ctx, holdReq("k3", item("KIT", 1)))
	require.Equal(t, domain.CodeUnknownSKU, code(err), "deleted on another instance: %v", err)
}

// TestSharedQuotaRace races 1,000 holds over two instances on three
// ticket types, each a bundle of one quota of 100: exactly 100 units are
// held, never more, and every refusal is out_of_stock.
func TestSharedQuotaRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "QUOTA-SAT", 100)
	for _, ticket := range []string{"ADULT", "CHILD", "SENIOR"} {
		defineBundle(t, svc, ticket, stock.Component{SKU: "QUOTA-SAT", Quantity: 1})
	}
	granted := raceHolds(t, svc, other, 1000, func(i int) inventory.HoldRequest {
		return holdReq(fmt.Sprint("t", i), item([]string{"ADULT", "CHILD", "SENIOR"}[i%3], 1))
	})
	require.Equal(t, 100, granted)
	require.Equal(t, [3]int64{0, 100, 0}, counters(t, b, "QUOTA-SAT"))
	var byTicket int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(DISTINCT bundle_sku) FROM reservation_lines WHERE sku = 'QUOTA-SAT'`).Scan(&byTicket))
	assert.Equal(t, 3, byTicket, "each line names its ticket type")
}

// raceHolds makes n holds at once (req(i) each), one in two on other,
// and returns how many were granted; every refusal is out_of_stock.
func raceHolds(t *testing.T, svc, other *inventory.Service, n int, req func(i int) inventory.HoldRequest) int {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := svc
			if i%2 == 1 {
				s = other
			}
			r := req(i)
			_, errs[i] = untilAnswered(func() error { _, _, err := s.Hold(context.Background(), r); return err })
		}()
	}
	wg.Wait()
	granted := 0
	for _, err := range errs {
		if err == nil {
			granted++
			continue
		}
		require.Equal(t, domain.CodeOutOfStock, code(err), "unexpected: %v", err)
	}
	return granted
}

// TestBundleAvailability: GET of a bundle answers what its components
// allow, per location and in all, and follows their holds and
// adjustments.
func TestBundleAvailability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 5)
	dbtest.StockInAt(t, b.pool, "MUG", "east", 1)
	dbtest.StockInAt(t, b.pool, "COASTER", "east", 9)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})
	avail := func() (int64, []stock.BundleAt) {
		t.Helper()
		st, err := svc.GetStock(ctx, "BOX")
		require.NoError(t, err)
		require.NotNil(t, st.Bundle)
		require.Empty(t, st.Pools, "a bundle has no stock of its own")
		return st.Bundle.Available, st.Bundle.Locations
	}
	n, at := avail()
	require.Equal(t, []stock.BundleAt{{Location: "default", Available: 2}, {Location: "east", Available: 1}}, at)
	require.EqualValues(t, 3, n, "2 boxes at default, 1 at east, each from one location")

	_, _, err := svc.Hold(ctx, holdReq("box", item("BOX", 2)))
	require.NoError(t, err)
	n, _ = avail()
	require.EqualValues(t, 1, n)
	_, err = svc.Adjust(ctx, stock.Adjustment{SKU: "MUG", Location: "east", Pool: "main", Delta: -1, Reason: "broken", Actor: "ops"})
	require.NoError(t, err)
	n, at = avail()
	require.EqualValues(t, 0, n, "a component adjusted away")
	require.Equal(t, []stock.BundleAt{{Location: "default", Available: 0}, {Location: "east", Available: 0}}, at)
	_, _, err = svc.Hold(ctx, holdReq("none-left", item("BOX", 1)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "what GET says is what a hold finds: %v", err)

	// Split coasters: the mugs at default (8 left) and every coaster (1
	// at default, 9 at east: 5 boxes) make 5.
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2, Split: true})
	n, _ = avail()
	require.EqualValues(t, 5, n)
	_, _, err = svc.Hold(ctx, holdReq("split", item("BOX", 5)))
	require.NoError(t, err)
	n, _ = avail()
	require.EqualValues(t, 0, n)

	_, err = svc.GetStock(ctx, "NOPE")
	require.Equal(t, domain.CodeUnknownSKU, code(err), "neither stock nor a bundle")
}

// TestBundlesRaceAdjustmentsAndTransfers races kit holds (a mug and two
// coasters, from one location) on two instances against adjustments of
// the coasters, transfers of them between the locations and counts of
// the mugs: every kit held has its three units at one location, never
// more than the rows had (the database's checks), the rows' reserved is
// what the kits hold, and the books agree (the invariants: counters,
// ledger and lines).
func TestBundlesRaceAdjustmentsAndTransfers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	dbtest.Location(t, b.pool, "east", 2)
	for _, loc := range []string{"default", "east"} {
		dbtest.StockInAt(t, b.pool, "MUG", loc, 60)
		dbtest.StockInAt(t, b.pool, "COASTER", loc, 60)
	}
	defineBundle(t, svc, "KIT", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})

	const kits = 150
	var wg sync.WaitGroup
	errs := make([]error, kits)
	for i := range kits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := svc
			if i%2 == 1 {
				s = other
			}
			r := holdReq(fmt.Sprint("kit", i), item("KIT", 1))
			_, errs[i] = untilAnswered(func() error { _, _, err := s.Hold(ctx, r); return err })
		}()
	}
	moved := make([]error, 60)
	for i := range moved {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i >= 40 { // counts of the mugs: fewer found each time
				_, _, moved[i] = svc.CountOnce(ctx, key(fmt.Sprint("count", i)), stock.StockCount{SKU: "MUG",
					Location: []string{"default", "east"}[i%2], Pool: "main", Counted: int64(100 - i), Reason: "cycle count", Actor: "ops"})
				return
			}
			if i%2 == 0 {
				_, moved[i] = svc.Adjust(ctx, stock.Adjustment{SKU: "COASTER", Location: []string{"default", "east"}[i%4/2], Pool: "main",
					Delta: -1, Reason: "broken", Actor: "ops"})
				return
			}
			_, _, moved[i] = svc.CreateTransferOnce(ctx, key(fmt.Sprint("tr", i)), stock.NewTransfer{SKU: "COASTER", From: "default", To: "east",
				Quantity: 2, Reason: "rebalance", Actor: "ops"})
		}()
	}
	wg.Wait()
	granted := int64(0)
	for _, err := range errs {
		if err == nil {
			granted++
			continue
		}
		require.Equal(t, domain.CodeOutOfStock, code(err), "unexpected: %v", err)
	}
	for _, err := range moved {
		if err != nil {
			require.Contains(t, []domain.Code{domain.CodeInsufficientAvailable, domain.CodeBusy, domain.CodeCountBelowHeld}, code(err), "unexpected: %v", err)
		}
	}
	counted := 0
	for _, err := range moved[40:] {
		if err == nil {
			counted++
		}
	}
	t.Logf("%d kits held, %d of 20 counts taken", granted, counted)
	require.Positive(t, granted)
	require.Equal(t, granted, counters(t, b, "MUG")[1], "a mug per kit")
	require.Equal(t, 2*granted, counters(t, b, "COASTER")[1], "two coasters per kit")
	var split int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT reservation_id FROM reservation_lines
		WHERE bundle_sku = 'KIT' GROUP BY 1 HAVING count(DISTINCT location) > 1 OR sum(quantity) <> 3) x`).Scan(&split))
	require.Zero(t, split, "every kit has its three units at one location")
	dbtest.RequireInvariants(t, b.pool)
}

// TestBundlePartialRelease: a partial release gives a bundle back by its
// quantity, every component in one change with a release_partial ledger
// row each, and the lines left say how many of the bundle they hold; a
// component alone, more of the bundle than held, or the bundle at a
// location is refused and changes nothing; a split component gives back
// from its last location first; the replay of the hold answers what was
// granted.
func TestBundlePartialRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 10)
	dbtest.StockIn(t, b.pool, "TEA", 10)
	dbtest.StockInAt(t, b.pool, "COASTER", "east", 10)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})

	r, _, err := svc.Hold(ctx, holdReq("boxes", item("BOX", 3), item("TEA", 1)))
	require.NoError(t, err)
	id := r.ID
	granted := r.Items

	out, err := svc.ReleaseItems(ctx, id, shop, "one box less", []inventory.Item{item("BOX", 1)})
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, out.Status)
	two := &inventory.BundleLine{SKU: "BOX", Quantity: 2, Version: 1}
	require.Equal(t, []inventory.Line{
		{SKU: "COASTER", Location: "default", Pool: "main", Quantity: 4, Bundle: two},
		{SKU: "MUG", Location: "default", Pool: "main", Quantity: 2, Bundle: two},
		{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1},
	}, out.Lines(), "1 of 3 boxes gives back 1 mug and 2 coasters")
	require.Equal(t, [3]int64{8, 2, 0}, counters(t, b, "MUG"))
	require.Equal(t, [3]int64{16, 4, 0}, counters(t, b, "COASTER"))
	type row struct {
		SKU      string
		Reserved int64
	}
	var rows []row
	var xids int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(DISTINCT feed_xid) FROM ledger WHERE reservation_id = $1 AND kind = 'release_partial'`, id).Scan(&xids))
	require.Equal(t, 1, xids, "every component in one transaction")
	lr, err := b.pool.Query(ctx, `SELECT sku, delta_reserved FROM ledger WHERE reservation_id = $1 AND kind = 'release_partial' ORDER BY sku`, id)
	require.NoError(t, err)
	for lr.Next() {
		var x row
		require.NoError(t, lr.Scan(&x.SKU, &x.Reserved))
		rows = append(rows, x)
	}
	require.NoError(t, lr.Err())
	require.Equal(t, []row{{"COASTER", -2}, {"MUG", -1}}, rows, "a release_partial ledger row per component")

	before := [2][3]int64{counters(t, b, "MUG"), counters(t, b, "COASTER")}
	for i, items := range [][]inventory.Item{
		{item("COASTER", 2)},                             // a component alone
		{item("MUG", 1)},                                 // a component alone
		{item("BOX", 1), item("MUG", 1)},                 // the bundle and a component
		{item("BOX", 3)},                                 // more than held
		{{SKU: "BOX", Quantity: 1, Location: "default"}}, // at a location
		{{SKU: "BOX", Units: []string{"B-1"}}},           // units of a bundle
		{item("BOX", 2), {SKU: "COASTER", Quantity: 4, Location: "default"}}, // every component named
	} {
		_, err := svc.ReleaseItems(ctx, id, shop, "bad", items)
		require.Equal(t, domain.CodeInvalid, code(err), "case %d: %v", i, err)
	}
	after := [2][3]int64{counters(t, b, "MUG"), counters(t, b, "COASTER")}
	require.Equal(t, before, after, "a refusal changes nothing")
	_, err = svc.ReleaseItems(ctx, id, shop, "bad", []inventory.Item{item("COASTER", 1)})
	require.ErrorContains(t, err, `release the bundle by its quantity`)

	again, replayed, err := svc.Hold(ctx, holdReq("boxes", item("BOX", 3), item("TEA", 1)))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, granted, again.Items, "a replay answers what was granted: 3 boxes")

	out, err = svc.ReleaseItems(ctx, id, shop, "no boxes", []inventory.Item{item("BOX", 2)})
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, out.Status)
	require.Equal(t, []inventory.Line{{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1}}, out.Lines(),
		"every box given back: its lines leave the hold")
	require.Equal(t, [3]int64{10, 0, 0}, counters(t, b, "MUG"))
	require.Equal(t, [3]int64{20, 0, 0}, counters(t, b, "COASTER"))

	// A hold of boxes only: giving back all of them releases it whole.
	whole, _, err := svc.Hold(ctx, holdReq("whole", item("BOX", 2)))
	require.NoError(t, err)
	out, err = svc.ReleaseItems(ctx, whole.ID, shop, "all boxes", []inventory.Item{item("BOX", 2)})
	require.NoError(t, err)
	require.Equal(t, inventory.StatusReleased, out.Status)

	// Split coasters, 3 at default and 1 at east: one box gives back its
	// two coasters from east (the last line) first, then default.
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2, Split: true})
	_, err = svc.Adjust(ctx, stock.Adjustment{SKU: "COASTER", Location: "default", Pool: "main", Delta: -7, Reason: "broken", Actor: "ops"})
	require.NoError(t, err)
	_, err = svc.Adjust(ctx, stock.Adjustment{SKU: "COASTER", Location: "east", Pool: "main", Delta: -9, Reason: "broken", Actor: "ops"})
	require.NoError(t, err)
	split, _, err := svc.Hold(ctx, holdReq("split", item("BOX", 2), item("TEA", 1)))
	require.NoError(t, err)
	v2 := &inventory.BundleLine{SKU: "BOX", Quantity: 2, Version: 2}
	require.Equal(t, []inventory.Line{
		{SKU: "COASTER", Location: "default", Pool: "main", Quantity: 3, Bundle: v2},
		{SKU: "COASTER", Location: "east", Pool: "main", Quantity: 1, Bundle: v2},
		{SKU: "MUG", Location: "default", Pool: "main", Quantity: 2, Bundle: v2},
		{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1},
	}, split.Lines())
	out, err = svc.ReleaseItems(ctx, split.ID, shop, "one box less", []inventory.Item{item("BOX", 1)})
	require.NoError(t, err)
	v2.Quantity = 1
	require.Equal(t, []inventory.Line{
		{SKU: "COASTER", Location: "default", Pool: "main", Quantity: 2, Bundle: v2},
		{SKU: "MUG", Location: "default", Pool: "main", Quantity: 1, Bundle: v2},
		{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1},
	}, out.Lines(), "east's coaster first, then one of default's")
}

// TestBundleReinstateAndRollback: a reinstated hold's component lines
// record the bundle line and the definition version the ended hold used,
// whatever the definition is now, so a partial release of it goes by the
// bundle's quantity too; a rollback scoped to one component hands back
// the whole bundle line (the dry run's count says the same), and a
// rollback of the hold hands back every component.
func TestBundleReinstateAndRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "MUG", 10)
	dbtest.StockIn(t, b.pool, "COASTER", 10)
	dbtest.StockIn(t, b.pool, "TEA", 10)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 2})
	r, _, err := svc.Hold(ctx, holdReq("boxes", item("BOX", 2), item("TEA", 1)))
	require.NoError(t, err)
	_, err = svc.Release(ctx, r.ID, shop, "payment late")
	require.NoError(t, err)
	defineBundle(t, svc, "BOX", stock.Component{SKU: "MUG", Quantity: 1}, stock.Component{SKU: "COASTER", Quantity: 3})

	again, err := svc.Reinstate(ctx, r.ID, shop)
	require.NoError(t, err)
	v1 := &inventory.BundleLine{SKU: "BOX", Quantity: 2, Version: 1}
	want := []inventory.Line{
		{SKU: "COASTER", Location: "default", Pool: "main", Quantity: 4, Bundle: v1},
		{SKU: "MUG", Location: "default", Pool: "main", Quantity: 2, Bundle: v1},
		{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1},
	}
	require.Equal(t, want, again.Lines(), "the same bundle line, by the definition the ended hold used")
	got, err := svc.Get(ctx, again.ID, shop)
	require.NoError(t, err)
	require.Equal(t, want, got.Lines(), "as stored")
	twice, err := svc.Reinstate(ctx, r.ID, shop)
	require.NoError(t, err)
	require.Equal(t, again.ID, twice.ID)
	require.Equal(t, want, twice.Lines())

	out, err := svc.ReleaseItems(ctx, again.ID, shop, "one box less", []inventory.Item{item("BOX", 1)})
	require.NoError(t, err)
	v1.Quantity = 1
	require.Equal(t, []inventory.Line{
		{SKU: "COASTER", Location: "default", Pool: "main", Quantity: 2, Bundle: v1},
		{SKU: "MUG", Location: "default", Pool: "main", Quantity: 1, Bundle: v1},
		{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1},
	}, out.Lines(), "a reinstated bundle goes back by its quantity")

	// A recall of the coasters takes the box they are in, mug included.
	coaster, pool := "COASTER", "main"
	n, err := db.New(b.pool).RollbackScopeCount(ctx, db.RollbackScopeCountParams{Cutoff: time.Now().Add(time.Hour), Sku: &coaster, Pool: &pool})
	require.NoError(t, err)
	require.Equal(t, db.RollbackScopeCountRow{Holds: 1, Units: 3}, n, "the dry run counts the box: 2 coasters and its mug")
	recall := inventory.Outcome{Status: inventory.StatusReleased, Kind: stock.LedgerRollback, Actor: "ops", Reason: "recall"}
	var handed []inventory.Handed
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		handed, err = svc.ReleaseLinesTx(ctx, tx, []uuid.UUID{again.ID}, recall, inventory.LineScope{SKU: "COASTER", Pool: "main"})
		return err
	}))
	require.Equal(t, []inventory.Handed{{ID: again.ID, Units: 3}}, handed, "what the dry run counted")
	got, err = svc.Get(ctx, again.ID, shop)
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, got.Status)
	require.Equal(t, []inventory.Line{{SKU: "TEA", Location: "default", Pool: "main", Quantity: 1}}, got.Lines())
	require.Equal(t, [3]int64{10, 0, 0}, counters(t, b, "MUG"))
	require.Equal(t, [3]int64{10, 0, 0}, counters(t, b, "COASTER"))

	// A rollback of whole holds hands back every component.
	whole, _, err := svc.Hold(ctx, holdReq("whole", item("BOX", 2)))
	require.NoError(t, err)
	var ended []uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		ended, err = svc.ReleaseTx(ctx, tx, []uuid.UUID{whole.ID}, recall)
		return err
	}))
	require.Equal(t, []uuid.UUID{whole.ID}, ended)
	require.Equal(t, [3]int64{10, 0, 0}, counters(t, b, "MUG"))
	require.Equal(t, [3]int64{10, 0, 0}, counters(t, b, "COASTER"))
	var kinds []string
	require.NoError(t, pgxscan(ctx, b, `SELECT kind || ' ' || sku FROM ledger WHERE reservation_id = $1 AND kind <> 'reserve' ORDER BY sku`, whole.ID, &kinds))
	require.Equal(t, []string{"rollback COASTER", "rollback MUG"}, kinds, "a rollback ledger row per component")
}

func pgxscan(ctx context.Context, b *bundle, sql string, id uuid.UUID, out *[]string) error {
	rows, err := b.pool.Query(ctx, sql, id)
	if err != nil {
		return err
	}
	*out, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return err
}

// TestBundleOfSeatsByCount: a component may be a pool of units with an
// identity held by count: a bundle line holds that many seats, picked in
// seat order as for any quantity line on the pool, and its line names
// them; racing holds on two instances never give one seat twice nor more
// seats than there are; a partial release by bundle quantity is refused
// (which seats go would be the service's choice); a release gives the
// seats back and a reinstatement holds the same seats with the same bundle
// line; a confirm sells them.
func TestBundleOfSeatsByCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	addUnits(t, svc, "GALA", venue(2, 4))
	dbtest.StockIn(t, b.pool, "PROGRAM", 100)
	defineBundle(t, svc, "TICKET", stock.Component{SKU: "GALA", Quantity: 1}, stock.Component{SKU: "PROGRAM", Quantity: 1})

	r, _, err := svc.Hold(ctx, holdReq("pair", item("TICKET", 2)))
	require.NoError(t, err)
	line := &inventory.BundleLine{SKU: "TICKET", Quantity: 2, Version: 1}
	require.Equal(t, []inventory.Line{
		{SKU: "GALA", Location: "default", Pool: "main", Quantity: 2, Units: []string{"A-1", "A-2"}, Bundle: line},
		{SKU: "PROGRAM", Location: "default", Pool: "main", Quantity: 2, Bundle: line},
	}, r.Lines(), "two seats, picked in seat order, and two programmes")
	_, err = svc.ReleaseItems(ctx, r.ID, shop, "one less", []inventory.Item{item("TICKET", 1)})
	require.Equal(t, domain.CodeInvalid, code(err), "%v", err)
	require.ErrorContains(t, err, "units with an identity")

	// 20 racing single tickets on two instances for the 6 seats left.
	granted := raceHolds(t, svc, other, 20, func(i int) inventory.HoldRequest { return holdReq(fmt.Sprint("one", i), item("TICKET", 1)) })
	require.Equal(t, 6, granted, "every seat once")
	status, holder := unitsByStatus(t, b.pool, "GALA")
	require.Len(t, holder, 8, "every seat held, each by one hold")
	for id, st := range status {
		require.Equal(t, "held", st, id)
	}
	require.Equal(t, [3]int64{92, 8, 0}, counters(t, b, "PROGRAM"), "a programme per seat")

	_, err = svc.Release(ctx, r.ID, shop, "late")
	require.NoError(t, err)
	status, _ = unitsByStatus(t, b.pool, "GALA")
	require.Equal(t, "available", status["A-1"])
	again, err := svc.Reinstate(ctx, r.ID, shop)
	require.NoError(t, err)
	require.Equal(t, r.Lines(), again.Lines(), "the same seats, the same bundle line")
	_, err = svc.Confirm(ctx, again.ID, shop)
	require.NoError(t, err)
	status, _ = unitsByStatus(t, b.pool, "GALA")
	require.Equal(t, "sold", status["A-2"])
}
