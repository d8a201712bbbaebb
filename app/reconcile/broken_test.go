package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

// behindTriggers runs sql as a DBA fixing data might: with
// session_replication_role = replica, so no trigger (the units' state
// machine, the deferred counters-vs-units check, the ledger's append-only
// rule) runs.
func (b *bundle) behindTriggers(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(t, err)
	defer func() {
		_, err := conn.Exec(ctx, `RESET session_replication_role`)
		require.NoError(t, err)
	}()
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

// seats adds units A-1..A-n to sku's main pool.
func (b *bundle) seats(t *testing.T, sku string, n int) {
	t.Helper()
	var plan []stock.UnitSpec
	for i := 1; i <= n; i++ {
		pos := int32(i)
		plan = append(plan, stock.UnitSpec{ID: fmt.Sprintf("A-%d", i), Group: "A", Position: &pos})
	}
	_, _, err := b.inv.AddUnitsOnce(context.Background(), idempotency.NewKey("ops", "plan-"+sku),
		stock.UnitsChange{SKU: sku, Reason: "plan", Actor: "ops", Units: plan})
	require.NoError(t, err)
}

func findingsOf(r reconcile.Run, sku string) map[string]reconcile.Finding {
	out := map[string]reconcile.Finding{}
	for _, f := range r.Findings.HighRisk {
		if f.SKU != nil && *f.SKU == sku {
			out[f.Kind] = f
		}
	}
	return out
}

// TestBrokenSeatPoolIsPausedAndSoAreTheOthers: a seat retired behind the
// triggers leaves its pool's counters apart from its units, and another
// pool's counters are raised by hand. Every run pauses both, alerts both
// and stores both findings, the seat pool's naming the seat; before, the
// seat pool's pause was refused at commit by the very check its broken
// books failed, and the run stopped there, every time, leaving the other
// pool on sale.
func TestBrokenSeatPoolIsPausedAndSoAreTheOthers(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	b.seats(t, "SEATS", 3)
	dbtest.StockIn(t, b.pool, "TEE", 10)
	require.Empty(t, run(t, svc).Findings.All(), "the books balance")

	b.behindTriggers(t, `UPDATE units SET status = 'retired' WHERE sku = 'SEATS' AND id = 'A-1'`)
	b.behindTriggers(t, `UPDATE stock SET total = total + 3, available = available + 3 WHERE sku = 'TEE'`)

	for i := range 2 {
		r := run(t, svc)
		require.EqualValues(t, 2, r.HighRisk, "run %d", i)
		seats := findingsOf(r, "SEATS")[reconcile.KindCountersVsUnits]
		require.Equal(t, reconcile.ClassHighRisk, seats.Class)
		d := details(t, seats)
		require.Equal(t, map[string]any{"available": 3.0, "reserved": 0.0, "sold": 0.0}, d["counters"])
		require.Equal(t, map[string]any{"available": 2.0, "held": 0.0, "sold": 0.0}, d["units"])
		require.Len(t, d["against_ledger"], 1, "the retired seat is named")
		named := d["against_ledger"].([]any)[0].(map[string]any)
		require.Equal(t, "A-1", named["id"])
		require.Equal(t, "retired", named["status"])
		require.Equal(t, "available", named["ledger_says"])
		require.Contains(t, findingsOf(r, "TEE"), reconcile.KindCountersVsLedger)

		for _, sku := range []string{"SEATS", "TEE"} {
			require.Equal(t, stock.StockPaused, b.stock(t, sku, "main").Status, "%s, run %d", sku, i)
			_, ok := b.openAlert(t, "books_out_of_balance", "sku:"+sku+"/main")
			require.True(t, ok, "%s is alerted", sku)
		}
	}
	require.EqualValues(t, 3, b.stock(t, "SEATS", "main").Available, "no stock moved")

	// The gate keeps the seat pool paused while its units disagree.
	_, err := b.inv.Lift(context.Background(), stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "SEATS", Reason: "try", Actor: "ops"}})
	require.Error(t, err)
	require.Equal(t, stock.StockPaused, b.stock(t, "SEATS", "main").Status)
}

// TestAPoolThatCannotBePausedStandsAlone: a pool whose pause fails still
// gets its finding and its alert, saying it is not paused, and the pools
// after it are paused; the run is failed, naming it.
func TestAPoolThatCannotBePausedStandsAlone(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "MUG", 5)
	dbtest.StockIn(t, b.pool, "TEE", 10)
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION no_pause() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'MUG cannot be paused';
		END $$;
		CREATE TRIGGER no_pause BEFORE UPDATE ON stock FOR EACH ROW
			WHEN (NEW.sku = 'MUG' AND NEW.status = 'paused') EXECUTE FUNCTION no_pause();`)
	require.NoError(t, err)
	b.behindTriggers(t, `UPDATE stock SET total = total + 1, available = available + 1 WHERE sku IN ('MUG', 'TEE')`)

	_, err = svc.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.ErrorContains(t, err, "MUG/main, not paused")
	r, err := svc.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.StatusFailed, r.Status)
	require.EqualValues(t, 2, r.HighRisk)
	mug := findingsOf(r, "MUG")[reconcile.KindCountersVsLedger]
	require.Contains(t, mug.Action, "NOT paused")
	require.Contains(t, details(t, mug)["not_paused"], "MUG cannot be paused")
	a, ok := b.openAlert(t, "books_out_of_balance", "sku:MUG/main")
	require.True(t, ok)
	require.Contains(t, a.SuggestedAction, "still on sale")
	require.Equal(t, stock.StockOnSale, b.stock(t, "MUG", "main").Status)

	require.Equal(t, "paused; no stock moved", findingsOf(r, "TEE")[reconcile.KindCountersVsLedger].Action)
	require.Equal(t, stock.StockPaused, b.stock(t, "TEE", "main").Status)
	_, ok = b.openAlert(t, "books_out_of_balance", "sku:TEE/main")
	require.True(t, ok)
}

// TestInboundChangedByHandIsHighRisk: a row's incoming is what the
// transfers in transit to it and the open inbound lines at it expect. A
// notice's line changed behind the service is incoming_vs_transfers
// (high risk, the pool paused, naming the difference); a notice received
// through the service is not.
func TestInboundChangedByHandIsHighRisk(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "INB", 2)
	i, _, err := b.inv.CreateInboundOnce(ctx, idempotency.NewKey("ops", "po"), stock.NewInbound{SupplierRef: "PO-1",
		ExpectedOn: time.Now().UTC().AddDate(0, 0, 3).Format(time.DateOnly), Lines: []stock.NewInboundLine{{SKU: "INB", Quantity: 6}}, Actor: "ops"})
	require.NoError(t, err)
	_, err = b.inv.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "INB", Quantity: 2, Actor: "ops"})
	require.NoError(t, err)
	require.Empty(t, run(t, svc).Findings.All(), "4 incoming, 4 expected")

	_, err = b.pool.Exec(ctx, `UPDATE inbound_lines SET quantity = 9 WHERE inbound_id = $1`, i.ID)
	require.NoError(t, err)
	f, ok := findingsOf(run(t, svc), "INB")[reconcile.KindIncomingVsTransfers]
	require.True(t, ok, "the line expects 7 more, incoming says 4")
	d := details(t, f)
	require.EqualValues(t, 4, d["incoming"])
	require.EqualValues(t, 7, d["in_transit"])
	require.EqualValues(t, -3, d["difference"])
	require.Equal(t, stock.StockPaused, b.stock(t, "INB", "main").Status)
}
