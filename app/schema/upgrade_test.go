package schema_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/app/stock"
)

// locationsVersion is the first migration of locations.
const locationsVersion = 134

// TestUpgradeToLocationsKeepsEveryRow migrates a populated database from
// the schema before locations: thousands of stock rows, held and confirmed
// holds with their lines and ledger rows, ledger checkpoints, a pool of
// units with a held unit, a campaign. Afterwards every row is there, at
// location default, with its counters; the books balance; and the service
// goes on with the holds made before (a confirm, a release) and with new
// ones.
func TestUpgradeToLocationsKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, m := before(t, locationsVersion)

	held, confirmed, seatHold := uuid.New(), uuid.New(), uuid.New()
	_, err := pool.Exec(ctx, bind(`
		INSERT INTO stock (sku, pool, total, available, version)
		SELECT 'BULK-' || lpad(n::text, 5, '0'), 'main', n % 7, n % 7, 1 FROM generate_series(1, 5000) n;
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
		SELECT 'BULK-' || lpad(n::text, 5, '0'), 'main', 'stock_in', n % 7, n % 7, 0, 0, 1, 'seed' FROM generate_series(1, 5000) n;
		INSERT INTO ledger_checkpoints (sku, pool, stock_version, total, available, reserved, sold)
		SELECT 'BULK-' || lpad(n::text, 5, '0'), 'main', 1, n % 7, n % 7, 0, 0 FROM generate_series(1, 2500) n;

		INSERT INTO stock (sku, pool, total, available, reserved, sold, version) VALUES ('A1', 'main', 10, 5, 3, 2, 4);
		INSERT INTO reservations (id, client, idempotency_key, request_hash, status, expires_at, confirmed_at) VALUES
			($1, 'shop', 'k-held', 'h', 'held', now() + interval '1 hour', NULL),
			($2, 'shop', 'k-confirmed', 'h', 'confirmed', now() + interval '1 hour', now());
		INSERT INTO reservation_lines (reservation_id, sku, pool, quantity) VALUES ($1, 'A1', 'main', 3), ($2, 'A1', 'main', 2);
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, reservation_id, actor) VALUES
			('A1', 'main', 'stock_in', 10, 10, 0, 0, 1, NULL, 'seed'),
			('A1', 'main', 'reserve', 0, -3, 3, 0, 2, $1, 'shop'),
			('A1', 'main', 'reserve', 0, -2, 2, 0, 3, $2, 'shop'),
			('A1', 'main', 'confirm', 0, 0, -2, 2, 4, $2, 'shop');`, held, confirmed))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, bind(`
		INSERT INTO stock (sku, pool, total, available, reserved, version, serialized) VALUES ('SHOW', 'main', 2, 1, 1, 2, true);
		INSERT INTO units (sku, id, pool, group_name, position, status, reservation_id) VALUES
			('SHOW', 'A-1', 'main', 'A', 1, 'available', NULL);
		INSERT INTO reservations (id, client, idempotency_key, request_hash, status, expires_at) VALUES
			($1, 'shop', 'k-seat', 'h', 'held', now() + interval '1 hour');
		INSERT INTO units (sku, id, pool, group_name, position, status, reservation_id) VALUES
			('SHOW', 'A-2', 'main', 'A', 2, 'held', $1);
		INSERT INTO reservation_lines (reservation_id, sku, pool, quantity) VALUES ($1, 'SHOW', 'main', 1);
		INSERT INTO reservation_units (reservation_id, sku, unit_id, pool) VALUES ($1, 'SHOW', 'A-2', 'main');
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, reservation_id, actor, units) VALUES
			('SHOW', 'main', 'stock_in', 2, 2, 0, 0, 1, NULL, 'seed', '{A-1,A-2}'),
			('SHOW', 'main', 'reserve', 0, -1, 1, 0, 2, $1, 'shop', '{A-2}');`, seatHold))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO campaigns (id, starts_at, ends_at, hold_ttl, created_by) VALUES ('bf', now() + interval '1 day', now() + interval '2 days', interval '10 minutes', 'seed');
		INSERT INTO campaign_allotments (campaign, sku, quantity) VALUES ('bf', 'A1', 1);`)
	require.NoError(t, err)
	counts := func() map[string]int {
		out := map[string]int{}
		for _, table := range []string{"stock", "reservations", "reservation_lines", "ledger", "ledger_checkpoints", "units",
			"campaign_allotments"} {
			out[table] = dbtest.Count(t, pool, `SELECT count(*) FROM `+table)
		}
		// The holds' record of their units: rows of reservation_units
		// before migration 141, the lines' units after.
		held := `SELECT coalesce(sum(cardinality(units)), 0)::int FROM reservation_lines`
		if dbtest.Count(t, pool, `SELECT count(*) FROM pg_class WHERE relname = 'reservation_units'`) > 0 {
			held = `SELECT count(*) FROM reservation_units`
		}
		out["units of holds"] = dbtest.Count(t, pool, held)
		out["stock totals"] = dbtest.Count(t, pool, `SELECT sum(total + available + reserved + sold)::int FROM stock`)
		return out
	}
	before := counts()

	_, err = m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, before, counts(), "every row is kept")
	for _, table := range []string{"stock", "reservation_lines", "ledger", "ledger_checkpoints", "units", "campaign_allotments"} {
		require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM `+table+` WHERE location <> 'default'`), "%s is at default", table)
	}
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE NOT i.indisvalid AND c.relnamespace = 'public'::regnamespace`), "no index left invalid")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM pg_constraint
		WHERE NOT convalidated AND conname IN ('stock_balanced', 'stock_location_fkey', 'reservation_lines_stock_fkey', 'units_stock_fkey')`),
		"the constraints added NOT VALID are validated")
	dbtest.RequireInvariants(t, pool)

	// The service goes on with what was there.
	svc := inventory.New(pool, slog.New(slog.DiscardHandler), inventory.Config{})
	shop := inventory.Caller{Name: "shop"}
	r, err := svc.Confirm(ctx, held, shop)
	require.NoError(t, err)
	require.Equal(t, "default", r.Items[0].Location)
	_, err = svc.Release(ctx, seatHold, shop, "")
	require.NoError(t, err)
	st, err := svc.GetStock(ctx, "A1")
	require.NoError(t, err)
	require.Equal(t, stock.Pool{Location: "default", Pool: "main", Counters: stock.Counters{Total: 10, Available: 5, Sold: 5}, Status: "on_sale"},
		strip(st.Pools[0]))
	_, _, err = svc.CreateLocationOnce(ctx, idempotency.NewKey("ops", "berlin"), stock.NewLocation{ID: "berlin", Name: "Berlin", Actor: "ops"})
	require.NoError(t, err)
	_, _, err = svc.CreateTransferOnce(ctx, idempotency.NewKey("ops", "t"), stock.NewTransfer{SKU: "BULK-00006", From: "default", To: "berlin",
		Quantity: 6, Reason: "moving", Actor: "ops"})
	require.NoError(t, err)
	h, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "new", Items: []inventory.Item{{SKU: "BULK-00005", Quantity: 5}}})
	require.NoError(t, err)
	require.Equal(t, "default", h.Items[0].Location)
	dbtest.RequireInvariants(t, pool)
}

// before returns a fresh database migrated down to the version before
// version, and its migrator (closed when the test ends).
func before(t *testing.T, version int64) (*pgxpool.Pool, *schema.Migrator) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	m, err := schema.New(pool, nil)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	for {
		current, _, err := m.Versions(ctx)
		require.NoError(t, err)
		if current < version {
			return pool, m
		}
		_, err = m.Down(ctx)
		require.NoError(t, err)
	}
}

// strip leaves out what a comparison of counters does not care about.
func strip(p stock.Pool) stock.Pool {
	p.UpdatedAt = time.Time{}
	return p
}

// bind puts ids into a script of several statements (which takes no
// parameters): $1 is the first id, $2 the second.
func bind(script string, ids ...uuid.UUID) string {
	for i := len(ids) - 1; i >= 0; i-- {
		script = strings.ReplaceAll(script, fmt.Sprintf("$%d", i+1), "'"+ids[i].String()+"'")
	}
	return script
}
