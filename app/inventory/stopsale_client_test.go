package inventory_test

import (
	"context"
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

// TestClientStopSaleWaitsForRunningBatches: a hold batch that read a
// client's stop-sale switch as off and is still running (held up on a
// stock row another transaction keeps locked) commits before the flip of
// that switch is answered: the flip waits for it. After the flip, the
// client's holds are refused and another client's go on.
func TestClientStopSaleWaitsForRunningBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{LockTimeout: time.Minute}})
	dbtest.StockIn(t, b.pool, "A1", 10)
	_, err := auth.Create(ctx, b.pool, "shop-b", auth.RoleShop)
	require.NoError(t, err)
	hold := func(client, key string) error {
		_, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: client, IdempotencyKey: key, Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
		return err
	}
	// waiting counts this database's sessions waiting for a lock of type
	// locktype.
	waiting := func(c assert.TestingT, locktype string) int {
		var n int
		assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND l.locktype = $1 AND a.datname = current_database()`, locktype).Scan(&n))
		return n
	}

	dba, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dba.Rollback(context.Background()) }) // on a failure, before the invariants
	_, err = dba.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'A1' FOR UPDATE`)
	require.NoError(t, err)

	held := make(chan error, 1)
	go func() { held <- hold("shop-b", "during") }()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, waiting(c, "transactionid"), "the batch read the switch as off and waits for A1's row")
	}, 30*time.Second, 10*time.Millisecond)

	flipped := make(chan error, 1)
	go func() {
		_, err := svc.SetStopSale(ctx, stock.StopSaleChange{Client: "shop-b", Active: true, Reason: "channel oversells", Actor: "alice"})
		flipped <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, waiting(c, "advisory"), "the flip waits for the batch")
	}, 30*time.Second, 10*time.Millisecond)
	select {
	case err := <-flipped:
		require.Fail(t, "the flip was answered while a batch that read the switch as off could still commit", "%v", err)
	case err := <-held:
		require.Fail(t, "the hold was answered while its row was locked", "%v", err)
	default:
	}

	require.NoError(t, dba.Rollback(ctx))
	require.NoError(t, <-held, "the batch decided with the switch off commits")
	require.NoError(t, <-flipped)
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM reservations WHERE client = 'shop-b'`))

	err = hold("shop-b", "after")
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeStopSale, de.Code)
	require.NoError(t, hold("shop-a", "other"), "another client goes on")
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM reservations WHERE client = 'shop-b'`))
}
