package api_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/partitions"
)

// TestArchivedOverHTTP: once a month of the ledger is archived, every
// reader says so when asked for what is in the archive, with a 410
// problem+json naming how far the ledger is archived, never an empty
// page: the event feed from a cursor before the archive (as cursor or
// after), a SKU's ledger before an archived id, the daily report of a day
// that starts before the archive's end (in UTC, in a time zone whose day
// begins earlier, a day long before). The same readers from after the
// archive answer 200, and bad input is still 400. A retry of a hold whose
// rows were archived answers its lines.
func TestArchivedOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("A1", 10)
	id := e.hold("k1", line("A1", 2)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+id+"/confirm", e.shop, nil).status)
	eventstest.WaitServed(t, e.pool)
	r := e.do("GET", "/v1/events?limit=1", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	old := r.json(t)["next_cursor"].(string)
	r = e.do("GET", "/v1/skus/A1/ledger?limit=1", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	oldID := r.json(t)["movements"].([]any)[0].(map[string]any)["id"].(float64)

	end := dbtest.CloseMonthNow(t, e.pool)
	got, err := partitions.New(e.pool, nil).Archive(ctx, end, t.TempDir(), "alice")
	require.NoError(t, err)
	require.Len(t, got, 2)
	e.stockIn("A1", 5) // after the archive
	eventstest.WaitServed(t, e.pool)
	cut := end.UTC().Format(time.RFC3339)

	for _, q := range []string{"cursor=" + url.QueryEscape(old), "after=" + url.QueryEscape(old)} {
		p := requireProblem(t, e.do("GET", "/v1/events?"+q, e.ops, nil), 410, "archived")
		require.Contains(t, p["detail"], cut, q)
	}
	r = e.do("GET", "/v1/events", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	evs := r.json(t)["events"].([]any)
	require.NotEmpty(t, evs, "the events after the archive")
	for _, ev := range evs {
		at, err := time.Parse(time.RFC3339Nano, ev.(map[string]any)["at"].(string))
		require.NoError(t, err)
		require.False(t, at.Before(end), "an event from before the archive: %v", ev)
	}

	p := requireProblem(t, e.do("GET", fmt.Sprintf("/v1/skus/A1/ledger?before_id=%d", int64(oldID)), e.ops, nil), 410, "archived")
	require.Contains(t, p["detail"], cut)
	r = e.do("GET", "/v1/skus/A1/ledger", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)

	day := end.UTC().Format(time.DateOnly)
	next := end.UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	for _, q := range []string{"date=" + day, "date=" + day + "&tz=Pacific/Kiritimati", "date=" + end.UTC().AddDate(0, -2, 0).Format(time.DateOnly)} {
		p := requireProblem(t, e.do("GET", "/v1/reports/daily?"+q, e.ops, nil), 410, "archived")
		require.Contains(t, p["detail"], cut, q)
	}
	r = e.do("GET", "/v1/reports/daily?date="+next, e.ops, nil)
	require.Equal(t, 200, r.status, "the day after the archive's end: %s", r.body)

	// A retry of a hold that ended in the archived month: its reserve rows
	// went to the archive, so the answer gives its lines as they are now.
	r = e.hold("k1", line("A1", 2))
	require.Equal(t, 201, r.status, "%s", r.body)
	again := r.json(t)
	require.Equal(t, id, again["id"])
	items := again["items"].([]any)
	require.Len(t, items, 1, "%s", r.body)
	require.Equal(t, "A1", items[0].(map[string]any)["sku"])
	require.EqualValues(t, 2, items[0].(map[string]any)["quantity"])

	requireProblem(t, e.do("GET", "/v1/events?cursor=not-a-cursor", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/skus/A1/ledger?before_id=-1", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/reports/daily?date=2026-02-30", e.ops, nil), 400, "invalid_request")
}
