package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestStopSaleWaitsForBatchesInFlight: a hold batch that read the switch
// as off and is still running (held up on a stock row another session
// keeps locked) either commits before a flip to on is answered or is
// refused: the flip waits for it, and answers only once its hold is
// committed. A batch that starts after the flip is refused.
func TestStopSaleWaitsForBatchesInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Flights: 1, LockTimeout: 10 * time.Second}})
	dbtest.StockIn(t, b.pool, "SLOW", 5)
	unlock := lockRow(t, b.pool, "SLOW")

	held := make(chan outcome, 1)
	go func() {
		r, replayed, err := svc.Hold(ctx, holdReq("in-flight", item("SLOW", 1)))
		held <- outcome{r, replayed, err}
	}()
	waitLockWait(t, b.pool) // the batch has read the switch and waits on the row

	type flip struct {
		err error
		// committed is whether the in-flight hold was in the database
		// when the flip answered.
		committed bool
	}
	flipped := make(chan flip, 1)
	go func() {
		_, err := svc.SetStopSale(ctx, stock.StopSaleChange{Active: true, Reason: "payments down", Actor: "alice"})
		var n int
		if err == nil {
			err = b.pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE idempotency_key = 'in-flight'`).Scan(&n)
		}
		flipped <- flip{err, n == 1}
	}()
	// The flip waits for the batch's share of the stop-sale lock; without
	// it, it would answer now, with the batch still free to commit.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if len(flipped) > 0 {
			return // answered: refused below
		}
		var n int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n))
		assert.Positive(c, n, "the flip waits for the batch in flight")
	}, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, flipped, "the flip answered while a batch that read the switch off was running")
	unlock()

	h := <-held
	f := <-flipped
	require.NoError(t, f.err)
	if h.err == nil {
		require.True(t, f.committed, "the hold decided with the switch off committed after the flip answered")
	} else {
		require.Equal(t, domain.CodeStopSale, code(h.err), "%v", h.err)
	}
	_, _, err := svc.Hold(ctx, holdReq("after", item("SLOW", 1)))
	require.Equal(t, domain.CodeStopSale, code(err), "%v", err)
}

// TestStopSaleFlipDoesNotBusyOthers: one client's stop-sale flipped
// while the flip waits for a batch in flight (here one held up on another
// SKU's row for 1.2 s, longer than the flip lasted in the reviewer's
// runs): the hold batches of other clients on a hot row queue behind the
// flip for its lock, then go on; none answers busy. Their wait for the
// flip counted against their lock timeout, and after three of them they
// answered busy, blaming the hot row.
func TestStopSaleFlipDoesNotBusyOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := setup(t, nil)
	other := b.another(inventory.Config{})
	slow := b.another(inventory.Config{LockTimeout: time.Minute})
	for _, name := range []string{"shop-b", "shop-c"} {
		_, err := auth.Create(ctx, b.pool, name, auth.RoleShop)
		require.NoError(t, err)
	}
	dbtest.StockIn(t, b.pool, "HOT", 1_000_000)
	dbtest.StockIn(t, b.pool, "SLOW", 5)

	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		holds    atomic.Int64
		mu       sync.Mutex
		problems []error
	)
	busied := make(chan struct{}, 1)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := []string{"shop-a", "shop-b"}[g%2]
			for n := 0; !stop.Load(); n++ {
				_, _, err := a.Hold(ctx, inventory.HoldRequest{Client: client, IdempotencyKey: fmt.Sprint(g, "-", n), Items: []inventory.Item{item("HOT", 1)}})
				if err == nil {
					holds.Add(1)
					continue
				}
				mu.Lock()
				problems = append(problems, err)
				mu.Unlock()
				select {
				case busied <- struct{}{}:
				default:
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return holds.Load() > 100 }, 10*time.Second, time.Millisecond)

	// A batch of the slow instance reads the switch and waits on SLOW's
	// row; the flip, through another instance, waits for it.
	unlock := lockRow(t, b.pool, "SLOW")
	held := make(chan error, 1)
	go func() {
		_, _, err := slow.Hold(ctx, holdReq("slow", item("SLOW", 1)))
		held <- err
	}()
	waitLockWait(t, b.pool)
	flipped := make(chan error, 1)
	go func() {
		_, err := other.SetStopSale(ctx, stock.StopSaleChange{Client: "shop-c", Active: true, Reason: "audit", Actor: "alice"})
		flipped <- err
	}()
	select {
	case <-busied:
	case <-time.After(1200 * time.Millisecond):
	}
	unlock()
	require.NoError(t, <-held)
	require.NoError(t, <-flipped)
	before := holds.Load()
	require.Eventually(t, func() bool { return holds.Load() > before+100 }, 10*time.Second, time.Millisecond)
	stop.Store(true)
	wg.Wait()
	require.Empty(t, problems, "holds of clients the flip does not stop were refused")
}

// TestStopSaleFlipWaitBounded: a hold batch waits for a flip that is
// itself stuck (behind a batch held up on a row someone keeps locked) up
// to the longer of 2 s and four lock timeouts, then answers busy saying
// so, without blaming the rows it asked for.
func TestStopSaleFlipWaitBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := setup(t, &setupOpts{cfg: &inventory.Config{LockTimeout: 100 * time.Millisecond}})
	slow := b.another(inventory.Config{LockTimeout: time.Minute})
	_, err := auth.Create(ctx, b.pool, "shop-c", auth.RoleShop)
	require.NoError(t, err)
	dbtest.StockIn(t, b.pool, "FREE", 5)
	dbtest.StockIn(t, b.pool, "SLOW", 5)
	unlock := lockRow(t, b.pool, "SLOW")
	held := make(chan error, 1)
	go func() {
		_, _, err := slow.Hold(ctx, holdReq("slow", item("SLOW", 1)))
		held <- err
	}()
	waitLockWait(t, b.pool)
	flipped := make(chan error, 1)
	go func() {
		_, err := a.SetStopSale(ctx, stock.StopSaleChange{Client: "shop-c", Active: true, Reason: "audit", Actor: "alice"})
		flipped <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n))
		assert.Positive(c, n, "the flip waits for the batch in flight")
	}, 10*time.Second, 5*time.Millisecond)

	asked := time.Now()
	_, _, err = a.Hold(ctx, holdReq("free", item("FREE", 1)))
	waited := time.Since(asked)
	require.Equal(t, domain.CodeBusy, code(err), "%v", err)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Detail, "stop-sale switch is being flipped")
	require.Empty(t, de.SKU, "the row is not to blame")
	require.GreaterOrEqual(t, waited, 2*time.Second, "it waited for the flip first")
	unlock()
	require.NoError(t, <-held)
	require.NoError(t, <-flipped)
	_, _, err = a.Hold(ctx, holdReq("free-after", item("FREE", 1)))
	require.NoError(t, err)
}
