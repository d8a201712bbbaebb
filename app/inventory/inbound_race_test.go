package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestInboundReceiptsRaceHolds races holds (some confirmed, some
// released) on a SKU with nothing on hand against the receipts of a
// supplier's notice of 40 arriving 4 at a time, and a second notice
// received in part, then closed short. Holds take only what has arrived:
// the units held or sold at the end are never more than what was
// received, every receipt lands, incoming ends at zero, and the books close
// (dbtest.RequireInvariants: counters against lines and ledger, incoming
// against the open notices).
func TestInboundReceiptsRaceHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _ := setup(t, nil)
	expected := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	notice := func(name string, q int64) stock.Inbound {
		i, _, err := svc.CreateInboundOnce(ctx, idempotency.NewKey("ops", name), stock.NewInbound{SupplierRef: name,
			ExpectedOn: expected, Lines: []stock.NewInboundLine{{SKU: "IN", Quantity: q}}, Actor: "ops"})
		require.NoError(t, err)
		return i
	}
	first, second := notice("PO-1", 40), notice("PO-2", 10)

	var (
		work              sync.WaitGroup
		held, released    atomic.Int64
		refused, receipts atomic.Int64
		errs              = make(chan error, 200)
	)
	for w := range 8 {
		work.Go(func() {
			for i := range 12 {
				r, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("w%d-%d", w, i),
					Items: []inventory.Item{{SKU: "IN", Quantity: 1}}})
				if code(err) == domain.CodeOutOfStock || code(err) == domain.CodeBusy {
					refused.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					continue
				}
				held.Add(1)
				switch i % 3 {
				case 0:
					if _, err := svc.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"}); err != nil {
						errs <- err
					}
				case 1:
					if _, err := svc.Release(ctx, r.ID, inventory.Caller{Name: "shop"}, ""); err != nil {
						errs <- err
					}
					released.Add(1)
				}
			}
		})
	}
	work.Go(func() {
		for range 10 {
			if _, err := svc.ReceiveInbound(ctx, stock.InboundStep{ID: first.ID, SKU: "IN", Quantity: 4, Actor: "dock"}); err != nil {
				errs <- err
				continue
			}
			receipts.Add(4)
		}
	})
	work.Go(func() {
		if _, err := svc.ReceiveInbound(ctx, stock.InboundStep{ID: second.ID, SKU: "IN", Quantity: 3, Actor: "dock"}); err != nil {
			errs <- err
			return
		}
		receipts.Add(3)
		if _, err := svc.CloseInbound(ctx, stock.InboundStep{ID: second.ID, Reason: "supplier short", Actor: "dock"}); err != nil {
			errs <- err
		}
	})
	work.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 43, receipts.Load(), "every receipt lands")
	p := pool(t, svc, "IN", stock.MainPool)
	require.Zero(t, p.Incoming)
	require.EqualValues(t, 43, p.Total)
	require.Equal(t, held.Load()-released.Load(), p.Reserved+p.Sold, "what holds hold is what was granted and kept")
	require.LessOrEqual(t, p.Reserved+p.Sold, int64(43), "never more than arrived")
	t.Logf("holds granted %d (released %d), refused %d; %d on hand unheld", held.Load(), released.Load(), refused.Load(), p.Available)
}
