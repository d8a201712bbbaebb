package inventory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestSoldOutForgottenByTransfersHere: a transfer received or cancelled
// through this instance (plain or idempotent) is one of its writes that
// puts stock back: the very next hold for the SKU is granted, not refused
// from memory until the recheck bound (ten seconds here) lapses.
func TestSoldOutForgottenByTransfersHere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		step func(svc *inventory.Service, tr stock.Transfer) error
	}{
		{"received", func(svc *inventory.Service, tr stock.Transfer) error {
			_, err := svc.ReceiveTransfer(context.Background(), stock.TransferStep{ID: tr.ID, Quantity: 2, Actor: "ops"})
			return err
		}},
		{"received once", func(svc *inventory.Service, tr stock.Transfer) error {
			_, _, err := svc.ReceiveTransferOnce(context.Background(), idempotency.NewKey("ops", "receipt"),
				stock.TransferStep{ID: tr.ID, Quantity: 2, Actor: "ops"})
			return err
		}},
		{"cancelled", func(svc *inventory.Service, tr stock.Transfer) error {
			_, err := svc.CancelTransfer(context.Background(), stock.TransferStep{ID: tr.ID, Reason: "not needed", Actor: "ops"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: 10 * time.Second})
			svc, b := setup(t, &setupOpts{cfg: &cfg})
			dbtest.Location(t, b.pool, "berlin", 2)
			dbtest.StockIn(t, b.pool, "ROAD", 2)
			tr, _, err := svc.CreateTransferOnce(ctx, idempotency.NewKey("ops", "send"),
				stock.NewTransfer{SKU: "ROAD", From: "default", To: "berlin", Quantity: 2, Reason: "restock berlin", Actor: "ops"})
			require.NoError(t, err)
			i := 0
			require.Eventually(t, func() bool {
				i++
				err, inMemory := fromMemory(ctx, svc, mem, fmt.Sprint("k", i), "ROAD", 1)
				return inMemory && code(err) == domain.CodeOutOfStock
			}, 15*time.Second, time.Millisecond, "nothing available anywhere while the units travel")
			require.NoError(t, tc.step(svc, tr))
			err, inMemory := fromMemory(ctx, svc, mem, "after", "ROAD", 2)
			require.False(t, inMemory)
			require.NoError(t, err, "the 2 are back on a shelf")
		})
	}
}
