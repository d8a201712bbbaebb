package schema_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
)

// fillfactorVersion is the migration that leaves room on stock's pages.
const fillfactorVersion = 152

// TestStockFillfactorUpgradeKeepsServingHolds migrates a populated
// database (3,000 stock rows on packed pages) to stock's fill factor
// while four clients keep placing holds: no hold fails. Before it, a
// hold on a row of a packed page moves the row to another page (a new
// entry in each of stock's indexes); after it, a hold on a row of a page
// written since stays on its page (a HOT update).
func TestStockFillfactorUpgradeKeepsServingHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, m := before(t, fillfactorVersion)
	holdsOfThisRevision(t, pool)
	seed := func(prefix string) {
		t.Helper()
		_, err := pool.Exec(ctx, `
			INSERT INTO stock (sku, pool, total, available, version)
			SELECT $1 || lpad(n::text, 5, '0'), 'main', 1000, 1000, 1 FROM generate_series(1, 3000) n`, prefix)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `
			INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
			SELECT $1 || lpad(n::text, 5, '0'), 'main', 'stock_in', 1000, 1000, 0, 0, 1, 'seed' FROM generate_series(1, 3000) n`, prefix)
		require.NoError(t, err)
	}
	svc := inventory.New(pool, slog.New(slog.DiscardHandler), inventory.Config{})
	hold := func(key, sku string) error {
		_, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: key,
			Items: []inventory.Item{{SKU: sku, Quantity: 1}}})
		return err
	}
	// staysOnPage holds a unit of sku and says whether its row kept its page.
	staysOnPage := func(sku string) bool {
		t.Helper()
		page := func() string {
			var p string
			require.NoError(t, pool.QueryRow(ctx, `SELECT (ctid::text::point)[0]::text FROM stock WHERE sku = $1`, sku).Scan(&p))
			return p
		}
		was := page()
		require.NoError(t, hold("page-"+sku, sku))
		return page() == was
	}

	seed("BULK-")
	require.False(t, staysOnPage("BULK-00002"), "on a packed page an update moves the row")

	holdThrough(t, svc, func() {
		_, err := m.Up(ctx)
		require.NoError(t, err)
	})

	for _, table := range []string{"stock", "ledger_checkpoints"} {
		require.Equal(t, []string{"fillfactor=90"}, reloptions(t, pool, table), table)
	}
	seed("NEW-")
	require.True(t, staysOnPage("NEW-00002"), "on a page written since, the update is HOT")
	dbtest.RequireInvariants(t, pool)
}

func reloptions(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	var opts []string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, table).Scan(&opts))
	return opts
}
