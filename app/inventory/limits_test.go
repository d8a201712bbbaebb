package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// limitOf is the limit a limit_exceeded refusal names ("" for another
// refusal, or a campaign's max_per_order).
func limitOf(err error) string {
	var e *domain.Error
	if errors.As(err, &e) && e.Code == domain.CodeLimitExceeded {
		s, _ := e.Extra["limit"].(string)
		return s
	}
	return ""
}

// TestSKULimitsPerOrder holds lines against a SKU's max_per_order,
// min_per_order and step, counted per SKU across its lines and
// locations: each refusal names its limit and takes nothing.
func TestSKULimitsPerOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "PACK", 100)
	dbtest.StockInAt(t, b.pool, "PACK", "east", 100)
	dbtest.StockIn(t, b.pool, "FREE", 100)
	_, err := svc.SetLimits(ctx, stock.Limits{SKU: "PACK", MaxPerOrder: ptr[int64](12), MinPerOrder: ptr[int64](6), Step: ptr[int64](6)}, "ops")
	require.NoError(t, err)

	at := func(loc string, q int64) inventory.Item {
		return inventory.Item{SKU: "PACK", Quantity: q, Location: loc}
	}
	for i, tc := range []struct {
		items []inventory.Item
		limit string // "" granted
	}{
		{[]inventory.Item{item("PACK", 6)}, ""},
		{[]inventory.Item{item("PACK", 12)}, ""},
		{[]inventory.Item{item("PACK", 18)}, inventory.LimitMaxPerOrder},
		{[]inventory.Item{item("PACK", 3)}, inventory.LimitMinPerOrder},
		{[]inventory.Item{item("PACK", 8)}, inventory.LimitStep},
		{[]inventory.Item{at("default", 6), at("east", 6)}, ""},
		{[]inventory.Item{at("default", 6), at("east", 12)}, inventory.LimitMaxPerOrder},
		{[]inventory.Item{at("default", 3), at("east", 3)}, ""},
		{[]inventory.Item{at("default", 3), item("PACK", 4)}, inventory.LimitStep},
		{[]inventory.Item{item("FREE", 7), item("PACK", 24)}, inventory.LimitMaxPerOrder},
		{[]inventory.Item{item("FREE", 7)}, ""},
	} {
		before := pool(t, svc, "PACK", "main")
		_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("k", i), tc.items...))
		if tc.limit == "" {
			require.NoError(t, err, "case %d", i)
			continue
		}
		require.Equal(t, domain.CodeLimitExceeded, code(err), "case %d: %v", i, err)
		assert.Equal(t, tc.limit, limitOf(err), "case %d: %v", i, err)
		assert.Equal(t, before, pool(t, svc, "PACK", "main"), "case %d: a refusal takes nothing", i)
	}

	require.NoError(t, svc.DeleteLimits(ctx, "PACK", ""))
	_, _, err = svc.Hold(ctx, holdReq("after", item("PACK", 1)))
	require.NoError(t, err, "no limits once they are removed")
}

// TestLimitsSetRefusesBadInput: each bad set of limits is a 4xx that
// changes nothing.
func TestLimitsSetRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "L", 10)
	for _, tc := range []struct {
		l    stock.Limits
		code domain.Code
	}{
		{stock.Limits{SKU: "L"}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", MaxPerOrder: ptr[int64](0)}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", Step: ptr[int64](-6)}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", MinPerOrder: ptr[int64](5), MaxPerOrder: ptr[int64](4)}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", Step: ptr[int64](6), MaxPerOrder: ptr[int64](10)}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", Step: ptr[int64](6), MinPerOrder: ptr[int64](4)}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", CustomerWindowSeconds: ptr[int64](60), MaxPerOrder: ptr[int64](4)}, domain.CodeInvalid},
		{stock.Limits{SKU: "L", MaxPerCustomer: ptr[int64](2), CustomerWindowSeconds: ptr[int64](0)}, domain.CodeInvalid},
		{stock.Limits{SKU: "NONE", MaxPerOrder: ptr[int64](4)}, domain.CodeUnknownSKU},
		{stock.Limits{SKU: "L", Pool: "spring", MaxPerOrder: ptr[int64](4)}, domain.CodeUnknownPool},
	} {
		_, err := svc.SetLimits(ctx, tc.l, "ops")
		require.Equal(t, tc.code, code(err), "%+v: %v", tc.l, err)
	}
	_, err := svc.GetLimits(ctx, "L", "")
	require.ErrorIs(t, err, domain.ErrNotFound, "nothing was set")
}

// TestMaxPerCustomerRace races 200 holds of one customer, over two
// instances, half naming one location and half another, against
// max_per_customer 2: exactly two units are held, however the holds fall
// into batches. Another customer's holds, and holds without a customer,
// are not counted against them.
func TestMaxPerCustomerRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	other := b.another(inventory.Config{})
	dbtest.Location(t, b.pool, "east", 2)
	dbtest.StockIn(t, b.pool, "FLASH", 500)
	dbtest.StockInAt(t, b.pool, "FLASH", "east", 500)
	_, err := svc.SetLimits(ctx, stock.Limits{SKU: "FLASH", MaxPerCustomer: ptr[int64](2)}, "ops")
	require.NoError(t, err)

	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, loc := svc, "default"
			if i%2 == 1 {
				s = other
			}
			if i%4 >= 2 {
				loc = "east"
			}
			r := holdReq(fmt.Sprint("c", i), inventory.Item{SKU: "FLASH", Quantity: 1, Location: loc})
			r.CustomerRef = "alice"
			_, errs[i] = untilAnswered(func() error { _, _, err := s.Hold(ctx, r); return err })
		}()
	}
	wg.Wait()
	granted := 0
	for _, err := range errs {
		if err == nil {
			granted++
			continue
		}
		require.Equal(t, inventory.LimitMaxPerCustomer, limitOf(err), "unexpected: %v", err)
	}
	require.Equal(t, 2, granted)
	var held int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(sum(l.quantity), 0) FROM reservation_lines l
		JOIN reservations r ON r.id = l.reservation_id WHERE r.customer_ref = 'alice' AND r.status = 'held'`).Scan(&held))
	require.EqualValues(t, 2, held)

	r := holdReq("bob", item("FLASH", 2))
	r.CustomerRef = "bob"
	_, _, err = svc.Hold(ctx, r)
	require.NoError(t, err, "another customer has their own two")
	_, _, err = svc.Hold(ctx, holdReq("anonymous", item("FLASH", 5)))
	require.NoError(t, err, "a hold without a customer is not counted per customer")
}

// TestMaxPerCustomerCountsHeldAndBoughtInItsWindow: confirmed holds count,
// released ones do not, nor holds made before the window.
func TestMaxPerCustomerCountsHeldAndBoughtInItsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "W", 100)
	_, err := svc.SetLimits(ctx, stock.Limits{SKU: "W", MaxPerCustomer: ptr[int64](3), CustomerWindowSeconds: ptr[int64](3600)}, "ops")
	require.NoError(t, err)
	hold := func(key string, q int64) (inventory.Reservation, error) {
		r := holdReq(key, item("W", q))
		r.CustomerRef = "carol"
		res, _, err := svc.Hold(ctx, r)
		return res, err
	}
	first, err := hold("a", 2)
	require.NoError(t, err)
	require.Equal(t, "carol", *first.CustomerRef)
	_, err = svc.Confirm(ctx, first.ID, shop)
	require.NoError(t, err)
	_, err = hold("b", 2)
	require.Equal(t, inventory.LimitMaxPerCustomer, limitOf(err), "2 bought + 2 > 3: %v", err)
	second, err := hold("c", 1)
	require.NoError(t, err)
	_, err = hold("d", 1)
	require.Equal(t, inventory.LimitMaxPerCustomer, limitOf(err), "%v", err)

	_, err = svc.Release(ctx, second.ID, shop, "changed my mind")
	require.NoError(t, err)
	_, err = hold("e", 1)
	require.NoError(t, err, "a released hold is not counted")

	_, err = b.pool.Exec(ctx, `UPDATE reservations SET created_at = created_at - interval '2 hours' WHERE customer_ref = 'carol'`)
	require.NoError(t, err)
	_, err = hold("f", 3)
	require.NoError(t, err, "holds made before the window are not counted")
}

// TestSoldOutMemoryLeavesLimitedPools: a pool with limits is never
// answered from memory, so a hold over a limit on a sold-out pool hears
// limit_exceeded, as its batch answers, not out_of_stock; a pool without
// limits, sold out beside it, is answered from memory meanwhile.
func TestSoldOutMemoryLeavesLimitedPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, mem := withMemoryCount(inventory.Config{})
	svc, b := setup(t, &setupOpts{cfg: &cfg})
	dbtest.StockIn(t, b.pool, "GONE", 2)
	dbtest.StockIn(t, b.pool, "OPEN", 2)
	_, err := svc.SetLimits(ctx, stock.Limits{SKU: "GONE", MaxPerOrder: ptr[int64](2)}, "ops")
	require.NoError(t, err)
	for _, sku := range []string{"GONE", "OPEN"} {
		_, _, err = svc.Hold(ctx, holdReq("all-"+sku, item(sku, 2)))
		require.NoError(t, err)
		_, _, err = svc.Hold(ctx, holdReq("one-"+sku, item(sku, 1)))
		require.Equal(t, domain.CodeOutOfStock, code(err), "%v", err)
	}
	i := 0
	require.Eventually(t, func() bool {
		i++
		_, inMemory := fromMemory(ctx, svc, mem, fmt.Sprint("open", i), "OPEN", 1)
		return inMemory
	}, 10*time.Second, time.Millisecond, "memory answers for the pool without limits")

	before := mem.n.Load()
	_, _, err = svc.Hold(ctx, holdReq("again", item("GONE", 1)))
	require.Equal(t, domain.CodeOutOfStock, code(err), "%v", err)
	_, _, err = svc.Hold(ctx, holdReq("five", item("GONE", 5)))
	require.Equal(t, inventory.LimitMaxPerOrder, limitOf(err), "%v", err)
	require.Equal(t, before, mem.n.Load(), "the limited pool is not answered from memory")
}
