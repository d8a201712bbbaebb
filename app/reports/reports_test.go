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
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reports"
)

// TestDailyReportOfTheDayFlows: holds made, confirmed and cancelled today
// through the service, and stock taken in, are today's figures, per pool
// and in all, with the signs the contract gives (units, positive); the day
// before has none.
func TestDailyReportOfTheDayFlows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err := inv.Adjust(ctx, inventory.Adjustment{SKU: "A1", Delta: 100, Reason: "restock", Actor: "alice"})
	require.NoError(t, err)
	hold := func(key string, q int64) inventory.Reservation {
		r, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: key, Items: []inventory.Item{{SKU: "A1", Quantity: q}}})
		require.NoError(t, err)
		return r
	}
	paid := hold("paid", 2)
	_, err = inv.Confirm(ctx, paid.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	_, err = inv.Cancel(ctx, hold("gone", 3).ID, inventory.Caller{Name: "shop"}, "")
	require.NoError(t, err)
	hold("open", 1)

	svc := reports.New(pool)
	var today string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))
	r, err := svc.Daily(ctx, reports.DailyQuery{Date: today})
	require.NoError(t, err)
	want := reports.Figures{Held: 6, Confirmed: 2, Released: 3, Adjusted: 100, Movements: 6}
	require.Equal(t, want, r.Totals)
	require.Equal(t, []reports.PoolFigures{{SKU: "A1", Pool: "main", Figures: want}}, r.Pools)
	require.Empty(t, r.Campaigns)
	require.Nil(t, r.NextCursor)

	day, _ := time.Parse(time.DateOnly, today)
	r, err = svc.Daily(ctx, reports.DailyQuery{Date: day.AddDate(0, 0, -1).Format(time.DateOnly)})
	require.NoError(t, err)
	require.Equal(t, reports.Figures{}, r.Totals)
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
	require.Equal(t, reports.Figures{Held: 5, Expired: 3, RolledBack: 5, Released: 1, Adjusted: 5, Transferred: 10, Repairs: 1, Movements: 8}, r.Totals,
		"the expiry at midnight is in, the reserve before it and the adjustment at the next midnight are not")
	require.Equal(t, []reports.CampaignFigures{{Campaign: "bf", Figures: reports.Figures{Held: 5, RolledBack: 5, Transferred: 10, Movements: 3}}}, r.Campaigns)
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
	require.Equal(t, reports.Figures{Held: 9, Expired: 3, RolledBack: 5, Released: 1, Adjusted: 7, Transferred: 10, Repairs: 1, Movements: 8}, r.Totals)

	// A page at a time: (T1, bf), (T1, main), (T2, main), (T3, main).
	var seen []string
	q := reports.DailyQuery{Date: "2026-12-01", Limit: 1}
	for range 10 {
		page, err := svc.Daily(ctx, q)
		require.NoError(t, err)
		for _, p := range page.Pools {
			seen = append(seen, p.SKU+"/"+p.Pool)
		}
		if page.NextCursor == nil {
			break
		}
		q.Cursor = *page.NextCursor
	}
	require.Equal(t, []string{"T1/bf", "T1/main", "T2/main", "T3/main"}, seen)

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
