package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
)

// waitForLockWaits waits until n backends of pool's database wait for a
// lock.
func waitForLockWaits(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting int
		assert.NoError(c, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		assert.Equal(c, n, waiting)
	}, 10*time.Second, 5*time.Millisecond)
}

// TestPartialReleaseRacesAWholeRelease is the race the one rule for every
// change to a hold exists for (docs/internals/DESIGN_NOTES.md), narrowed
// to the two transactions: a partial release of hold H waits for a stock
// row another transaction keeps locked, holding H; meanwhile a whole
// release of H (reconciliation's repair of a stuck hold, a rollback batch)
// starts and waits for H. When the partial release commits, the whole one
// must hand back what is left of H's lines, not what they were when its
// statement began: the units of a line come back once.
func TestPartialReleaseRacesAWholeRelease(t *testing.T) {
	for _, overdue := range []bool{false, true} {
		name := "held"
		if overdue {
			name = "overdue"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc, b := setup(t, nil)
			dbtest.StockIn(t, b.pool, "X1", 10)
			dbtest.StockIn(t, b.pool, "X2", 10)
			other, _, err := svc.Hold(ctx, holdReq("h2", item("X1", 5)))
			require.NoError(t, err)
			h, _, err := svc.Hold(ctx, holdReq("h", item("X1", 3), item("X2", 2)))
			require.NoError(t, err)
			if overdue {
				_, err = b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '10 minutes' WHERE id = $1`, h.ID)
				require.NoError(t, err)
			}

			// Someone keeps X1's stock row locked.
			blocker, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer blocker.Rollback(ctx) //nolint:errcheck // committed below unless the test failed first
			_, err = blocker.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'X1' FOR UPDATE`)
			require.NoError(t, err)

			partial := make(chan error, 1)
			go func() {
				_, err := svc.ReleaseItems(ctx, h.ID, shop, "one less", []inventory.Item{item("X1", 1)})
				partial <- err
			}()
			waitForLockWaits(t, b.pool, 1)

			whole := make(chan error, 1)
			go func() {
				whole <- pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
					_, err := svc.ReleaseTx(ctx, tx, []uuid.UUID{h.ID}, inventory.Outcome{
						Status: inventory.StatusExpired, Kind: "expire", Actor: "test:repair", Reason: "stuck"})
					return err
				})
			}()
			waitForLockWaits(t, b.pool, 2)

			require.NoError(t, blocker.Commit(ctx))
			require.NoError(t, <-partial)
			require.NoError(t, <-whole)

			x1 := pool(t, svc, "X1", "main")
			require.EqualValues(t, 5, x1.Reserved, "only the other hold's 5 units are still held")
			require.EqualValues(t, 5, x1.Available)
			require.EqualValues(t, 10, pool(t, svc, "X2", "main").Available)
			var back int64
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(sum(delta_available), 0) FROM ledger
				WHERE reservation_id = $1 AND sku = 'X1' AND kind <> 'reserve'`, h.ID).Scan(&back))
			require.EqualValues(t, 3, back, "H's 3 units of X1 come back once")

			// The other hold still confirms, and no more than the 10 units
			// can be held.
			_, err = svc.Confirm(ctx, other.ID, shop)
			require.NoError(t, err)
			_, _, err = svc.Hold(ctx, holdReq("big", item("X1", 6)))
			require.Error(t, err)
		})
	}
}
