package db_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/events/eventstest"
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
// holds, while nothing expired. The work is
// counted from EXPLAIN ANALYZE (rows a join or filter looked at and
// dropped), not timed.
func TestDueHoldsReadLinear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const cold, hot = 50, 3000
	pool, _ := burst(t, cold, hot)
	skus, locations, pools := []string{"HOT"}, []string{"default"}, []string{"main"}
	rows, dropped, _ := explain(t, pool, "due", db.ReservationsDueSQL, `0, '{HOT}', '{default}', '{main}', 1000`)
	require.Equal(t, cold, rows, "ReservationsDue skipping the burst's row answers the other holds")
	require.LessOrEqual(t, dropped, float64(2*(cold+hot)),
		"ReservationsDue looked at more than each due hold's own lines")

	rows, dropped, _ = explain(t, pool, "due_on", db.ReservationsDueOnSQL, `0, 4000, '{HOT}', '{default}', '{main}', 1000`)
	require.Equal(t, 1000, rows, "ReservationsDueOn answers lim of the burst's holds")
	require.LessOrEqual(t, dropped, float64(2*(cold+hot)),
		"ReservationsDueOn looked at more than each due hold's own lines")

	// The queries as the loop calls them agree.
	due, err := db.New(pool).ReservationsDueOn(ctx, db.ReservationsDueOnParams{
		Scan: 4000, Skus: skus, Locations: locations, Pools: pools, Lim: 1000})
	require.NoError(t, err)
	require.Len(t, due, 1000)
}

// TestChangeLinear: the statement that expires, releases and confirms
// holds (ReservationsChange) looks at each changed hold's own lines, in
// its generic plan, whatever the statistics say. With statistics from
// before a burst, its checks looked each line up by the row's index
// (every line of the hot SKU) and kept the one of the hold: in the expiry
// bench, 200 ms for 500 holds, so expiry fell seconds behind a burst.
func TestChangeLinear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const cold, hot, n = 50, 3000, 500
	pool, ids := burst(t, cold, hot)
	p := db.ReservationsChangeParams{}
	for _, id := range ids[:n] {
		p.Ids, p.Statuses, p.Actors, p.Reasons = append(p.Ids, id), append(p.Statuses, "expired"), append(p.Actors, "expiry"), append(p.Reasons, "")
		p.LineIds, p.LineSkus, p.LineLocations, p.LinePools = append(p.LineIds, id), append(p.LineSkus, "HOT"), append(p.LineLocations, "default"), append(p.LinePools, "main")
		p.LineQuantities, p.LineKinds = append(p.LineQuantities, 1), append(p.LineKinds, "expire")
	}
	args := changeArgs(p)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		_, dropped, read := explainAs(t, pool, mode, "change", db.ReservationsChangeSQL, args)
		require.LessOrEqual(t, dropped, float64(4*n), "%s: ReservationsChange looked at more than each hold's own lines", mode)
		require.LessOrEqual(t, read["reservation_lines"], float64(3*n), "%s: ReservationsChange read more lines than the holds it changed have", mode)
		if mode == "force_generic_plan" {
			// A custom plan may read the whole (small) table of holds when
			// the planner finds that cheaper than n lookups by key.
			require.LessOrEqual(t, read["reservations"], float64(3*n), "%s: ReservationsChange read more holds than it changed", mode)
		}
	}

	// The statement as the expiry calls it: n holds expired, the row's
	// counters and the ledger with them.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	db.New(tx).ReservationsChange(ctx, []db.ReservationsChangeParams{p}).Query(func(_ int, _ []db.ReservationsChangeRow, e error) { err = e })
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	var expired, reserved int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reservations WHERE status = 'expired'),
		(SELECT reserved FROM stock WHERE sku = 'HOT')`).Scan(&expired, &reserved))
	require.Equal(t, n, expired)
	require.Equal(t, hot-n, reserved)
	dbtest.RequireInvariants(t, pool)
}

// TestChangeLinearOnUnits: releasing seats reads the seats it releases,
// not every seat a hold has. Planned on statistics from before a venue's
// sales, the statement found each unit it moves through the index of
// units by hold (every held and sold seat of the venue) and compared:
// in the seats bench, 6.4 of a release batch's 8.3 ms for 91 seats with
// 170 held or sold.
func TestChangeLinearOnUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	const seats, sold, n = 2000, 1500, 50
	ids := make([]string, seats)
	groups, positions, attributes := make([]string, seats), make([]int32, seats), make([][]byte, seats)
	for i := range ids {
		ids[i], groups[i], positions[i], attributes[i] = fmt.Sprintf("S-%d", i), fmt.Sprintf("R%d", i/100), int32(i%100+1), []byte("{}")
	}
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // a failure leaves none open
	_, err = tx.Exec(ctx, `INSERT INTO stock (sku, location, pool) VALUES ('VENUE', 'default', 'main')`)
	require.NoError(t, err)
	_, err = db.New(tx).UnitsAdd(ctx, db.UnitsAddParams{Sku: "VENUE", Location: "default", Pool: "main", Ids: ids,
		Actor: "test", Groups: groups, Positions: positions, Attributes: attributes})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	_, err = pool.Exec(ctx, `ALTER TABLE units SET (autovacuum_enabled = false); ANALYZE units`)
	require.NoError(t, err)

	// The sale: a hold of one seat each, in one batch; all but n paid.
	holds := make([]uuid.UUID, sold)
	ins := db.ReservationsInsertManyParams{}
	apply := db.StockHoldsApplyParams{RowSkus: []string{"VENUE"}, RowLocations: []string{"default"},
		RowPools: []string{"main"}, RowQuantities: []int64{sold}}
	for i := range holds {
		id := uuid.New()
		holds[i] = id
		ins.Ids, ins.Clients, ins.IdempotencyKeys = append(ins.Ids, id), append(ins.Clients, "shop"), append(ins.IdempotencyKeys, id.String())
		ins.RequestHashes, ins.OrderRefs, ins.Campaigns = append(ins.RequestHashes, "sale"), append(ins.OrderRefs, ""), append(ins.Campaigns, "")
		ins.TtlSeconds = append(ins.TtlSeconds, 600)
		apply.LineIds, apply.LineSkus = append(apply.LineIds, id), append(apply.LineSkus, "VENUE")
		apply.LineLocations, apply.LinePools = append(apply.LineLocations, "default"), append(apply.LinePools, "main")
		apply.LineQuantities, apply.LineActors, apply.LineActorKeys = append(apply.LineQuantities, 1), append(apply.LineActors, "shop"), append(apply.LineActorKeys, "")
		apply.UnitReservationIds, apply.UnitSkus, apply.UnitIds = append(apply.UnitReservationIds, id), append(apply.UnitSkus, "VENUE"), append(apply.UnitIds, ids[i])
		apply.UnitLocations, apply.UnitPools = append(apply.UnitLocations, "default"), append(apply.UnitPools, "main")
	}
	change := func(from, to int, status, kind string) db.ReservationsChangeParams {
		var p db.ReservationsChangeParams
		for i := from; i < to; i++ {
			id := holds[i]
			p.Ids, p.Statuses, p.Actors, p.Reasons = append(p.Ids, id), append(p.Statuses, status), append(p.Actors, "shop"), append(p.Reasons, "")
			p.LineIds, p.LineSkus, p.LineLocations, p.LinePools = append(p.LineIds, id), append(p.LineSkus, "VENUE"), append(p.LineLocations, "default"), append(p.LinePools, "main")
			p.LineQuantities, p.LineKinds = append(p.LineQuantities, 1), append(p.LineKinds, kind)
			p.UnitReservationIds, p.UnitSkus, p.UnitIds = append(p.UnitReservationIds, id), append(p.UnitSkus, "VENUE"), append(p.UnitIds, ids[i])
			p.UnitLocations, p.UnitPools = append(p.UnitLocations, "default"), append(p.UnitPools, "main")
		}
		return p
	}
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	q := db.New(tx)
	q.ReservationsInsertMany(ctx, []db.ReservationsInsertManyParams{ins}).Query(func(_ int, _ []db.Reservation, e error) { err = e })
	require.NoError(t, err)
	q.StockHoldsApply(ctx, []db.StockHoldsApplyParams{apply}).Exec(func(_ int, e error) { err = e })
	require.NoError(t, err)
	q.ReservationsChange(ctx, []db.ReservationsChangeParams{change(n, sold, "confirmed", "confirm")}).Query(func(_ int, _ []db.ReservationsChangeRow, e error) {
		err = e
	})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	dbtest.RequireInvariants(t, pool)

	// Releasing the n still held, as a release batch writes it.
	p := change(0, n, "released", "release")
	_, _, read := explain(t, pool, "release_units", db.ReservationsChangeSQL, changeArgs(p))
	for _, table := range []string{"units", "reservation_lines"} {
		require.LessOrEqual(t, read[table], float64(3*n), "the release read more of %s than its holds have", table)
	}

	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	db.New(tx).ReservationsChange(ctx, []db.ReservationsChangeParams{p}).Query(func(_ int, _ []db.ReservationsChangeRow, e error) { err = e })
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, seats-sold+n, dbtest.Count(t, pool, `SELECT count(*) FROM units WHERE status = 'available'`))
	dbtest.RequireInvariants(t, pool)
}

// changeArgs is p as the SQL literals of ReservationsChange's arguments,
// in their order, for explain.
func changeArgs(p db.ReservationsChangeParams) string {
	array := func(typ string, v []string) string {
		quoted := make([]string, len(v))
		for i, x := range v {
			quoted[i] = `"` + x + `"`
		}
		return "'{" + strings.Join(quoted, ",") + "}'::" + typ
	}
	ids := func(v []uuid.UUID) string {
		out := make([]string, len(v))
		for i, id := range v {
			out[i] = id.String()
		}
		return array("uuid[]", out)
	}
	quantities := make([]string, len(p.LineQuantities))
	for i, q := range p.LineQuantities {
		quantities[i] = strconv.FormatInt(q, 10)
	}
	return strings.Join([]string{ids(p.Ids), array("text[]", p.Statuses), array("text[]", p.Actors), array("text[]", p.Reasons),
		ids(p.LineIds), array("text[]", p.LineSkus), array("text[]", p.LineLocations), array("text[]", p.LinePools),
		array("bigint[]", quantities), array("text[]", p.LineKinds), "'{}'::bigint[]",
		ids(p.UnitReservationIds), array("text[]", p.UnitSkus), array("text[]", p.UnitLocations), array("text[]", p.UnitPools),
		array("text[]", p.UnitIds)}, ", ")
}

// burst makes a database whose statistics predate a burst on a new SKU
// (as in a flash sale: autovacuum analyzed the tables before the SKU's
// holds came): a hold on each of cold other SKUs, analyzed, then hot holds on HOT made
// as their hold batches write them, all due. It returns the hot holds.
func burst(t *testing.T, cold, hot int) (*pgxpool.Pool, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `ALTER TABLE reservations SET (autovacuum_enabled = false);
		ALTER TABLE reservation_lines SET (autovacuum_enabled = false)`)
	require.NoError(t, err)

	// Statistics from before the burst: a hold on each of cold other SKUs.
	for i := range cold {
		sku := fmt.Sprintf("COLD-%d", i)
		dbtest.StockIn(t, pool, sku, 1)
		dbtest.Hold(t, pool, sku, nil)
	}
	_, err = pool.Exec(ctx, `ANALYZE reservations, reservation_lines`)
	require.NoError(t, err)
	// The burst, in one transaction as its hold batches write it (the
	// reservations, the row's counters, the lines and the ledger), then all
	// due (time moved in SQL).
	dbtest.StockIn(t, pool, "HOT", int64(hot))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	ins := db.ReservationsInsertManyParams{}
	apply := db.StockHoldsApplyParams{RowSkus: []string{"HOT"}, RowLocations: []string{"default"},
		RowPools: []string{"main"}, RowQuantities: []int64{int64(hot)}}
	var ids []uuid.UUID
	for range hot {
		id := uuid.New()
		ids = append(ids, id)
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

	return pool, ids
}

// explain runs sql as the expiry loop's connection does once it has
// run it a few times (a prepared statement, its generic plan: the plan
// made without the arrays' values), under EXPLAIN ANALYZE (rolled
// back: ReservationsDue locks), with args (SQL literals), and returns
// the rows its plan answered and the rows its joins and filters looked
// at and dropped, over every loop, and the rows it read of each table
// (returned by its scans or dropped by their filters).
func explain(t *testing.T, pool *pgxpool.Pool, name, sql, args string) (rows int, dropped float64, read map[string]float64) {
	return explainAs(t, pool, "force_generic_plan", name, sql, args)
}

// explainAs is explain with the plan of mode (plan_cache_mode): the
// custom plans (made with the arrays' values) are the ones a prepared
// statement's first five runs get.
func explainAs(t *testing.T, pool *pgxpool.Pool, mode, name, sql, args string) (rows int, dropped float64, read map[string]float64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "PREPARE "+name+" AS "+sql)
	require.NoError(t, err)
	if testing.Verbose() {
		_, err = tx.Exec(ctx, "SAVEPOINT shown") // what it writes is not there for the run counted
		require.NoError(t, err)
		rs, err := tx.Query(ctx, "EXPLAIN (ANALYZE, TIMING OFF) EXECUTE "+name+"("+args+")", pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, err)
		for rs.Next() {
			var l string
			require.NoError(t, rs.Scan(&l))
			t.Log(l)
		}
		rs.Close()
		_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT shown")
		require.NoError(t, err)
	}
	var out []struct{ Plan map[string]any }
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+name+"("+args+")").Scan(&out))
	require.Len(t, out, 1)
	_, err = tx.Exec(ctx, "DEALLOCATE "+name)
	require.NoError(t, err)
	read = map[string]float64{}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		loops, _ := n["Actual Loops"].(float64)
		for _, k := range []string{"Rows Removed by Join Filter", "Rows Removed by Filter"} {
			if v, ok := n[k].(float64); ok {
				dropped += v * loops // EXPLAIN shows them per loop
			}
		}
		if table, ok := n["Relation Name"].(string); ok && strings.HasSuffix(n["Node Type"].(string), "Scan") {
			got, _ := n["Actual Rows"].(float64)
			removed, _ := n["Rows Removed by Filter"].(float64)
			read[table] += (got + removed) * loops
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(out[0].Plan)
	answered, _ := out[0].Plan["Actual Rows"].(float64)
	return int(answered), dropped, read
}

// TestEventFeedReadLinear: a page of the event feed reads, for each row,
// a few index entries of each partition, not a partition whose rows
// share one feed_xid (a month loaded in one transaction, or an archive's
// carried balances). Each row's version is bounded by the first and last
// ids of its feed_xid; read as max(id) and min(id) of the feed_xid, the
// planner walked such a partition's primary key in id order, filtering
// on feed_xid, which it expected to match at once: where the partition
// had no row of that feed_xid it read all of it, for every row of the
// page. On a year of history after its oldest month was archived, a
// page from the current month ran past the statement timeout.
func TestEventFeedReadLinear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	const old, recent, lim = 5000, 60, 50
	// The past (the partition before this month): old rows in one
	// transaction, so one feed_xid.
	_, err := pool.Exec(ctx, `INSERT INTO ledger (at, sku, location, pool, kind, delta_total, delta_available,
		delta_reserved, delta_sold, stock_version, actor)
		SELECT date_trunc('month', now()) - interval '20 days' + i * interval '1 second', 'OLD-' || i, 'default', 'main',
		       'stock_in', 1, 1, 0, 0, 1, 'test'
		FROM generate_series(1, $1::int) i`, old)
	require.NoError(t, err)
	// This month: recent rows, each in a transaction of its own.
	for i := range recent {
		_, err := pool.Exec(ctx, `INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available,
			delta_reserved, delta_sold, stock_version, actor)
			VALUES ($1, 'default', 'main', 'stock_in', 1, 1, 0, 0, 1, 'test')`, fmt.Sprintf("NEW-%d", i))
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `ANALYZE ledger`)
	require.NoError(t, err)
	eventstest.WaitServed(t, pool)
	var past, xid string
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM ledger WHERE sku = 'OLD-1'`).Scan(&past))
	require.NoError(t, pool.QueryRow(ctx, `SELECT feed_xid::text, id FROM ledger WHERE sku = 'NEW-0'`).Scan(&xid, &id))
	// A page from this month's first row: none of its rows is in the past.
	args := fmt.Sprintf("'%s'::xid8, %d, %d", xid, id, lim)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		rows, _, read := explainAs(t, pool, mode, "feed", db.EventRowsAfterSQL, args)
		require.Equal(t, lim, rows, "%s: a page of the feed", mode)
		require.LessOrEqual(t, read[past], float64(3*lim), "%s: a page of %d rows from this month read %.0f rows of %s, the past's partition (%v)",
			mode, lim, read[past], past, read)
	}
}
