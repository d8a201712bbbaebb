package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

func partial(sku string, q, least int64) inventory.Item {
	return inventory.Item{SKU: sku, Quantity: q, Partial: true, MinQuantity: least}
}

// heldOf is the quantity hold r holds of sku, at every location.
func heldOf(r inventory.Reservation, sku string) int64 {
	var n int64
	for _, it := range r.Items {
		if it.SKU == sku {
			n += it.Quantity
		}
	}
	return n
}

// TestPartialHold: a partial line takes what is there, up to its quantity
// and at least its minimum, and the answer and the ledger say how much;
// the hold's other lines stay all or nothing; a line that cannot get its
// minimum is refused out_of_stock and takes nothing.
func TestPartialHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "P", 5)
	dbtest.StockIn(t, b.pool, "Q", 1)

	r, _, err := svc.Hold(ctx, holdReq("most", partial("P", 8, 0)))
	require.NoError(t, err)
	require.EqualValues(t, 5, heldOf(r, "P"))
	var reserved int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT delta_reserved FROM ledger WHERE reservation_id = $1 AND kind = 'reserve'`, r.ID).Scan(&reserved))
	require.EqualValues(t, 5, reserved, "the ledger records the quantity held")
	_, err = svc.Release(ctx, r.ID, shop, "again")
	require.NoError(t, err)

	_, _, err = svc.Hold(ctx, holdReq("both", partial("P", 3, 1), item("Q", 2)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "the whole line Q is short: %v", err)
	require.EqualValues(t, 5, pool(t, svc, "P", "main").Available, "the partial line took nothing")

	r, _, err = svc.Hold(ctx, holdReq("with", partial("P", 9, 2), item("Q", 1)))
	require.NoError(t, err)
	require.EqualValues(t, 5, heldOf(r, "P"))
	require.EqualValues(t, 1, heldOf(r, "Q"))
	_, err = svc.ReleaseItems(ctx, r.ID, shop, "keep two", []inventory.Item{item("P", 3)})
	require.NoError(t, err)

	_, _, err = svc.Hold(ctx, holdReq("least", partial("P", 5, 4)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "3 left, at least 4 asked: %v", err)
	_, _, err = svc.Hold(ctx, holdReq("whole", item("P", 3)))
	require.NoError(t, err, "a refusal with stock left is not remembered as sold out")
	_, _, err = svc.Hold(ctx, holdReq("none", partial("P", 2, 0)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "%v", err)
}

// TestPartialHoldAcrossLocations: a partial line takes the most one
// location it may use has, or with split what all have; a pool's step
// takes it down to a multiple, and its min_per_order is its least.
func TestPartialHoldAcrossLocations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "S", 3)
	dbtest.StockInAt(t, b.pool, "S", "east", 4)

	r, _, err := svc.Hold(ctx, holdReq("one", partial("S", 10, 0)))
	require.NoError(t, err)
	require.EqualValues(t, 4, heldOf(r, "S"), "the most at one location")
	_, err = svc.Release(ctx, r.ID, shop, "again")
	require.NoError(t, err)
	split := partial("S", 10, 0)
	split.Split = true
	r, _, err = svc.Hold(ctx, holdReq("split", split))
	require.NoError(t, err)
	require.EqualValues(t, 7, heldOf(r, "S"), "split: every location's")
	_, err = svc.Release(ctx, r.ID, shop, "again")
	require.NoError(t, err)
	at := partial("S", 10, 0)
	at.Location = "default"
	r, _, err = svc.Hold(ctx, holdReq("at", at))
	require.NoError(t, err)
	require.EqualValues(t, 3, heldOf(r, "S"))
	_, err = svc.Release(ctx, r.ID, shop, "again")
	require.NoError(t, err)

	_, err = svc.SetLimits(ctx, stock.Limits{SKU: "S", Step: ptr[int64](2)}, "ops")
	require.NoError(t, err)
	r, _, err = svc.Hold(ctx, holdReq("packs", split))
	require.NoError(t, err)
	require.EqualValues(t, 6, heldOf(r, "S"), "7 there, taken in packs of 2")
	_, err = svc.Release(ctx, r.ID, shop, "again")
	require.NoError(t, err)

	_, err = svc.SetLimits(ctx, stock.Limits{SKU: "S", Step: ptr[int64](2), MinPerOrder: ptr[int64](8)}, "ops")
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("below", split))
	require.Equal(t, domain.CodeOutOfStock, code(err), "6 is below min_per_order 8: %v", err)
}

// TestPartialHoldsRace races partial holds of three units against 100:
// exactly 100 are held, never more, each hold taking 1 to 3.
func TestPartialHoldsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "RUSH", 100)
	const n = 60
	got := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("p", i), partial("RUSH", 3, 0)))
			got[i], errs[i] = heldOf(r, "RUSH"), err
		}()
	}
	wg.Wait()
	var sum int64
	for i := range n {
		if errs[i] != nil {
			require.Equal(t, domain.CodeOutOfStock, code(errs[i]), "%v", errs[i])
			continue
		}
		assert.True(t, got[i] >= 1 && got[i] <= 3, "hold %d took %d", i, got[i])
		sum += got[i]
	}
	require.EqualValues(t, 100, sum)
	require.Zero(t, pool(t, svc, "RUSH", "main").Available)
}

// TestPartialHoldRefusesBadInput: bad partial lines are refused before
// anything is held.
func TestPartialHoldRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "B", 10)
	for i, items := range [][]inventory.Item{
		{partial("B", 2, 3)},
		{{SKU: "B", Quantity: 2, MinQuantity: 1}},
		{partial("B", 2, -1)},
		{partial("B", 2, 0), item("B", 1)},
		{{SKU: "B", Units: []string{"U1"}, Partial: true}},
		{{SKU: "B", Quantity: 2, Adjacent: true, Partial: true}},
	} {
		_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("bad", i), items...))
		require.Equal(t, domain.CodeInvalid, code(err), "case %d: %v", i, err)
	}
	require.EqualValues(t, 10, pool(t, svc, "B", "main").Available)
}
