package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func bulkLine(sku string, delta int) map[string]any {
	return map[string]any{"sku": sku, "delta": delta}
}

// pools returns a stock view's pools by name.
func pools(t testing.TB, stock any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, p := range stock.(map[string]any)["pools"].([]any) {
		m := p.(map[string]any)
		out[m["pool"].(string)] = m
	}
	return out
}

func TestBulkAdjustments(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("C3", 30)
	held := e.hold("h1", line("C3", 5))
	require.Equal(t, 201, held.status, "%s", held.body)

	body := map[string]any{"reason": "weekly count", "ref": "COUNT-12", "lines": []any{
		bulkLine("B2", 7), // a new SKU: its main row is created
		map[string]any{"sku": "C3", "set_total": 20},
		map[string]any{"sku": "A1", "pool": "main", "delta": -4},
		map[string]any{"sku": "D4", "set_total": 3},
	}}
	r := e.do("POST", "/v1/stock/adjustments", e.ops, body, "Idempotency-Key", "count-12")
	require.Equal(t, 200, r.status, "%s", r.body)
	skus := r.json(t)["skus"].([]any)
	require.Len(t, skus, 4)
	var names []string
	for _, s := range skus {
		names = append(names, s.(map[string]any)["sku"].(string))
	}
	require.Equal(t, []string{"A1", "B2", "C3", "D4"}, names, "answered by SKU")
	want := map[string][4]float64{ // total, available, reserved, sold
		"A1": {6, 6, 0, 0}, "B2": {7, 7, 0, 0}, "C3": {20, 15, 5, 0}, "D4": {3, 3, 0, 0},
	}
	for i, s := range skus {
		p := pools(t, s)["main"]
		w := want[names[i]]
		got := [4]float64{p["total"].(float64), p["available"].(float64), p["reserved"].(float64), p["sold"].(float64)}
		require.Equal(t, w, got, names[i])
	}

	// One ledger row per line, with the body's reason and ref.
	rows, err := e.pool.Query(t.Context(),
		`SELECT sku, kind, delta_total, delta_available, actor, reason, ref FROM ledger WHERE ref = 'COUNT-12' ORDER BY sku`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var sku, kind, actor, reason, ref string
		var dt, da int64
		require.NoError(t, rows.Scan(&sku, &kind, &dt, &da, &actor, &reason, &ref))
		require.Equal(t, dt, da)
		require.Equal(t, "alice", actor)
		require.Equal(t, "weekly count", reason)
		got = append(got, fmt.Sprintf("%s %s %+d", sku, kind, dt))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"A1 adjust -4", "B2 stock_in +7", "C3 adjust -10", "D4 stock_in +3"}, got)

	// A replay answers the same without applying twice; the key with
	// another body is refused.
	before := e.counts()
	again := e.do("POST", "/v1/stock/adjustments", e.ops, body, "Idempotency-Key", "count-12")
	require.Equal(t, 200, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(r.body), string(again.body))
	require.Equal(t, before, e.counts())
	requireProblem(t, e.do("POST", "/v1/stock/adjustments", e.ops,
		map[string]any{"reason": "weekly count", "lines": []any{bulkLine("A1", 1)}}, "Idempotency-Key", "count-12"), 422, "idempotency_key_reused")

	// A total already there changes nothing and writes no ledger row.
	same := e.do("POST", "/v1/stock/adjustments", e.ops,
		map[string]any{"reason": "count", "lines": []any{map[string]any{"sku": "D4", "set_total": 3}}}, "Idempotency-Key", "same")
	require.Equal(t, 200, same.status, "%s", same.body)
	stockAndLedger := func(counts string) string { return counts[:strings.Index(counts, " jobs=")] }
	require.Equal(t, stockAndLedger(before), stockAndLedger(e.counts()))

	requireProblem(t, e.do("POST", "/v1/stock/adjustments", e.shop, body, "Idempotency-Key", "shop"), 403, "forbidden")
}

// TestBulkAdjustmentBadLineChangesNothing sends bulk adjustments with one
// bad line among good ones: each is refused, names the line, and changes
// nothing, not even the rows a good line would have created.
func TestBulkAdjustmentBadLineChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("B2", 10)
	require.Equal(t, 201, e.hold("h1", line("A1", 8)).status)

	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = bulkLine(fmt.Sprint("S", i), 1)
	}
	good := []any{bulkLine("NEW1", 5), bulkLine("B2", -3)}
	with := func(bad any) map[string]any {
		return map[string]any{"reason": "r", "lines": append(append([]any{}, good...), bad)}
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		line   float64 // -1: the problem is not one line's
		sku    string
	}{
		{"takes more than available", with(bulkLine("A1", -3)), 409, "insufficient_available", 2, "A1"},
		{"total below held", with(map[string]any{"sku": "A1", "set_total": 7}), 409, "insufficient_available", 2, "A1"},
		{"unknown pool", with(map[string]any{"sku": "B2", "pool": "c9", "delta": 1}), 422, "unknown_pool", 2, "B2"},
		{"unknown SKU taken from", with(bulkLine("NOPE", -1)), 422, "unknown_sku", 2, "NOPE"},
		{"unknown SKU set to zero", with(map[string]any{"sku": "NOPE", "set_total": 0}), 422, "unknown_sku", 2, "NOPE"},
		{"zero delta", with(bulkLine("A1", 0)), 422, "invalid_request", 2, "A1"},
		{"no delta", with(map[string]any{"sku": "A1"}), 422, "invalid_request", 2, "A1"},
		{"delta and set_total", with(map[string]any{"sku": "A1", "delta": 1, "set_total": 3}), 422, "invalid_request", 2, "A1"},
		{"negative total", with(map[string]any{"sku": "A1", "set_total": -1}), 422, "invalid_request", 2, "A1"},
		{"delta too big", with(bulkLine("A1", 1_000_000_001)), 422, "invalid_request", 2, "A1"},
		{"pool given twice", with(bulkLine("B2", 1)), 422, "invalid_request", 2, "B2"},
		{"bad sku", with(bulkLine("a/b", 1)), 422, "invalid_request", 2, "a/b"},
		{"empty sku", with(bulkLine("", 1)), 422, "invalid_request", 2, ""},
		{"bad pool", with(map[string]any{"sku": "A1", "pool": " x", "delta": 1}), 422, "invalid_request", 2, "A1"},
		{"long reason", map[string]any{"reason": strings.Repeat("r", 501), "lines": good}, 422, "invalid_request", -1, ""},
		{"no reason", map[string]any{"lines": good}, 422, "invalid_request", -1, ""},
		{"blank reason", map[string]any{"reason": " ", "lines": good}, 422, "invalid_request", -1, ""},
		{"no lines", map[string]any{"reason": "r", "lines": []any{}}, 422, "invalid_request", -1, ""},
		{"lines missing", map[string]any{"reason": "r"}, 422, "invalid_request", -1, ""},
		{"1,001 lines", map[string]any{"reason": "r", "lines": tooMany}, 422, "invalid_request", -1, ""},
		{"string delta", `{"lines": [{"sku": "A1", "delta": "1"}]}`, 400, "invalid_request", -1, ""},
		{"unknown field", `{"lines": [{"sku": "A1", "delta": 1, "qty": 1}]}`, 400, "invalid_request", -1, ""},
	}
	before := e.counts()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v1/stock/adjustments", e.ops, c.body, "Idempotency-Key", fmt.Sprint("bad-", i))
			if c.status == 422 && c.name == "1,001 lines" && r.status == 413 {
				t.Fatalf("1,001 short lines must fit in 64 KiB: %s", r.body)
			}
			p := requireProblem(t, r, c.status, c.code)
			if c.line >= 0 {
				require.EqualValues(t, int(c.line), p["line"], "%s", r.body)
				require.Contains(t, p["detail"], fmt.Sprintf("lines[%d]", int(c.line)))
				if c.sku != "" {
					require.Equal(t, c.sku, p["sku"])
				}
			} else {
				require.NotContains(t, p, "line")
			}
			require.Equal(t, before, e.counts(), "a refused bulk adjustment changes nothing")
		})
	}
	requireProblem(t, e.do("GET", "/v1/skus/NEW1", e.ops, nil), 404, "unknown_sku")
}

// TestBulkAdjustmentsRaceHolds runs bulk adjustments of every SKU, lines in
// random order, against multi-SKU holds, confirms and releases of the same
// SKUs: no deadlock and no 5xx, each bulk adjustment applied whole or not at
// all (the totals are the start plus exactly the deltas answered 200), and
// the invariants hold.
func TestBulkAdjustmentsRaceHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, &setupOpts{coalesce: true})
	const nSKU, start = 12, 40
	skus := make([]string, nSKU)
	for i := range skus {
		skus[i] = fmt.Sprintf("%c%02d", "rR"[i%2], i) // mixed case: byte order differs from most collations
		e.stockIn(skus[i], start)
	}

	type outcome struct {
		status int
		deltas map[string]int
		err    error
	}
	var wg sync.WaitGroup
	bulks := make(chan outcome, 200)
	holdStatuses := make(chan int, 2000)
	errs := make(chan error, 2000)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 15 {
				deltas := map[string]int{}
				var lines []any
				for _, j := range rand.Perm(nSKU) {
					d := rand.IntN(9) - 4
					if d == 0 {
						d = 3
					}
					deltas[skus[j]] = d
					lines = append(lines, bulkLine(skus[j], d))
				}
				r, err := e.sendRetryingBusy("POST", "/v1/stock/adjustments", e.ops, map[string]any{"reason": "count", "lines": lines},
					"Idempotency-Key", fmt.Sprintf("bulk-%d-%d", w, n))
				bulks <- outcome{status: r.status, deltas: deltas, err: err}
			}
		}()
	}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 25 {
				var items []any
				for _, j := range rand.Perm(nSKU)[:1+rand.IntN(3)] {
					items = append(items, line(skus[j], 1+rand.IntN(3)))
				}
				r, err := e.sendRetryingBusy("POST", "/v1/reservations", e.shop, map[string]any{"items": items},
					"Idempotency-Key", fmt.Sprintf("hold-%d-%d", w, n))
				if err != nil {
					errs <- err
					continue
				}
				holdStatuses <- r.status
				if r.status != 201 {
					continue
				}
				var held struct{ ID string }
				if err := json.Unmarshal(r.body, &held); err != nil {
					errs <- err
					continue
				}
				id := held.ID
				action := []string{"confirm", "release"}[rand.IntN(2)]
				fin, err := e.sendRetryingBusy("POST", fmt.Sprintf("/v1/reservations/%s/%s", id, action), e.shop, nil)
				if err != nil {
					errs <- err
				} else if fin.status != 200 {
					errs <- fmt.Errorf("%s answered %d: %s", action, fin.status, fin.body)
				}
			}
		}()
	}
	wg.Wait()
	close(bulks)
	close(holdStatuses)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for s := range holdStatuses {
		require.Contains(t, []int{201, 409}, s, "a hold is held or refused for stock")
	}
	want := map[string]int{}
	for _, s := range skus {
		want[s] = start
	}
	applied := 0
	for b := range bulks {
		require.NoError(t, b.err)
		require.Contains(t, []int{200, 409}, b.status, "a bulk adjustment applies or is refused for stock")
		if b.status == 200 {
			applied++
			for s, d := range b.deltas {
				want[s] += d
			}
		}
	}
	require.Positive(t, applied)
	t.Logf("%d of 45 bulk adjustments applied", applied)
	for _, s := range skus {
		total := pools(t, e.do("GET", "/v1/skus/"+s, e.shop, nil).json(t))["main"]["total"]
		require.EqualValues(t, want[s], total, "%s: the start plus the deltas of the applied adjustments", s)
	}
	var ledgerRows int
	require.NoError(t, e.pool.QueryRow(t.Context(),
		`SELECT count(*) FROM ledger WHERE kind IN ('stock_in', 'adjust') AND actor = 'alice'`).Scan(&ledgerRows))
	require.Equal(t, nSKU+applied*nSKU, ledgerRows, "one ledger row per line of each applied adjustment")
}

// TestLedgerPaging walks a SKU's ledger back with before_id while new
// movements arrive: every movement is seen once, newest first.
func TestLedgerPaging(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for range 23 {
		e.stockIn("L1", 1)
	}
	e.stockIn("L2", 1) // another SKU's movements are not in the pages
	var seen []float64
	path := "/v1/skus/L1/ledger?limit=10"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		page := e.do("GET", path, e.ops, nil)
		require.Equal(t, 200, page.status, "%s", page.body)
		body := page.json(t)
		for _, m := range body["movements"].([]any) {
			seen = append(seen, m.(map[string]any)["id"].(float64))
			require.Equal(t, "L1", m.(map[string]any)["sku"])
		}
		next, ok := body["next_cursor"]
		require.True(t, ok, "next_cursor is always there")
		require.Equal(t, next == nil, body["next_before_id"] == nil, "the deprecated name says the same")
		if next == nil {
			break
		}
		require.Len(t, body["movements"], 10)
		require.Equal(t, fmt.Sprintf("%.0f", seen[len(seen)-1]), next, "the next page starts before the last movement seen")
		require.Equal(t, next, fmt.Sprintf("%.0f", body["next_before_id"]), "the deprecated next_before_id is next_cursor as a number")
		e.stockIn("L1", 1) // newer movements do not shift older pages
		path = "/v1/skus/L1/ledger?limit=10&cursor=" + next.(string)
	}
	require.Len(t, seen, 23)
	for i := 1; i < len(seen); i++ {
		require.Less(t, seen[i], seen[i-1], "newest first, each once")
	}
	last := e.do("GET", fmt.Sprintf("/v1/skus/L1/ledger?before_id=%.0f", seen[len(seen)-1]), e.ops, nil).json(t)
	require.Empty(t, last["movements"])
	require.Nil(t, last["next_before_id"])
	require.Nil(t, last["next_cursor"])

	requireProblem(t, e.do("GET", "/v1/skus/L1/ledger?before_id=0", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/skus/L1/ledger?before_id=x", e.ops, nil), 400, "invalid_request")
	requireProblem(t, e.do("GET", "/v1/skus/L1/ledger?limit=1001", e.ops, nil), 422, "invalid_request")
}

// TestSKUsOverHTTP reads the catalogue in pages and as a batch (the
// catalogue's own walk is TestCatalogue's): a shop key may, each SKU is
// its stock view, and a batch lists the unknown SKUs as missing.
func TestSKUsOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	e.stockIn("B2", 3)
	r := e.do("PUT", "/v1/skus/B2/threshold", e.ops, map[string]any{"threshold": 5})
	require.Equal(t, 200, r.status, "%s", r.body)

	page := e.do("GET", "/v1/skus?limit=1", e.shop, nil)
	require.Equal(t, 200, page.status, "%s", page.body)
	body := page.json(t)
	require.Equal(t, "A1", body["next_cursor"])
	require.NotContains(t, body, "missing", "only a batch lists missing SKUs")
	one := body["skus"].([]any)[0]
	view := e.do("GET", "/v1/skus/A1", e.shop, nil).json(t)
	require.Equal(t, view, one, "each SKU is its stock view")

	low := e.do("GET", "/v1/skus?low_stock=true", e.shop, nil).json(t)
	require.Len(t, low["skus"], 1)
	require.Equal(t, "B2", low["skus"].([]any)[0].(map[string]any)["sku"])
	require.Nil(t, low["next_cursor"])

	batch := e.do("GET", "/v1/skus?sku=B2&sku=NOPE&sku=A1", e.shop, nil)
	require.Equal(t, 200, batch.status, "%s", batch.body)
	body = batch.json(t)
	require.Len(t, body["skus"], 2)
	require.Equal(t, []any{"NOPE"}, body["missing"])
	require.Nil(t, body["next_cursor"])
	none := e.do("GET", "/v1/skus?sku=A1", e.shop, nil).json(t)
	require.Equal(t, []any{}, none["missing"], "a batch's missing is there when empty")
}
