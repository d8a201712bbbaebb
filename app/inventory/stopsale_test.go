package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
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
		_, err := svc.SetStopSale(ctx, inventory.StopSaleChange{Active: true, Reason: "payments down", Actor: "alice"})
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
