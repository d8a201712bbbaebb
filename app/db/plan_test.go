package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
)

// TestDueHoldsReadLinear: the expiry loop's reads of due holds, the ones
// on given stock rows (ReservationsDueOn) and the others
// (ReservationsDue, skipping those rows), look at each due hold's own
// lines, in the generic plan their prepared statements get (the one made
// without the arrays' values), whatever the statistics say. Here they
// predate a burst on a new SKU (as in a flash sale: autovacuum analyzed
// the tables before the SKU's holds came); as joins, the plan took the
// burst row's lines for a handful and compared every due hold with every
// one of them: in the expiry bench, 10.6 s for one read of 17,230 due
// holds, while nothing expired (issue 28's expiry stall). The work is
// counted from EXPLAIN ANALYZE (rows a join or filter looked at and
// dropped), not timed.
func TestDueHoldsReadLinear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `ALTER TABLE reservations SET (autovacuum_enabled = false);
		ALTER TABLE reservation_lines SET (autovacuum_enabled = false)`)
	require.NoError(t, err)

	// Statistics from before the burst: holds on another SKU only.
	const cold, hot = 50, 3000
	dbtest.StockIn(t, pool, "COLD", cold)
	for range cold {
		dbtest.Hold(t, pool, "COLD", nil)
	}
	_, err = pool.Exec(ctx, `ANALYZE reservations, reservation_lines`)
	require.NoError(t, err)
	// The burst, in one transaction as its hold batches write it (the
	// reservations, the row's counters, the lines and the ledger), then all
	// due (time moved in SQL).
	dbtest.StockIn(t, pool, "HOT", hot)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	ins := db.ReservationsInsertManyParams{}
	apply := db.StockHoldsApplyParams{RowSkus: []string{"HOT"}, RowLocations: []string{"default"},
		RowPools: []string{"main"}, RowQuantities: []int64{hot}}
	for range hot {
		id := uuid.New()
		ins.Ids, ins.Clients, ins.IdempotencyKeys = append(ins.Ids, id), append(ins.Clients, "shop"), append(ins.IdempotencyKeys, id.String())
		ins.RequestHashes, ins.OrderRefs, ins.Campaigns = append(ins.RequestHashes, "burst"), append(ins.OrderRefs, ""), append(ins.Campaigns, "")
		ins.TtlSeconds = append(ins.TtlSeconds, 600)
		apply.LineIds, apply.LineSkus = append(apply.LineIds, id), append(apply.LineSkus, "HOT")
		apply.LineLocations, apply.LinePools = append(apply.LineLocations, "default"), append(apply.LinePools, "main")
		apply.LineQuantities, apply.LineActors = append(apply.LineQuantities, 1), append(apply.LineActors, "shop")
	}
	q := db.New(tx)
	q.ReservationsInsertMany(ctx, []db.ReservationsInsertManyParams{ins}).Query(func(_ int, made []db.Reservation, e error) {
		if err = e; e == nil && len(made) != hot {
			err = fmt.Errorf("inserted %d holds of %d", len(made), hot)
		}
	})
	require.NoError(t, err)
	q.StockHoldsApply(ctx, []db.StockHoldsApplyParams{apply}).Exec(func(_ int, e error) { err = e })
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	dbtest.RequireInvariants(t, pool)
	_, err = pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute'`)
	require.NoError(t, err)

	// explain runs sql as the expiry loop's connection does once it has
	// run it a few times (a prepared statement, its generic plan: the plan
	// made without the arrays' values), under EXPLAIN ANALYZE (rolled
	// back: ReservationsDue locks), with args (SQL literals), and returns
	// the rows its plan answered and the rows its joins and filters looked
	// at and dropped, over every loop.
	explain := func(name, sql, args string) (rows int, dropped float64) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "PREPARE "+name+" AS "+sql)
		require.NoError(t, err)
		if testing.Verbose() {
			rs, err := tx.Query(ctx, "EXPLAIN (ANALYZE, TIMING OFF) EXECUTE "+name+"("+args+")", pgx.QueryExecModeSimpleProtocol)
			require.NoError(t, err)
			for rs.Next() {
				var l string
				require.NoError(t, rs.Scan(&l))
				t.Log(l)
			}
			rs.Close()
		}
		var out []struct{ Plan map[string]any }
		require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+name+"("+args+")").Scan(&out))
		require.Len(t, out, 1)
		_, err = tx.Exec(ctx, "DEALLOCATE "+name)
		require.NoError(t, err)
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			loops, _ := n["Actual Loops"].(float64)
			for _, k := range []string{"Rows Removed by Join Filter", "Rows Removed by Filter"} {
				if v, ok := n[k].(float64); ok {
					dropped += v * loops // EXPLAIN shows them per loop
				}
			}
			children, _ := n["Plans"].([]any)
			for _, c := range children {
				walk(c.(map[string]any))
			}
		}
		walk(out[0].Plan)
		answered, _ := out[0].Plan["Actual Rows"].(float64)
		return int(answered), dropped
	}
	skus, locations, pools := []string{"HOT"}, []string{"default"}, []string{"main"}
	rows, dropped := explain("due", db.ReservationsDueSQL, `0, '{HOT}', '{default}', '{main}', 1000`)
	require.Equal(t, cold, rows, "ReservationsDue skipping the burst's row answers the other holds")
	require.LessOrEqual(t, dropped, float64(2*(cold+hot)),
		"ReservationsDue looked at more than each due hold's own lines")

	rows, dropped = explain("due_on", db.ReservationsDueOnSQL, `0, 4000, '{HOT}', '{default}', '{main}', 1000`)
	require.Equal(t, 1000, rows, "ReservationsDueOn answers lim of the burst's holds")
	require.LessOrEqual(t, dropped, float64(2*(cold+hot)),
		"ReservationsDueOn looked at more than each due hold's own lines")

	// The queries as the loop calls them agree.
	due, err := db.New(pool).ReservationsDueOn(ctx, db.ReservationsDueOnParams{
		Scan: 4000, Skus: skus, Locations: locations, Pools: pools, Lim: 1000})
	require.NoError(t, err)
	require.Len(t, due, 1000)
}
