package trips_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/trips"
	"github.com/stockhold/stockhold/jobs"
)

var quiet = slog.New(slog.DiscardHandler)

func setup(t *testing.T, set func(*config.Config)) (*app.Services, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return app.NewServices(config.DefaultsWith(set), pool, inserter, quiet), pool
}

func stockIn(t *testing.T, inv *inventory.Service, sku string, n int64) {
	t.Helper()
	_, err := inv.Adjust(context.Background(), inventory.Adjustment{SKU: sku, Delta: n, Reason: "test", Actor: "test"})
	require.NoError(t, err)
}

func hold(inv *inventory.Service, key, sku string, ttl int64) (inventory.Reservation, error) {
	r, _, err := inv.Hold(context.Background(), inventory.HoldRequest{Client: "shop", IdempotencyKey: key, TTLSeconds: ttl,
		Items: []inventory.Item{{SKU: sku, Quantity: 1}}})
	return r, err
}

func openAlert(t *testing.T, a *alerts.Service, kind string) (alerts.Alert, bool) {
	t.Helper()
	list, err := a.List(context.Background(), alerts.StatusOpen, 100)
	require.NoError(t, err)
	for _, x := range list {
		if x.Kind == kind {
			return x, true
		}
	}
	return alerts.Alert{}, false
}

// TestLockWaitsPauseTheSKU: a row kept locked past the lock timeout, so
// that holds on it answer busy, pauses that pool at the period's end once
// its busy answers reach the limit (3): at the limit and above it, with a
// critical alert naming the rule and the exact count; one under the limit
// is left alone.
func TestLockWaitsPauseTheSKU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deps, pool := setup(t, func(c *config.Config) { c.LockTimeout = 100 * time.Millisecond; c.TripLockWaits = 3 })
	for _, sku := range []string{"AT", "ABOVE", "BELOW", "COLD"} {
		stockIn(t, deps.Inventory, sku, 100)
	}

	busy := func(sku string, n int) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, `SELECT 1 FROM stock WHERE sku = $1 FOR UPDATE`, sku)
		require.NoError(t, err)
		for i := range n {
			_, err := hold(deps.Inventory, fmt.Sprint(sku, i), sku, 60)
			var de *domain.Error
			require.ErrorAs(t, err, &de)
			require.Equal(t, domain.CodeBusy, de.Code)
		}
	}
	busy("AT", 3)
	busy("ABOVE", 4)
	busy("BELOW", 2)
	_, err := hold(deps.Inventory, "cold", "COLD", 60)
	require.NoError(t, err)

	fired, err := deps.Trips.Check(ctx)
	require.NoError(t, err)
	subjects := map[string]trips.Fired{}
	for _, f := range fired {
		require.Equal(t, trips.RuleLockWaits, f.Rule)
		subjects[f.Subject] = f
	}
	require.Len(t, subjects, 2, "%v", fired)
	require.Contains(t, subjects["sku:AT/main"].Detail, "3 requests answered busy")
	require.Contains(t, subjects["sku:ABOVE/main"].Detail, "4 requests answered busy")
	status := func(sku string) string {
		st, err := deps.Inventory.GetStock(ctx, sku)
		require.NoError(t, err)
		return st.Pools[0].Status
	}
	require.Equal(t, inventory.StockPaused, status("AT"))
	require.Equal(t, inventory.StockPaused, status("ABOVE"))
	require.Equal(t, inventory.StockOnSale, status("BELOW"))
	require.Equal(t, inventory.StockOnSale, status("COLD"))
	list, err := deps.Alerts.List(ctx, alerts.StatusOpen, 100)
	require.NoError(t, err)
	counted := map[string]int64{}
	for _, a := range list {
		if a.Kind != "trip_lock_waits" {
			continue
		}
		require.Equal(t, "critical", a.Level)
		require.Contains(t, a.SuggestedAction, "Rule lock_waits fired")
		var d struct {
			LockWaits int64 `json:"lock_waits"`
			Threshold int64 `json:"threshold"`
		}
		require.NoError(t, json.Unmarshal(a.Details, &d))
		require.Equal(t, int64(3), d.Threshold)
		counted[a.Subject] = d.LockWaits
	}
	require.Equal(t, map[string]int64{"sku:AT/main": 3, "sku:ABOVE/main": 4}, counted)

	// The counts start again each period.
	fired, err = deps.Trips.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, fired)
}

// TestExpiryBacklogFiresAfterPeriods: held holds past their expiry over the
// limit fire the rule only after the configured periods in a row, with a
// critical alert, and stop sales when configured to; a period under the
// limit starts the count again.
func TestExpiryBacklogFiresAfterPeriods(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deps, pool := setup(t, func(c *config.Config) {
		c.TripExpiryBacklog, c.TripPeriods, c.TripStopSale, c.TripConfirmP99 = 2, 2, true, 0
	})
	stockIn(t, deps.Inventory, "A1", 100)
	var ids []uuid.UUID
	for i := range 3 {
		r, err := hold(deps.Inventory, fmt.Sprint("h", i), "A1", 60)
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	overdue := func(n int) {
		_, err := pool.Exec(ctx, `UPDATE reservations SET expires_at = CASE WHEN id = ANY($1) THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END
			WHERE id = ANY($2)`, ids[:n], ids)
		require.NoError(t, err)
	}
	check := func() []trips.Fired {
		f, err := deps.Trips.Check(ctx)
		require.NoError(t, err)
		return f
	}

	overdue(3)
	require.Empty(t, check(), "one period over: not yet")
	overdue(2)
	require.Empty(t, check(), "at the limit is not over it: the count starts again")
	overdue(3)
	require.Empty(t, check())
	fired := check()
	require.Len(t, fired, 1)
	require.Equal(t, trips.RuleExpiryBacklog, fired[0].Rule)
	a, ok := openAlert(t, deps.Alerts, "trip_expiry_backlog")
	require.True(t, ok)
	require.Equal(t, "critical", a.Level)
	st, err := deps.Inventory.StopSale(ctx)
	require.NoError(t, err)
	require.True(t, st.Active)
	require.Equal(t, trips.RuleExpiryBacklog, *st.Rule)
	require.Equal(t, trips.Actor, *st.Actor)
	_, err = hold(deps.Inventory, "during", "A1", 60)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeStopSale, de.Code)
}

// TestConfirmLatencyFires: a confirm p99 over its target for the periods
// in a row raises the alert without stopping sales (off by default).
func TestConfirmLatencyFires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deps, _ := setup(t, func(c *config.Config) { c.TripConfirmP99, c.TripPeriods = time.Nanosecond, 2 })
	stockIn(t, deps.Inventory, "A1", 100)
	confirm := func(key string) {
		r, err := hold(deps.Inventory, key, "A1", 60)
		require.NoError(t, err)
		_, err = deps.Inventory.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
		require.NoError(t, err)
	}
	confirm("a")
	fired, err := deps.Trips.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, fired)
	fired, err = deps.Trips.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, fired, "a period without confirms is not over target")
	confirm("b")
	_, err = deps.Trips.Check(ctx)
	require.NoError(t, err)
	confirm("c")
	fired, err = deps.Trips.Check(ctx)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	require.Equal(t, trips.RuleConfirmP99, fired[0].Rule)
	_, ok := openAlert(t, deps.Alerts, "trip_confirm_latency")
	require.True(t, ok)
	st, err := deps.Inventory.StopSale(ctx)
	require.NoError(t, err)
	require.False(t, st.Active, "stop-sale only when configured")
}
