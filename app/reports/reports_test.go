package reports_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reports"
	"github.com/stockhold/stockhold/app/stock"
)

// holder makes holds of sku for the shop "shop", one line each.
func holder(t *testing.T, inv *inventory.Service, sku string) func(key string, q int64) inventory.Reservation {
	return func(key string, q int64) inventory.Reservation {
		t.Helper()
		r, _, err := inv.Hold(context.Background(), inventory.HoldRequest{Client: "shop", IdempotencyKey: key, Items: []inventory.Item{{SKU: sku, Quantity: q}}})
		require.NoError(t, err)
		return r
	}
}

// TestDailyReportOfTheDayFlows: holds made, confirmed and cancelled today
// through the service, and stock taken in, are today's figures, per pool
// and in all, with the signs the contract gives (units, positive); the day
// before has none.
func TestDailyReportOfTheDayFlows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 100, Reason: "restock", Actor: "alice"})
	require.NoError(t, err)
	hold := holder(t, inv, "A1")
	paid := hold("paid", 2)
	_, err = inv.Confirm(ctx, paid.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	_, err = inv.Release(ctx, hold("gone", 3).ID, inventory.Caller{Name: "shop"}, "")
	require.NoError(t, err)
	hold("open", 1)

	svc := reports.New(pool)
	var today string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))
	r, err := svc.Daily(ctx, reports.DailyQuery{Date: today})
	require.NoError(t, err)
	want := reports.Figures{Held: 6, Confirmed: 2, Released: 3, Adjusted: 100, Movements: 6,
		Change: reports.Change{Counters: stock.Counters{Total: 100, Available: 97, Reserved: 1, Sold: 2}},
		ByKind: map[string]reports.KindFigures{
			"stock_in": {Movements: 1, Change: reports.Change{Counters: stock.Counters{Total: 100, Available: 100}}},
			"reserve":  {Movements: 3, Change: reports.Change{Counters: stock.Counters{Available: -6, Reserved: 6}}},
			"confirm":  {Movements: 1, Change: reports.Change{Counters: stock.Counters{Reserved: -2, Sold: 2}}},
			"release":  {Movements: 1, Change: reports.Change{Counters: stock.Counters{Available: 3, Reserved: -3}}},
		}}
	require.Equal(t, want, r.Totals)
	require.Equal(t, []reports.PoolFigures{{SKU: "A1", Location: "default", Pool: "main", Figures: want}}, r.Pools)
	require.Equal(t, []reports.LocationFigures{{Location: "default", Figures: want}}, r.Locations)
	require.Empty(t, r.Campaigns)
	require.Nil(t, r.NextCursor)

	day, _ := time.Parse(time.DateOnly, today)
	r, err = svc.Daily(ctx, reports.DailyQuery{Date: day.AddDate(0, 0, -1).Format(time.DateOnly)})
	require.NoError(t, err)
	require.Equal(t, reports.Figures{ByKind: map[string]reports.KindFigures{}}, r.Totals)
	require.Empty(t, r.Pools)
}

// TestDailyReportBoundsPagesAndRuns: ledger rows and reconciliation runs
// written at set times fall in the business day of their time zone, and
// no other; pools come a page at a time by cursor; campaigns are summed
// per campaign pool; the runs that found something are listed with their
// findings; bad input is refused.
func TestDailyReportBoundsPagesAndRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// Ledger rows by hand, at set times (the report only reads them).
	_, err := pool.Exec(ctx, `
		INSERT INTO ledger (at, sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor, reason)
		VALUES
		 ('2026-11-30 23:30:00Z', 'T1', 'main', 'reserve',  0, -4, 4, 0, 1, 'shop', NULL),
		 ('2026-12-01 00:00:00Z', 'T1', 'main', 'expire',   0, 3, -3, 0, 2, 'system:expire_holds', NULL),
		 ('2026-12-01 08:00:00Z', 'T1', 'bf',   'transfer', 10, 10, 0, 0, 1, 'system:campaign', NULL),
		 ('2026-12-01 09:00:00Z', 'T1', 'bf',   'reserve',  0, -5, 5, 0, 2, 'shop', NULL),
		 ('2026-12-01 10:00:00Z', 'T1', 'bf',   'rollback', 0, 5, -5, 0, 3, 'alice', 'campaign end'),
		 ('2026-12-01 11:00:00Z', 'T2', 'main', 'stock_in', 7, 7, 0, 0, 1, 'alice', NULL),
		 ('2026-12-01 12:00:00Z', 'T2', 'main', 'release_partial', 0, 1, -1, 0, 2, 'shop', NULL),
		 ('2026-12-01 13:00:00Z', 'T3', 'main', 'repair',   0, 0, 0, 0, 5, 'alice', 'hand edit'),
		 ('2026-12-01 23:59:59.999Z', 'T3', 'main', 'adjust', -2, -2, 0, 0, 6, 'alice', 'damaged'),
		 ('2026-12-02 00:00:00Z', 'T3', 'main', 'adjust', -9, -9, 0, 0, 7, 'alice', 'tomorrow')`)
	require.NoError(t, err)
	var runID int64
	require.NoError(t, pool.QueryRow(ctx, `
		INSERT INTO reconcile_runs (trigger, status, created_at, finished_at, rows_checked, auto_fixed, high_risk)
		VALUES ('periodic', 'succeeded', '2026-12-01 06:00:00Z', '2026-12-01 06:00:01Z', 3, 1, 1) RETURNING id`).Scan(&runID))
	_, err = pool.Exec(ctx, `
		INSERT INTO reconcile_runs (trigger, status, created_at, rows_checked) VALUES
		 ('periodic', 'succeeded', '2026-12-01 07:00:00Z', 3), ('periodic', 'failed', '2026-12-01 07:05:00Z', 0),
		 ('periodic', 'succeeded', '2026-12-02 07:00:00Z', 3)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO reconcile_findings (run_id, class, kind, sku, pool, details, action) VALUES
		 ($1, 'auto_fix', 'stuck_hold', 'T1', 'main', '{}', 'released'), ($1, 'high_risk', 'counters_vs_ledger', 'T3', 'main', '{}', 'paused')`, runID)
	require.NoError(t, err)

	svc := reports.New(pool)
	r, err := svc.Daily(ctx, reports.DailyQuery{Date: "2026-12-01"})
	require.NoError(t, err)
	require.Equal(t, "UTC", r.TimeZone)
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), r.From)
	require.Equal(t, headline{Held: 5, Expired: 3, RolledBack: 5, Released: 1, Adjusted: 5, Transferred: 10, Repairs: 1, Movements: 8}, headlineOf(r.Totals),
		"the expiry at midnight is in, the reserve before it and the adjustment at the next midnight are not")
	require.Len(t, r.Campaigns, 1)
	require.Equal(t, "bf", r.Campaigns[0].Campaign)
	require.Equal(t, headline{Held: 5, RolledBack: 5, Transferred: 10, Movements: 3}, headlineOf(r.Campaigns[0].Figures))
	require.Equal(t, reports.Change{Counters: stock.Counters{Total: 10, Available: 10}}, r.Campaigns[0].Change)
	rc := r.Reconciliations
	require.Equal(t, int64(3), rc.Runs)
	require.Equal(t, int64(1), rc.Failed)
	require.Equal(t, int64(1), rc.AutoFixed)
	require.Equal(t, int64(1), rc.HighRisk)
	require.Len(t, rc.WithFindings, 2, "the run that found something and the one that failed")
	require.Equal(t, runID, rc.WithFindings[0].ID)
	require.Len(t, rc.WithFindings[0].Findings, 2)
	require.Equal(t, "counters_vs_ledger", rc.WithFindings[0].Findings[1].Kind)
	require.Equal(t, "failed", rc.WithFindings[1].Status)

	// The same day in Shanghai (UTC+8) starts at 16:00 UTC the day before.
	r, err = svc.Daily(ctx, reports.DailyQuery{Date: "2026-12-01", TimeZone: "Asia/Shanghai"})
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC), r.From)
	require.Equal(t, headline{Held: 9, Expired: 3, RolledBack: 5, Released: 1, Adjusted: 7, Transferred: 10, Repairs: 1, Movements: 8}, headlineOf(r.Totals))

	// A page at a time: (T1, bf), (T1, main), (T2, main), (T3, main), all
	// at default.
	var seen []string
	q := reports.DailyQuery{Date: "2026-12-01", Limit: 1}
	for range 10 {
		page, err := svc.Daily(ctx, q)
		require.NoError(t, err)
		for _, p := range page.Pools {
			seen = append(seen, p.SKU+"@"+p.Location+"/"+p.Pool)
		}
		if page.NextCursor == nil {
			break
		}
		q.Cursor = *page.NextCursor
	}
	require.Equal(t, []string{"T1@default/bf", "T1@default/main", "T2@default/main", "T3@default/main"}, seen)

	for _, bad := range []reports.DailyQuery{{Date: "2026-13-01"}, {Date: "1 Dec"}, {Date: ""}} {
		_, err := svc.Daily(ctx, bad)
		require.ErrorIs(t, err, reports.ErrBadDate, bad.Date)
	}
	_, err = svc.Daily(ctx, reports.DailyQuery{Date: "2026-12-01", Cursor: "not-a-cursor!"})
	require.ErrorIs(t, err, reports.ErrBadCursor)
	for _, tz := range []string{"Mars/Olympus", "Local", "../../etc/passwd", "/etc/localtime"} {
		_, err = svc.Daily(ctx, reports.DailyQuery{Date: "2026-12-01", TimeZone: tz})
		requireInvalid(t, err, tz)
	}
	_, err = svc.Daily(ctx, reports.DailyQuery{Date: "2026-12-01", Limit: 1001})
	requireInvalid(t, err, "limit")
}

// headline is a report's figures of the kinds that hold and adjust.
type headline struct {
	Held, Confirmed, Released, Expired, RolledBack, Adjusted, Transferred, Repairs, Movements int64
}

func headlineOf(f reports.Figures) headline {
	return headline{Held: f.Held, Confirmed: f.Confirmed, Released: f.Released, Expired: f.Expired, RolledBack: f.RolledBack,
		Adjusted: f.Adjusted, Transferred: f.Transferred, Repairs: f.Repairs, Movements: f.Movements}
}

func requireInvalid(t *testing.T, err error, what string) {
	t.Helper()
	var de *domain.Error
	require.ErrorAs(t, err, &de, what)
	require.Equal(t, domain.CodeInvalid, de.Code, what)
}

// TestDailyReportPoolsAddUpOverConsecutiveDays: a ledger row belongs to
// exactly one business day, a row at exactly midnight to the day it
// starts. On two consecutive days with rows at each midnight (the first
// day's, the second's, the third's), every figure of the pools sums to
// the day's total, and the pools' movements of the two days are the
// ledger's rows from the first midnight to the third, each counted once.
// The figures are compared whatever columns the report has.
func TestDailyReportPoolsAddUpOverConsecutiveDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO ledger (at, sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor, reason)
		VALUES
		 ('2026-11-30 23:59:59.999Z', 'M1', 'main', 'stock_in', 9, 9, 0, 0, 1, 'alice', NULL),
		 ('2026-12-01 00:00:00Z',     'M1', 'main', 'reserve',  0, -2, 2, 0, 2, 'shop', NULL),
		 ('2026-12-01 12:00:00Z',     'M1', 'main', 'confirm',  0, 0, -2, 2, 3, 'shop', NULL),
		 ('2026-12-02 00:00:00Z',     'M1', 'main', 'reserve',  0, -3, 3, 0, 4, 'shop', NULL),
		 ('2026-12-02 00:00:00Z',     'M2', 'bf',   'transfer', 4, 4, 0, 0, 1, 'system:campaign', NULL),
		 ('2026-12-02 00:00:00Z',     'M3', 'main', 'adjust',   -1, -1, 0, 0, 1, 'alice', 'damaged'),
		 ('2026-12-02 08:00:00Z',     'M1', 'main', 'expire',   0, 3, -3, 0, 5, 'system:expire_holds', NULL),
		 ('2026-12-02 23:59:59.999Z', 'M2', 'bf',   'reserve',  0, -1, 1, 0, 2, 'shop', NULL),
		 ('2026-12-03 00:00:00Z',     'M2', 'bf',   'rollback', 0, 1, -1, 0, 3, 'alice', 'campaign end'),
		 ('2026-12-03 00:00:00Z',     'M1', 'main', 'release',  0, 1, -1, 0, 6, 'shop', NULL)`)
	require.NoError(t, err)

	svc := reports.New(pool)
	// figures are the numbers of v's JSON object, by name.
	figures := func(v any) map[string]int64 {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var m map[string]any
		require.NoError(t, d.Decode(&m))
		out := map[string]int64{}
		for k, x := range m {
			if n, ok := x.(json.Number); ok {
				out[k], err = n.Int64()
				require.NoError(t, err, k)
			}
		}
		return out
	}
	var movements int64
	for _, day := range []string{"2026-12-01", "2026-12-02"} {
		var totals map[string]int64
		sum := map[string]int64{}
		q := reports.DailyQuery{Date: day, Limit: 1}
		for range 20 {
			page, err := svc.Daily(ctx, q)
			require.NoError(t, err)
			totals = figures(page.Totals)
			for _, p := range page.Pools {
				for k, n := range figures(p) {
					sum[k] += n
				}
			}
			if page.NextCursor == nil {
				break
			}
			q.Cursor = *page.NextCursor
		}
		require.NotEmpty(t, totals)
		for k, n := range totals {
			require.Equal(t, n, sum[k], "%s: the pools' %s add up to the day's", day, k)
		}
		movements += sum["movements"]
	}
	require.EqualValues(t, dbtest.Count(t, pool, `SELECT count(*) FROM ledger WHERE at >= '2026-12-01' AND at < '2026-12-03'`), movements,
		"each row of the two days in one day's pools")
}

// TestDailyReportEveryKindPerLocation replays a day of stock work at two
// locations: +10 received by an adjustment, 3 written off, a count 2 short,
// 2 sent to paris and lost in transit, 1 sent and received, 1 sent and the
// transfer cancelled, 1 moved to damaged. Each lands in its named column
// at its location, every kind's change of every state sums to the day's
// change, and the day's change is each stock row's counters (the rows
// were born today).
func TestDailyReportEveryKindPerLocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dbtest.Location(t, pool, "paris", 1)
	inv := inventory.New(pool, nil, inventory.Config{})
	key := func(k string) idempotency.Key { return idempotency.NewKey("ops", k) }
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 10, Reason: "restock", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.MoveOnce(ctx, key("off"), stock.Move{SKU: "A1", From: stock.StateAvailable, To: stock.StateLost, Quantity: 3, Reason: "broken", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.CountOnce(ctx, key("count"), stock.StockCount{SKU: "A1", Counted: 5, Reason: "stocktake", Actor: "alice"})
	require.NoError(t, err)
	send := func(k string, n int64) stock.Transfer {
		tr, _, err := inv.CreateTransferOnce(ctx, key(k), stock.NewTransfer{SKU: "A1", From: "default", To: "paris", Quantity: n, Reason: "rebalance", Actor: "alice"})
		require.NoError(t, err)
		return tr
	}
	lost := send("lost", 2)
	_, err = inv.CloseTransfer(ctx, stock.TransferStep{ID: lost.ID, Reason: "truck lost", Actor: "alice"})
	require.NoError(t, err)
	arrived := send("arrived", 1)
	_, _, err = inv.ReceiveTransferOnce(ctx, key("receive"), stock.TransferStep{ID: arrived.ID, Quantity: 1, Actor: "alice"})
	require.NoError(t, err)
	back := send("back", 1)
	_, err = inv.CancelTransfer(ctx, stock.TransferStep{ID: back.ID, Reason: "not needed", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.MoveOnce(ctx, key("dent"), stock.Move{SKU: "A1", From: stock.StateAvailable, To: stock.StateDamaged, Quantity: 1, Reason: "dent", Actor: "alice"})
	require.NoError(t, err)

	var today string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))
	r, err := reports.New(pool).Daily(ctx, reports.DailyQuery{Date: today})
	require.NoError(t, err)
	require.Len(t, r.Pools, 2)
	home, paris := r.Pools[0], r.Pools[1]
	require.Equal(t, []string{"A1@default/main", "A1@paris/main"}, []string{
		home.SKU + "@" + home.Location + "/" + home.Pool, paris.SKU + "@" + paris.Location + "/" + paris.Pool})

	type named struct {
		Adjusted, WrittenOff, Counted, TransferredOut, TransferredIn, Received, LostInTransit, TransferCancelled, Moved int64
	}
	namedOf := func(f reports.Figures) named {
		return named{f.Adjusted, f.WrittenOff, f.Counted, f.TransferredOut, f.TransferredIn, f.Received, f.LostInTransit, f.TransferCancelled, f.Moved}
	}
	require.Equal(t, named{Adjusted: 10, WrittenOff: 3, Counted: -2, TransferredOut: 4, TransferCancelled: 1, Moved: 1}, namedOf(home.Figures))
	require.Equal(t, named{TransferredIn: 4, Received: 1, LostInTransit: 2}, namedOf(paris.Figures))
	require.Equal(t, named{Adjusted: 10, WrittenOff: 3, Counted: -2, TransferredOut: 4, TransferredIn: 4, Received: 1, LostInTransit: 2,
		TransferCancelled: 1, Moved: 1}, namedOf(r.Totals))
	require.Len(t, r.Locations, 2)
	require.Equal(t, "default", r.Locations[0].Location)
	require.Equal(t, namedOf(home.Figures), namedOf(r.Locations[0].Figures))
	require.Equal(t, "paris", r.Locations[1].Location)
	require.Equal(t, namedOf(paris.Figures), namedOf(r.Locations[1].Figures))

	st, err := inv.GetStock(ctx, "A1")
	require.NoError(t, err)
	now := map[string]stock.Counters{}
	for _, p := range st.Pools {
		now[p.Location] = p.Counters
	}
	require.Equal(t, stock.Counters{Total: 2, Available: 1, Damaged: 1}, now["default"])
	require.Equal(t, stock.Counters{Total: 1, Available: 1}, now["paris"])
	for _, f := range []reports.PoolFigures{home, paris} {
		require.Equal(t, reports.Change{Counters: now[f.Location]}, f.Change, "the day's change at %s is its counters: every row was born today", f.Location)
		var sum reports.Change
		for _, k := range f.ByKind {
			sum = sum.Plus(k.Change)
		}
		require.Equal(t, f.Change, sum, "the kinds' changes sum to the day's change at %s", f.Location)
	}
	require.Equal(t, reports.Change{Counters: now["default"].Plus(now["paris"])}, r.Totals.Change)
	require.Equal(t, reports.KindFigures{Movements: 1, Change: reports.Change{Counters: stock.Counters{Total: 1, Available: 1, Incoming: -1}}}, paris.ByKind["receive"],
		"a receipt: from incoming into total and available")
}

// TestDailyReportBackorders: the day's promises are in the report. With 2
// on hand and 10 due, a hold of 5 holds 2 and promises 3, a hold of 2
// promises both and is released, and a receipt of 2 fills 2 of the first
// hold's 3: promised 5, filled 2; by kind, backordered +5 (reserve), -2
// (release), -2 (backorder_fill), which sum to the day's change, +1, the
// row's backordered now.
func TestDailyReportBackorders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "LAMP", Delta: 2, Reason: "first stock", Actor: "alice"})
	require.NoError(t, err)
	po, _, err := inv.CreateInboundOnce(ctx, idempotency.NewKey("ops", "po"), stock.NewInbound{SupplierRef: "PO-7",
		ExpectedOn: time.Now().UTC().AddDate(0, 0, 5).Format(time.DateOnly), Lines: []stock.NewInboundLine{{SKU: "LAMP", Quantity: 10}}, Actor: "alice"})
	require.NoError(t, err)
	horizon := int32(14)
	_, err = inv.SetBackorders(ctx, stock.Backorders{SKU: "LAMP", HorizonDays: &horizon}, "alice")
	require.NoError(t, err)
	hold := holder(t, inv, "LAMP")
	require.EqualValues(t, 3, hold("first", 5).Items[0].Backordered)
	_, err = inv.Release(ctx, hold("gone", 2).ID, inventory.Caller{Name: "shop"}, "")
	require.NoError(t, err)
	_, err = inv.ReceiveInbound(ctx, stock.InboundStep{ID: po.ID, SKU: "LAMP", Quantity: 2, Actor: "dock"})
	require.NoError(t, err)

	var today string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))
	r, err := reports.New(pool).Daily(ctx, reports.DailyQuery{Date: today})
	require.NoError(t, err)
	f := r.Totals
	require.Equal(t, []int64{2, 5, 0, 2}, []int64{f.Held, f.Promised, f.Released, f.BackordersFilled}, "held, promised, released, filled")
	byKind := map[string]int64{}
	var sum int64
	for kind, k := range f.ByKind {
		if k.Backordered != 0 {
			byKind[kind] = k.Backordered
		}
		sum += k.Backordered
	}
	require.Equal(t, map[string]int64{"reserve": 5, "release": -2, "backorder_fill": -2}, byKind)
	require.Equal(t, reports.KindFigures{Movements: 1, Change: reports.Change{Counters: stock.Counters{Available: -2, Reserved: 2}, Backordered: -2}},
		f.ByKind["backorder_fill"])
	var now int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backordered FROM stock WHERE sku = 'LAMP'`).Scan(&now))
	require.EqualValues(t, 1, now)
	require.Equal(t, now, f.Change.Backordered, "every row was born today: the day's change is its backordered")
	require.Equal(t, sum, f.Change.Backordered, "the kinds' changes sum to the day's")
	require.Equal(t, f, r.Pools[0].Figures)
}
