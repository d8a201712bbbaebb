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
	"github.com/stockhold/stockhold/app/stock"
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
	_, err := inv.Adjust(context.Background(), stock.Adjustment{SKU: sku, Delta: n, Reason: "test", Actor: "test"})
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
	require.Equal(t, stock.StockPaused, status("AT"))
	require.Equal(t, stock.StockPaused, status("ABOVE"))
	require.Equal(t, stock.StockOnSale, status("BELOW"))
	require.Equal(t, stock.StockOnSale, status("COLD"))
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
// critical alert; configured to act, it pauses the pool the overdue holds
// are on (other pools sell) rather than all sales; a period under the
// limit starts the count again. Resuming the pool shows what paused it.
func TestExpiryBacklogFiresAfterPeriods(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deps, pool := setup(t, func(c *config.Config) {
		c.TripExpiryBacklog, c.TripPeriods, c.TripStopSale, c.TripConfirmP99 = 2, 2, true, 0
	})
	stockIn(t, deps.Inventory, "A1", 100)
	stockIn(t, deps.Inventory, "B1", 100)
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
	require.Equal(t, "sku:A1/main", fired[0].Subject)
	a, ok := openAlert(t, deps.Alerts, "trip_expiry_backlog")
	require.True(t, ok)
	require.Equal(t, "critical", a.Level)
	require.Equal(t, "sku:A1/main", a.Subject)
	require.Contains(t, a.SuggestedAction, "A1 (pool main) is behind 3 of the overdue holds")
	st, err := deps.Inventory.StopSale(ctx)
	require.NoError(t, err)
	require.False(t, st.Active, "the pool it can name is paused, not every sale")
	_, err = hold(deps.Inventory, "during", "A1", 60)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeSKUPaused, de.Code)
	_, err = hold(deps.Inventory, "other", "B1", 60)
	require.NoError(t, err, "other pools sell")

	// Lifting the trip shows what tripped it.
	_, err = pool.Exec(ctx, `UPDATE reservations SET expires_at = now() + interval '1 hour' WHERE id = ANY($1)`, ids)
	require.NoError(t, err)
	lifted, err := deps.Inventory.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "expiry caught up", Actor: "alice"}})
	require.NoError(t, err)
	require.NotNil(t, lifted.Paused)
	require.Equal(t, trips.Actor, lifted.Paused.Actor)
	require.Contains(t, *lifted.Paused.Reason, "rule expiry_backlog: more than 2 held holds past their expiry for 2 periods")
}

// TestSpreadBacklogStopsSales: a backlog no pool is behind a tenth of
// (one overdue hold on each of 12 SKUs) cannot name pools to pause: the
// rule, configured to act, stops sales, and turning stop-sale off shows
// the rule that stopped them.
func TestSpreadBacklogStopsSales(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deps, pool := setup(t, func(c *config.Config) {
		c.TripExpiryBacklog, c.TripPeriods, c.TripStopSale, c.TripConfirmP99 = 2, 1, true, 0
	})
	for i := range 12 {
		sku := fmt.Sprint("S", i)
		stockIn(t, deps.Inventory, sku, 10)
		_, err := hold(deps.Inventory, sku, sku, 60)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	fired, err := deps.Trips.Check(ctx)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	require.Equal(t, "service", fired[0].Subject)
	require.Contains(t, fired[0].Detail, "spread over more pools than it can name")
	st, err := deps.Inventory.StopSale(ctx)
	require.NoError(t, err)
	require.True(t, st.Active)
	require.Equal(t, trips.RuleExpiryBacklog, *st.Rule)
	for i := range 12 {
		s, err := deps.Inventory.GetStock(ctx, fmt.Sprint("S", i))
		require.NoError(t, err)
		require.Equal(t, stock.StockOnSale, s.Pools[0].Status, "no pool paused")
	}
	off, err := deps.Inventory.SetStopSale(ctx, stock.StopSaleChange{Active: false, Reason: "expiry caught up", Actor: "alice"})
	require.NoError(t, err)
	require.NotNil(t, off.Lifted)
	require.Equal(t, trips.RuleExpiryBacklog, *off.Lifted.Rule)
	require.Equal(t, trips.Actor, *off.Lifted.Actor)
}

// TestRulesCountAcrossInstances: two instances on one database, each
// under a rule's limit alone, together over it: the lock-wait rule pauses
// the pool once (the instance that decides the period first acts, the
// other does nothing), the backlog's periods in a row count whichever
// instance decided each, and the confirms of both are summed. Counted per
// process, none of these would fire.
func TestRulesCountAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	alertSvc := alerts.New(pool, nil, false)
	invA := inventory.New(pool, quiet, inventory.Config{LockTimeout: 100 * time.Millisecond})
	invB := inventory.New(pool, quiet, inventory.Config{LockTimeout: 100 * time.Millisecond})
	cfg := trips.Config{Interval: time.Minute, LockWaits: 3, ExpiryBacklog: 1, ConfirmP99: time.Hour, Periods: 2, Log: quiet}
	cfgA, cfgB := cfg, cfg
	cfgA.Instance, cfgB.Instance = "a", "b"
	a, b := trips.New(pool, invA, alertSvc, cfgA), trips.New(pool, invB, alertSvc, cfgB)
	for _, sku := range []string{"HOT", "LATE"} {
		stockIn(t, invA, sku, 100)
	}

	// Two requests answered busy on HOT by each instance: 4 of 3.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'HOT' FOR UPDATE`)
	require.NoError(t, err)
	for i, inv := range []*inventory.Service{invA, invA, invB, invB} {
		_, err := hold(inv, fmt.Sprint("busy", i), "HOT", 60)
		var de *domain.Error
		require.ErrorAs(t, err, &de)
		require.Equal(t, domain.CodeBusy, de.Code)
	}
	require.NoError(t, tx.Rollback(ctx))
	// Confirms: two by a, one by b, none slower than an hour.
	for i, inv := range []*inventory.Service{invA, invA, invB} {
		r, err := hold(inv, fmt.Sprint("paid", i), "LATE", 60)
		require.NoError(t, err)
		_, err = inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
		require.NoError(t, err)
	}
	// Two holds past their expiry: a backlog over 1.
	for i := range 2 {
		_, err := hold(invA, fmt.Sprint("late", i), "LATE", 60)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute' WHERE status = 'held'`)
	require.NoError(t, err)

	p1 := time.Now().Truncate(time.Minute)
	p2 := p1.Add(time.Minute)
	require.NoError(t, a.Record(ctx, p1))
	require.NoError(t, b.Record(ctx, p1))
	fired, err := b.Decide(ctx, p1)
	require.NoError(t, err)
	require.Len(t, fired, 1, "%v", fired)
	require.Equal(t, trips.RuleLockWaits, fired[0].Rule)
	require.Contains(t, fired[0].Detail, "4 requests answered busy in 1m0s (by 2 instances)")
	st, err := invA.GetStock(ctx, "HOT")
	require.NoError(t, err)
	require.Equal(t, stock.StockPaused, st.Pools[0].Status)
	fired, err = a.Decide(ctx, p1)
	require.NoError(t, err)
	require.Empty(t, fired, "the period was decided by the other instance")
	var confirms, decidedBy string
	require.NoError(t, pool.QueryRow(ctx, `SELECT details->>'confirms', decided_by FROM trip_periods WHERE rule = 'confirm_latency' AND period = $1`, p1).
		Scan(&confirms, &decidedBy))
	require.Equal(t, "3", confirms, "both instances' confirms")
	require.Equal(t, "b", decidedBy)

	// The backlog was over in p1 (decided by b) and is in p2 (by a): two
	// periods in a row.
	fired, err = a.Close(ctx, p2)
	require.NoError(t, err)
	require.Len(t, fired, 1, "%v", fired)
	require.Equal(t, trips.RuleExpiryBacklog, fired[0].Rule)
	alert, ok := openAlert(t, alertSvc, "trip_expiry_backlog")
	require.True(t, ok)
	require.Contains(t, alert.SuggestedAction, "The pools involved: LATE/main: 2")
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

// TestTripPausesItsLocationOnly: a rule that fires on a SKU's pool at one
// location (its row kept locked there, or the overdue holds there)
// pauses that pool at that location, once, and nowhere else: the same
// pool at the other locations goes on selling.
func TestTripPausesItsLocationOnly(t *testing.T) {
	t.Parallel()
	rules := map[string]func(t *testing.T, deps *app.Services, pool *pgxpool.Pool){
		trips.RuleLockWaits: func(t *testing.T, deps *app.Services, pool *pgxpool.Pool) {
			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(ctx) })
			_, err = tx.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'A1' AND location = 'paris' FOR UPDATE`)
			require.NoError(t, err)
			for i := range 3 {
				_, _, err := deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("busy", i),
					Items: []inventory.Item{{SKU: "A1", Quantity: 1, Location: "paris"}}})
				var de *domain.Error
				require.ErrorAs(t, err, &de)
				require.Equal(t, domain.CodeBusy, de.Code)
			}
			require.NoError(t, tx.Rollback(ctx))
			fired, err := deps.Trips.Check(ctx)
			require.NoError(t, err)
			require.Len(t, fired, 1)
			require.Equal(t, "sku:A1@paris/main", fired[0].Subject)
		},
		trips.RuleExpiryBacklog: func(t *testing.T, deps *app.Services, pool *pgxpool.Pool) {
			ctx := context.Background()
			var ids []uuid.UUID
			for i := range 3 {
				r, _, err := deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("late", i),
					Items: []inventory.Item{{SKU: "A1", Quantity: 1, Location: "paris"}}})
				require.NoError(t, err)
				ids = append(ids, r.ID)
			}
			_, err := pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute' WHERE id = ANY($1)`, ids)
			require.NoError(t, err)
			var fired []trips.Fired
			for range 2 { // periods
				fired, err = deps.Trips.Check(ctx)
				require.NoError(t, err)
			}
			require.Len(t, fired, 1)
			require.Equal(t, "sku:A1@paris/main", fired[0].Subject)
		},
	}
	for rule, trip := range rules {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			deps, pool := setup(t, func(c *config.Config) {
				c.LockTimeout, c.TripLockWaits = 100*time.Millisecond, 3
				c.TripExpiryBacklog, c.TripPeriods, c.TripStopSale, c.TripConfirmP99 = 2, 2, true, 0
			})
			dbtest.Location(t, pool, "paris", 1)
			dbtest.Location(t, pool, "berlin", 2)
			for _, l := range []string{stock.DefaultLocation, "paris", "berlin"} {
				_, err := deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: "A1", Location: l, Delta: 10, Reason: "test", Actor: "test"})
				require.NoError(t, err)
			}

			trip(t, deps, pool)

			st, err := deps.Inventory.GetStock(ctx, "A1")
			require.NoError(t, err)
			status := map[string]string{}
			for _, p := range st.Pools {
				status[p.Location] = p.Status
			}
			require.Equal(t, map[string]string{stock.DefaultLocation: stock.StockOnSale, "paris": stock.StockPaused, "berlin": stock.StockOnSale}, status)
			require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM ledger WHERE kind = 'pause'`), "one pause, at paris")
			require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM ledger WHERE kind = 'pause' AND location = 'paris'`))
			for _, l := range []string{stock.DefaultLocation, "berlin"} {
				_, _, err := deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "at-" + l,
					Items: []inventory.Item{{SKU: "A1", Quantity: 1, Location: l}}})
				require.NoError(t, err, "A1 sells at %s", l)
			}
			_, _, err = deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "at-paris",
				Items: []inventory.Item{{SKU: "A1", Quantity: 1, Location: "paris"}}})
			var de *domain.Error
			require.ErrorAs(t, err, &de)
			require.Equal(t, domain.CodeSKUPaused, de.Code)
		})
	}
}
