package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// refusedHold is a hold of one unit of sku by client under key, refused
// out_of_stock by a batch that found nothing left on its one row.
func refusedHold(sku, client, key string) (hold, verdict) {
	h := holdOf(Item{SKU: sku, Quantity: 1})
	h.req.Client, h.req.IdempotencyKey = client, key
	return h, verdict{line: h.wants[0], why: domain.CodeOutOfStock, places: 1}
}

// TestOutOfStockDetail: the refusal of a SKU with nothing left reads as
// the fmt.Sprintf it is written without.
func TestOutOfStockDetail(t *testing.T) {
	t.Parallel()
	for _, sku := range []string{"A1", `a"b\c`, "caf\u00e9 \U0001F600", "tab\there\x01", "bad\xffutf8", ""} {
		for _, n := range [][2]int64{{0, 1}, {0, 250}, {3, 1000}, {99, 100}, {12, 1 << 40}} {
			h, v := refusedHold(sku, "shop", "k")
			h.wants[0].Quantity, v.line.Quantity, v.left = n[1], n[1], n[0]
			var de *domain.Error
			require.ErrorAs(t, (*Service)(nil).refusal(context.Background(), h, v), &de)
			require.Equal(t, fmt.Sprintf("SKU %q (pool %s) has %d available, %d requested", sku, stock.MainPool, n[0], n[1]), de.Detail)
		}
	}
}

// TestRetryInFlightGoesToItsBatch: a retry that arrives while its first
// attempt is still in a hold batch of this instance (not committed, so
// the key lookup cannot see it) is not refused from memory, even when
// memory would refuse a new key then: it waits for the batch and gets
// the first attempt's answer.
func TestRetryInFlightGoesToItsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	svc := New(pool, slog.New(slog.DiscardHandler), Config{SoldOutRecheck: time.Minute})
	svc.soldOut.looping = true // no recheck loop: the entry stays as planted
	dbtest.StockIn(t, pool, "ONE", 1)
	started, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // a failure must not leave the batch waiting
	svc.beforeGrant = func(r HoldRequest) {
		if r.IdempotencyKey == "k" {
			close(started)
			<-gate
		}
	}
	req := HoldRequest{Client: "shop-a", IdempotencyKey: "k", Items: []Item{{SKU: "ONE", Quantity: 1}}}
	type answer struct {
		r        Reservation
		replayed bool
		err      error
	}
	first, retry := make(chan answer, 1), make(chan answer, 1)
	go func() {
		r, replayed, err := svc.Hold(ctx, req)
		first <- answer{r, replayed, err}
	}()
	<-started

	// Memory now holds the pool sold out, trusted (as a recheck read
	// made while the batch was in flight could leave it).
	h, v := refusedHold("ONE", "shop-a", "other")
	seen := svc.soldOut.seenNow()
	svc.soldOut.stoppedRead(seen, nil)
	svc.soldOut.remember(seen, rowsOf(lockedRow{sku: "ONE", location: def, pool: stock.MainPool, status: stock.StockOnSale, active: true}), []hold{h}, []verdict{v})
	_, _, err := svc.Hold(ctx, HoldRequest{Client: "shop-a", IdempotencyKey: "fresh", Items: []Item{{SKU: "ONE", Quantity: 1}}})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeOutOfStock}, "a new key is refused from memory")

	go func() {
		r, replayed, err := svc.Hold(ctx, req)
		retry <- answer{r, replayed, err}
	}()
	require.Eventually(t, func() bool { return PendingHolds(svc) == 1 }, 10*time.Second, time.Millisecond,
		"the retry waits for the batches")
	open()
	f, r := <-first, <-retry
	require.NoError(t, f.err)
	require.NoError(t, r.err)
	require.True(t, r.replayed)
	require.Equal(t, f.r.ID, r.r.ID)
}
