package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/events/eventstest"
)

// TestRepairsNameWhatTheyFix: a repair and a forced resume take refs
// (order refs, hold ids, ledger ids, a ticket), stored on their ledger
// rows and shown in the SKU's ledger, in their events (stock.repaired,
// with the counters after it; stock.resumed) and in the forced_resume
// alert; bad refs are 422 and change nothing; a dry run stores nothing.
func TestRepairsNameWhatTheyFix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	_, err := e.pool.Exec(ctx, `UPDATE stock SET total = total + 2, available = available + 2 WHERE sku = 'A1'`)
	require.NoError(t, err)
	counts := e.counts()
	for _, refs := range []any{
		[]string{""}, []string{"ok", "bad\u0000"}, []string{"\u200bticket"}, make([]string, 21), []string{strings.Repeat("x", 256)},
	} {
		requireProblem(t, e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "x", "refs": refs}), 422, "invalid_request")
	}
	requireProblem(t, e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "x", "refs": "o-1"}), 400, "invalid_request")
	require.Equal(t, counts, e.counts())

	refs := []any{"o-1042", "ledger 7", "OPS-17"}
	r := e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit", "refs": refs, "dry_run": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	r = e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "hand edit", "refs": refs})
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, 1, countRows(t, e, `SELECT count(*) FROM ledger WHERE kind = 'repair'`), "the dry run wrote nothing")

	// Books off again, paused, resumed by force naming what it is about.
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/pause", e.ops, map[string]any{"reason": "recount"}).status)
	_, err = e.pool.Exec(ctx, `UPDATE stock SET total = total + 1, available = available + 1 WHERE sku = 'A1'`)
	require.NoError(t, err)
	r = e.do("POST", "/v1/skus/A1/resume", e.ops, map[string]any{"reason": "must sell", "force": true, "refs": []any{"OPS-18"}})
	require.Equal(t, 200, r.status, "%s", r.body)

	led := e.do("GET", "/v1/skus/A1/ledger", e.ops, nil).json(t)["movements"].([]any)
	byKind := map[string]map[string]any{}
	for _, m := range led {
		mv := m.(map[string]any)
		if _, seen := byKind[mv["kind"].(string)]; !seen {
			byKind[mv["kind"].(string)] = mv
		}
	}
	require.Equal(t, refs, byKind["repair"]["refs"])
	require.Equal(t, []any{"OPS-18"}, byKind["resume"]["refs"])
	require.NotContains(t, byKind["pause"], "refs", "none named: left out")

	alerts, err := e.alerts.List(ctx, "open", 100)
	require.NoError(t, err)
	var forced map[string]any
	for _, a := range alerts {
		if a.Kind == "forced_resume" {
			require.NoError(t, json.Unmarshal(a.Details, &forced))
		}
	}
	require.Equal(t, []any{"OPS-18"}, forced["refs"])

	eventstest.WaitServed(t, e.pool)
	evs := e.do("GET", "/v1/events?limit=1000", e.ops, nil).json(t)["events"].([]any)
	found := map[string]map[string]any{}
	for _, ev := range evs {
		m := ev.(map[string]any)
		found[m["type"].(string)] = m["data"].(map[string]any)
	}
	repaired := found["stock.repaired"]
	require.Equal(t, refs, repaired["refs"])
	require.Equal(t, "ledger", repaired["to"])
	require.Equal(t, "hand edit", repaired["reason"])
	require.Equal(t, map[string]any{"total": float64(10), "available": float64(10), "reserved": float64(0), "sold": float64(0),
		"quality_control": float64(0), "damaged": float64(0), "safety_stock": float64(0), "incoming": float64(0)}, repaired["counters"],
		"the counters after a repair to the ledger, which makes no stock.changed")
	require.Equal(t, []any{"OPS-18"}, found["stock.resumed"]["refs"])
	require.NotContains(t, found["stock.paused"], "refs")
	require.Equal(t, 200, e.do("POST", "/v1/skus/A1/repair", e.ops, map[string]any{"to": "ledger", "reason": "recounted"}).status)
}

func countRows(t *testing.T, e *env, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}
