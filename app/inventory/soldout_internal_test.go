package inventory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

// soldOutAt is memory whose clock reads *now, with its recheck loop left
// to the test (renew is called by hand).
func soldOutAt(now *time.Time) *soldOut {
	m := newSoldOut(250 * time.Millisecond)
	m.now = func() time.Time { return *now }
	m.looping = true
	return m
}

// refusedHold is a hold of one unit of sku by client under key, refused
// out_of_stock by a batch that found nothing left on its one row.
func refusedHold(sku, client, key string) (hold, verdict) {
	h := holdOf(Item{SKU: sku, Quantity: 1})
	h.req.Client, h.req.IdempotencyKey = client, key
	return h, verdict{line: h.wants[0], why: domain.CodeOutOfStock, places: 1}
}

// TestSoldOutLearnsKeysWhileBatchesRefuse: a recheck read that learnt
// the keys of the holds on a sold-out pool's rows counts although hold
// batches refused (and remembered) the pool again while it ran, as they
// do one after another until memory takes over; before, such a read was
// dropped as older than the entry, and a pool hammered by 64 clients
// waited up to 2 s for a read that no batch overtook. A read that missed
// keys (the entry was forgotten and remembered meanwhile, knowing none)
// does not make it usable.
func TestSoldOutLearnsKeysWhileBatchesRefuse(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	now := start
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	gone := rowsOf(lockedRow{sku: "GONE", location: def, pool: MainPool, status: StockOnSale, active: true, version: 7})
	ask, _, _ := askOf(holdOf(Item{SKU: "GONE", Quantity: 1}))
	readRows := []soldOutRow{{sku: "GONE", location: def, pool: MainPool, version: 7}}
	renewal := func(at time.Time, after int64) soldOutRenewal {
		return soldOutRenewal{ask: ask, at: at, rows: readRows, keys: nil,
			after: map[string]int64{rowKey("GONE", def, MainPool): after}}
	}

	m := soldOutAt(&now)
	m.stoppedRead(soldOutSeen{at: start}, nil)
	h, v := refusedHold("GONE", "shop", "k1")
	m.remember(soldOutSeen{at: at(1)}, gone, []hold{h}, []verdict{v})
	_, ok := m.refuse(h)
	require.False(t, ok, "the keys of the pool's holds are not known yet")

	// The loop's read begins at 10 ms; a batch refuses the pool at 12 ms
	// and remembers it; the read's answer arrives at 20 ms.
	renewed := renewal(at(10), 0)
	renewed.keys = []uint64{m.keyHash("shop", "rush-1")}
	m.remember(soldOutSeen{at: at(12)}, gone, []hold{h}, []verdict{v})
	now = at(20)
	m.renew([]soldOutRenewal{renewed})
	got, ok := m.refuse(h)
	require.True(t, ok, "memory answers once the keys are known")
	require.Equal(t, v.why, got.why)
	rush, _ := refusedHold("GONE", "shop", "rush-1")
	_, ok = m.refuse(rush)
	require.False(t, ok, "a key that made a hold on the pool goes to its batch")
	require.Equal(t, at(12), m.entries[ask].readAt, "the entry rests on the batch's newer read")

	// Forgotten (a hold granted on the pool) and remembered again by a
	// batch that began before the next read: that read asked for keys
	// after version 7 only, which the new entry does not know through.
	m.mu.Lock()
	m.forgetLocked(poolKey("GONE", MainPool))
	m.mu.Unlock()
	m.remember(soldOutSeen{at: at(25)}, gone, []hold{h}, []verdict{v})
	now = at(40)
	m.renew([]soldOutRenewal{renewal(at(30), 7)})
	_, ok = m.refuse(h)
	require.False(t, ok, "keys read after version 7 leave the new entry's earlier ones unknown")
	m.renew([]soldOutRenewal{renewal(at(35), 0)})
	_, ok = m.refuse(h)
	require.True(t, ok, "a read of every key does")
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
			require.Equal(t, fmt.Sprintf("SKU %q (pool %s) has %d available, %d requested", sku, MainPool, n[0], n[1]), de.Detail)
		}
	}
}
