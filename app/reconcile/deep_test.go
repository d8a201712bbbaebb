package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

// handLedgerRow inserts by hand a ledger row of +5 units for sku's main
// pool at the stock version the row has now: a version reconciliation has
// already checkpointed.
func (b *bundle) handLedgerRow(t *testing.T, sku string) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
		SELECT sku, pool, 'adjust', 5, 5, 0, 0, version, 'mallory' FROM stock WHERE sku = $1 AND pool = 'main'`, sku)
	require.NoError(t, err)
}

func highRiskSKUs(r reconcile.Run) map[string][]string {
	out := map[string][]string{}
	for _, f := range r.Findings.HighRisk {
		out[*f.SKU] = append(out[*f.SKU], f.Kind)
	}
	return out
}

// TestLedgerRowAtACheckpointedVersionIsFound: a ledger row inserted by
// hand with the version its stock row has now (one a clean run has
// checkpointed) is summed by every run type: before, each summed only the
// ledger rows with a version above the checkpoint, and none found it.
func TestLedgerRowAtACheckpointedVersionIsFound(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	for _, sku := range []string{"A1", "B1", "C1"} {
		dbtest.StockIn(t, b.pool, sku, 100)
		b.hold(t, "h-"+sku, sku, 2)
	}
	require.Empty(t, runScope(t, svc, reconcile.ScopeFull).Findings.All(), "clean, and every row checkpointed")

	b.handLedgerRow(t, "A1")
	r := runScope(t, svc, reconcile.ScopeIncremental)
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(r))
	require.Equal(t, map[string][]string{"A1": {reconcile.KindCountersVsLedger}}, highRiskSKUs(r), "the incremental run")
	d := details(t, r.Findings.HighRisk[0])
	require.Equal(t, map[string]any{"total": -5.0, "available": -5.0, "reserved": 0.0, "sold": 0.0,
		"quality_control": 0.0, "damaged": 0.0, "safety_stock": 0.0, "incoming": 0.0, "short": 0.0}, d["difference"])

	b.handLedgerRow(t, "B1")
	r = runScope(t, svc, reconcile.ScopeFull)
	require.Equal(t, reconcile.ScopeFull, scopeOf(r))
	require.Equal(t, map[string][]string{"A1": {reconcile.KindCountersVsLedger}, "B1": {reconcile.KindCountersVsLedger}}, highRiskSKUs(r),
		"the full run")

	b.handLedgerRow(t, "C1")
	r = run(t, svc, "C1")
	require.Equal(t, map[string][]string{"C1": {reconcile.KindCountersVsLedger}}, highRiskSKUs(r), "a run over its SKU")

	// The gate and the repair sum it as the runs do.
	ctx := context.Background()
	_, err := b.inv.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "try", Actor: "ops"}})
	require.Error(t, err, "the gate sees it")
	rep, err := b.inv.Repair(ctx, stock.RepairRequest{SKU: "A1", To: stock.RepairToCounters, Reason: "the row was a typo", Actor: "ops"})
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: -5, Available: -5}, rep.Difference)
	_, err = b.inv.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "repaired", Actor: "ops"}})
	require.NoError(t, err)
	require.NotContains(t, highRiskSKUs(runScope(t, svc, reconcile.ScopeFull)), "A1", "repaired")
}

// TestDeepRunTrustsNoCheckpoint: a ledger row changed behind the
// append-only trigger, under a checkpoint, is found by a deep run alone
// (a plain run sums from the checkpoint and cannot see it); the deep run
// drops that row's checkpoint, so every later run, the gate and the repair
// sum its whole ledger; and a checkpoint changed by hand is found by a
// deep run, which writes it anew where the books balance.
func TestDeepRunTrustsNoCheckpoint(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	for _, sku := range []string{"A1", "B1"} {
		dbtest.StockIn(t, b.pool, sku, 100)
		b.hold(t, "h-"+sku, sku, 2)
	}
	settle(t, b)
	require.Empty(t, runScope(t, svc, reconcile.ScopeFull).Findings.All())

	b.behindTriggers(t, `UPDATE ledger SET delta_total = delta_total + 1, delta_available = delta_available + 1
		WHERE id = (SELECT min(id) FROM ledger WHERE sku = 'A1' AND pool = 'main')`)
	// A checkpoint of B1 that lies, and a ledger that agrees with the
	// counters: the books balance, the deep run mends the checkpoint.
	_, err := b.pool.Exec(ctx, `UPDATE ledger_checkpoints SET available = available + 7, total = total + 7 WHERE sku = 'B1'`)
	require.NoError(t, err)

	require.Empty(t, runScope(t, svc, reconcile.ScopeIncremental).Findings.All(), "nothing moved")
	r := runScope(t, svc, reconcile.ScopeDeep)
	require.Equal(t, reconcile.ScopeDeep, scopeOf(r))
	require.EqualValues(t, 2, r.RowsChecked)
	require.Equal(t, map[string][]string{"A1": {reconcile.KindCountersVsLedger}}, highRiskSKUs(r))
	require.Equal(t, stock.StockPaused, b.stock(t, "A1", "main").Status)
	_, err = db.New(b.pool).LedgerCheckpointGet(ctx, "A1", "default", "main")
	require.ErrorIs(t, err, pgx.ErrNoRows, "A1's checkpoint is dropped")
	cp, err := db.New(b.pool).LedgerCheckpointGet(ctx, "B1", "default", "main")
	require.NoError(t, err)
	require.Equal(t, b.stock(t, "B1", "main").Available, cp.Available, "B1's checkpoint written anew")

	// Every later run sees it now, and the repair closes it.
	require.Contains(t, highRiskSKUs(runScope(t, svc, reconcile.ScopeFull)), "A1")
	rep, err := b.inv.Repair(ctx, stock.RepairRequest{SKU: "A1", To: stock.RepairToCounters, Reason: "ledger row edited by hand", Actor: "ops"})
	require.NoError(t, err)
	require.Equal(t, stock.Counters{Total: -1, Available: -1}, rep.Difference)
	require.Empty(t, runScope(t, svc, reconcile.ScopeDeep).Findings.All(), "repaired, and B1 balances")
	require.Empty(t, runScope(t, svc, reconcile.ScopeFull).Findings.All())
}

// TestPeriodicRunIsDeepOnItsSchedule: a periodic run is deep once the last
// deep run (or, before any, the first run) is DeepEvery old; a deep run
// counts as a full one and as a watermark.
func TestPeriodicRunIsDeepOnItsSchedule(t *testing.T) {
	t.Parallel()
	_, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	periodic := func(cfg reconcile.Config) reconcile.Run {
		t.Helper()
		cfg.RepairLimit, cfg.StuckGrace, cfg.Log = 100, time.Minute, quiet
		r, err := reconcile.New(b.pool, b.inserter, b.alerts, b.inv, cfg).Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerPeriodic})
		require.NoError(t, err)
		return r
	}
	require.Equal(t, reconcile.ScopeDeep, scopeOf(periodic(reconcile.Config{DeepEvery: time.Hour, FullEvery: time.Hour})),
		"no run over every SKU yet: deep, whatever the schedule")
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(periodic(reconcile.Config{DeepEvery: time.Hour, FullEvery: time.Hour})))
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(periodic(reconcile.Config{FullEvery: time.Hour})), "0: never deep on its own")
	// A database reconciled before deep runs existed: its first run was
	// full, and the deep schedule starts there.
	_, err := b.pool.Exec(ctx, `UPDATE reconcile_runs SET scope = 'full' WHERE scope = 'deep'`)
	require.NoError(t, err)
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(periodic(reconcile.Config{DeepEvery: time.Hour, FullEvery: time.Hour})))
	_, err = b.pool.Exec(ctx, `UPDATE reconcile_runs SET created_at = created_at - interval '2 hours'`)
	require.NoError(t, err)
	require.Equal(t, reconcile.ScopeDeep, scopeOf(periodic(reconcile.Config{DeepEvery: time.Hour, FullEvery: time.Hour})), "an hour since the first run")
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(periodic(reconcile.Config{DeepEvery: time.Hour, FullEvery: time.Hour})),
		"the deep run was a full one, and a watermark")
}

// TestDeepRunFindsASeatSwappedBehindTheTriggers: a seat retired and
// another put back behind the triggers leave the counts as they were, so
// only a deep run, which reads each unit's last ledger row, finds them,
// naming both.
func TestDeepRunFindsASeatSwappedBehindTheTriggers(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	b.seats(t, "SEATS", 4)
	_, _, err := b.inv.RetireUnitsOnce(ctx, idempotency.NewKey("ops", "retire"),
		stock.UnitsChange{SKU: "SEATS", Reason: "broken", Actor: "ops", Units: []stock.UnitSpec{{ID: "A-3"}}})
	require.NoError(t, err)
	require.Empty(t, run(t, svc).Findings.All())

	b.behindTriggers(t, `UPDATE units SET status = CASE id WHEN 'A-1' THEN 'retired' ELSE 'available' END
		WHERE sku = 'SEATS' AND id IN ('A-1', 'A-3')`)
	require.Empty(t, runScope(t, svc, reconcile.ScopeFull).Findings.All(), "the counts agree")
	r := runScope(t, svc, reconcile.ScopeDeep)
	require.Equal(t, map[string][]string{"SEATS": {reconcile.KindCountersVsUnits}}, highRiskSKUs(r))
	off := details(t, r.Findings.HighRisk[0])["against_ledger"].([]any)
	var named []string
	for _, u := range off {
		m := u.(map[string]any)
		named = append(named, m["id"].(string)+" "+m["status"].(string)+", ledger: "+m["ledger_says"].(string))
	}
	require.Equal(t, []string{"A-1 retired, ledger: available", "A-3 available, ledger: gone"}, named)
	require.Equal(t, stock.StockPaused, b.stock(t, "SEATS", "main").Status)
}

// TestEveryStateIsCheckedInEveryScope: a ledger row written by hand that
// moves one state (each of the ledger's delta_ columns in turn, read from
// the database so that a new state is covered without editing this test)
// is found by an incremental run, a full run, a run over its SKU and a
// deep run. A state the ledger_balanced CHECK sums moves with total, as
// that CHECK requires; incoming and short move alone. Before the checks
// were one statement, an incremental run compared eight of the nine
// states in Go and missed short.
func TestEveryStateIsCheckedInEveryScope(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `
		SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'ledger'
		  AND column_name LIKE 'delta\_%' AND column_name <> 'delta_total'
		ORDER BY column_name`)
	require.NoError(t, err)
	deltas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, deltas, "delta_short")
	var balance string
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ledger_balanced' AND conrelid = 'ledger'::regclass`).Scan(&balance))
	skus := make([]string, len(deltas))
	for i, d := range deltas {
		skus[i] = "S-" + d
		dbtest.StockIn(t, b.pool, skus[i], 10)
	}
	settle(t, b)
	require.Empty(t, runScope(t, svc, reconcile.ScopeFull).Findings.All(), "clean, and every row checkpointed")

	want := map[string][]string{}
	for i, d := range deltas {
		// The four first deltas have no default; the column names come
		// from the catalogue, not from input.
		moved := map[string]int{"delta_total": 0, "delta_available": 0, "delta_reserved": 0, "delta_sold": 0, d: 1}
		if strings.Contains(balance, d) {
			moved["delta_total"] = 1
		}
		cols, vals := "", ""
		for c, v := range moved {
			cols += ", " + c
			vals += fmt.Sprintf(", %d", v)
		}
		_, err := b.pool.Exec(ctx, `
			INSERT INTO ledger (sku, pool, kind, stock_version, actor`+cols+`)
			SELECT sku, pool, 'adjust', version, 'mallory'`+vals+` FROM stock WHERE sku = $1 AND pool = 'main'`, skus[i])
		require.NoError(t, err, d)
		want[skus[i]] = []string{reconcile.KindCountersVsLedger}
	}
	settle(t, b)
	r := runScope(t, svc, reconcile.ScopeIncremental)
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(r))
	require.Equal(t, want, highRiskSKUs(r), "the incremental run")
	r = runScope(t, svc, reconcile.ScopeFull)
	require.Equal(t, reconcile.ScopeFull, scopeOf(r))
	require.Equal(t, want, highRiskSKUs(r), "the full run")
	require.Equal(t, want, highRiskSKUs(run(t, svc, skus...)), "a run over the SKUs")
	r = runScope(t, svc, reconcile.ScopeDeep)
	require.Equal(t, reconcile.ScopeDeep, scopeOf(r))
	require.Equal(t, want, highRiskSKUs(r), "the deep run")
}

// TestFirstRunIsDeep: a run over every SKU with no clean run before it
// is deep when none ever succeeded (no row has a checkpoint to start
// from, and a deep run sums the ledger in one pass instead of probing
// each row's), and full after one that found books out of balance (the
// other rows' checkpoints stand).
func TestFirstRunIsDeep(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B1", 10)
	b.handLedgerRow(t, "A1") // a row A1's counters never saw: out of balance
	first := runScope(t, svc, reconcile.ScopeFull)
	require.Equal(t, reconcile.ScopeDeep, scopeOf(first), "asked for full, with no run over every SKU before it")
	require.Contains(t, highRiskSKUs(first), "A1")
	second := runScope(t, svc, reconcile.ScopeIncremental)
	require.Equal(t, reconcile.ScopeFull, scopeOf(second), "no clean run to start from, but one that checked every row")
	require.Contains(t, highRiskSKUs(second), "A1")
	require.EqualValues(t, 2, second.RowsChecked)
}
