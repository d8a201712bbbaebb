package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestLockWaitsCountEachBusyAnswer: what the lock-wait rule counts is one
// per request answered busy because its stock row stayed locked: the
// first hold on a newly locked row (its batch times out, then a look finds
// the row still locked) counts once, like each hold after it that only
// looks, holds that arrive together, and a confirm whose hold's row is
// locked (its batch times out twice).
func TestLockWaitsCountEachBusyAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{LockTimeout: 100 * time.Millisecond}})
	for _, sku := range []string{"ONE", "THREE", "TOGETHER", "PAID", "FREE"} {
		dbtest.StockIn(t, b.pool, sku, 10)
	}
	paid, _, err := svc.Hold(ctx, holdReq("paid", item("PAID", 1)))
	require.NoError(t, err)
	require.Empty(t, svc.TakeLockWaits())

	oneAfterAnother := func(sku string, n int) {
		unlock := lockRow(t, b.pool, sku)
		defer unlock()
		for i := range n {
			_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint(sku, i), item(sku, 1)))
			require.Equal(t, domain.CodeBusy, code(err), "%v", err)
		}
	}
	oneAfterAnother("ONE", 1)
	oneAfterAnother("THREE", 3)

	unlock := lockRow(t, b.pool, "TOGETHER")
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = svc.Hold(ctx, holdReq(fmt.Sprint("together", i), item("TOGETHER", 1)))
		}()
	}
	wg.Wait()
	unlock()
	for _, err := range errs {
		require.Equal(t, domain.CodeBusy, code(err), "%v", err)
	}

	unlock = lockRow(t, b.pool, "PAID")
	_, err = svc.Confirm(ctx, paid.ID, shop)
	require.Equal(t, domain.CodeBusy, code(err), "%v", err)
	unlock()
	_, _, err = svc.Hold(ctx, holdReq("free", item("FREE", 1)))
	require.NoError(t, err)

	counts := map[string]int64{}
	for _, c := range svc.TakeLockWaits() {
		require.Equal(t, stock.MainPool, c.Pool)
		counts[c.SKU] = c.N
	}
	require.Equal(t, map[string]int64{"ONE": 1, "THREE": 3, "TOGETHER": 5, "PAID": 1}, counts)
	require.Empty(t, svc.TakeLockWaits(), "taken: the count starts again")
}
