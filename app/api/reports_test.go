package api_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDailyReportOverHTTP: the day's figures per pool a page at a time
// (cursor, limit, next_cursor), in all and per campaign, with the
// reconciliations; malformed input is 400, unacceptable 422, a shop 403.
func TestDailyReportOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("B2", 10)
	id := e.hold("k1", line("A1", 2), line("B2", 1)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil).status)
	var today string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))

	r := e.do("GET", "/v1/reports/daily?limit=1&date="+today, e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, today, got["date"])
	require.Equal(t, "UTC", got["time_zone"])
	totals := got["totals"].(map[string]any)
	require.InDelta(t, 3.0, totals["held"], 0)
	require.InDelta(t, 3.0, totals["confirmed"], 0)
	require.InDelta(t, 20.0, totals["adjusted"], 0)
	pools := got["pools"].([]any)
	require.Len(t, pools, 1)
	require.Equal(t, "A1", pools[0].(map[string]any)["sku"])
	require.Equal(t, "default", pools[0].(map[string]any)["location"])
	next := got["next_cursor"].(string)
	r = e.do("GET", "/v1/reports/daily?limit=1&date="+today+"&cursor="+url.QueryEscape(next), e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	got = r.json(t)
	require.Equal(t, "B2", got["pools"].([]any)[0].(map[string]any)["sku"])
	require.Nil(t, got["next_cursor"])
	require.InDelta(t, 2.0, got["reconciliations"].(map[string]any)["runs"], 0, "the reconciliations that followed the two adjustments")

	for q, status := range map[string]int{
		"": 400, "?date=2026-12-32": 400, "?date=" + today + "&limit=x": 400, "?date=" + today + "&cursor=%21%21": 400,
		"?date=" + today + "&limit=0": 422, "?date=" + today + "&limit=1001": 422, "?date=" + today + "&tz=Mars%2FOlympus": 422,
		// Days whose start or end in UTC is outside the years 1 to 9999.
		"?date=9999-12-31": 422, "?date=9999-12-31&tz=America%2FNew_York": 422, "?date=0001-01-01&tz=Asia%2FTokyo": 422,
	} {
		requireProblem(t, e.do("GET", "/v1/reports/daily"+q, e.ops, nil), status, "invalid_request")
	}
	for _, q := range []string{"?date=9999-12-30", "?date=9999-12-31&tz=Asia%2FTokyo", "?date=0001-01-01", "?date=0001-01-01&tz=America%2FNew_York"} {
		r := e.do("GET", "/v1/reports/daily"+q, e.ops, nil)
		require.Equal(t, 200, r.status, "%s: %s", q, r.body)
	}
	requireProblem(t, e.do("GET", "/v1/reports/daily?date="+today, e.shop, nil), 403, "forbidden")
}

// TestStatsListHotSKUs: /v1/stats lists this process's SKUs with the most
// hold requests in the last minute, refused requests included.
func TestStatsListHotSKUs(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for i := range 40 {
		requireProblem(t, e.hold(fmt.Sprint("hot-", i), line("HOT-STATS", 1)), 422, "unknown_sku")
	}
	r := e.do("GET", "/v1/stats", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	var found map[string]any
	for _, h := range r.json(t)["hot_skus"].([]any) {
		if h.(map[string]any)["sku"] == "HOT-STATS" {
			found = h.(map[string]any)
		}
	}
	require.NotNil(t, found, "HOT-STATS among the hot SKUs: %s", r.body)
	require.InDelta(t, 40.0, found["holds"], 0)
}
