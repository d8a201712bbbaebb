package api_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBadInputChangesNothing sends every kind of bad request we could think
// of and requires a 4xx problem+json answer that changed nothing.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	id := e.hold("seed", line("A1", 1)).json(t)["id"].(string)

	items := func(qty string) string { return `{"items":[{"sku":"A1","quantity":` + qty + `}]}` }
	manyLines := make([]string, 101)
	for i := range manyLines {
		manyLines[i] = `{"sku":"A1","quantity":1}`
	}
	huge := `{"items":[{"sku":"A1","quantity":1}],"order_ref":"` + strings.Repeat("x", 70_000) + `"}`

	type req struct {
		name, method, path, token, body string
		headers                         []string
		status                          int
		code                            string
	}
	key := []string{"Idempotency-Key", "bad-1"}
	cases := []req{
		{"malformed JSON", "POST", "/v1/reservations", e.shop, `{"items": [`, key, 400, "invalid_request"},
		{"not JSON", "POST", "/v1/reservations", e.shop, `hello`, key, 400, "invalid_request"},
		{"array body", "POST", "/v1/reservations", e.shop, `[]`, key, 400, "invalid_request"},
		{"empty body", "POST", "/v1/reservations", e.shop, ``, key, 400, "invalid_request"},
		{"trailing data", "POST", "/v1/reservations", e.shop, items("1") + ` {}`, key, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1}],"price":3}`, key, 400, "invalid_request"},
		{"unknown item field", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1,"qty":2}]}`, key, 400, "invalid_request"},
		{"zero quantity", "POST", "/v1/reservations", e.shop, items("0"), key, 422, "invalid_request"},
		{"negative quantity", "POST", "/v1/reservations", e.shop, items("-1"), key, 422, "invalid_request"},
		{"fractional quantity", "POST", "/v1/reservations", e.shop, items("1.5"), key, 400, "invalid_request"},
		{"string quantity", "POST", "/v1/reservations", e.shop, items(`"2"`), key, 400, "invalid_request"},
		{"huge quantity", "POST", "/v1/reservations", e.shop, items("1e30"), key, 400, "invalid_request"},
		{"over the line limit", "POST", "/v1/reservations", e.shop, items("1000001"), key, 422, "invalid_request"},
		{"int64 overflow", "POST", "/v1/reservations", e.shop, items("9223372036854775808"), key, 400, "invalid_request"},
		{"null quantity", "POST", "/v1/reservations", e.shop, items("null"), key, 422, "invalid_request"},
		{"no items", "POST", "/v1/reservations", e.shop, `{"items":[]}`, key, 422, "invalid_request"},
		{"items missing", "POST", "/v1/reservations", e.shop, `{"order_ref":"x"}`, key, 422, "invalid_request"},
		{"101 lines", "POST", "/v1/reservations", e.shop, `{"items":[` + strings.Join(manyLines, ",") + `]}`, key, 422, "invalid_request"},
		{"empty sku", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"","quantity":1}]}`, key, 422, "invalid_request"},
		{"over-long sku", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"` + strings.Repeat("S", 65) + `","quantity":1}]}`, key, 422, "invalid_request"},
		{"control character sku", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A\u0001","quantity":1}]}`, key, 422, "invalid_request"},
		{"newline sku", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A\n1","quantity":1}]}`, key, 422, "invalid_request"},
		{"zero ttl", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1}],"ttl_seconds":0}`, key, 422, "invalid_request"},
		{"ttl over a week", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1}],"ttl_seconds":604801}`, key, 422, "invalid_request"},
		{"empty campaign", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1}],"campaign":""}`, key, 422, "invalid_request"},
		{"control character order_ref", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1}],"order_ref":"a\u0007"}`, key, 422, "invalid_request"},
		{"oversized body", "POST", "/v1/reservations", e.shop, huge, key, 413, "body_too_large"},
		{"case variant of a key", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1,"Quantity":5}]}`, key, 400, "invalid_request"},
		{"key in upper case", "POST", "/v1/reservations", e.shop, `{"ITEMS":[{"sku":"A1","quantity":1}]}`, key, 400, "invalid_request"},
		{"items twice", "POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1","quantity":1}],"items":[{"sku":"A1","quantity":5}]}`, key, 400, "invalid_request"},
		{"adjustment delta twice", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":1,"delta":100,"reason":"x"}`, key, 400, "invalid_request"},
		{"form body", "POST", "/v1/reservations", e.shop, items("1"), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, key...), 415, "unsupported_media_type"},
		{"text body", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":1}`, append([]string{"Content-Type", "text/plain"}, key...), 415, "unsupported_media_type"},
		{"body without a type", "POST", "/v1/reservations/" + id + "/release", e.shop, `{"reason":"x"}`, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"missing idempotency key", "POST", "/v1/reservations", e.shop, items("1"), nil, 400, "idempotency_key_missing"},
		{"empty idempotency key", "POST", "/v1/reservations", e.shop, items("1"), []string{"Idempotency-Key", ""}, 400, "idempotency_key_invalid"},
		{"over-long idempotency key", "POST", "/v1/reservations", e.shop, items("1"), []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "idempotency_key_invalid"},
		{"non-ASCII idempotency key", "POST", "/v1/reservations", e.shop, items("1"), []string{"Idempotency-Key", "clé"}, 400, "idempotency_key_invalid"},
		{"no token", "POST", "/v1/reservations", "", items("1"), key, 401, "unauthorized"},
		{"unknown token", "POST", "/v1/reservations", "sh_nope", items("1"), key, 401, "unauthorized"},
		{"bad uuid", "GET", "/v1/reservations/not-a-uuid", e.shop, ``, nil, 400, "invalid_request"},
		{"bad uuid confirm", "POST", "/v1/reservations/1234/confirm", e.shop, ``, nil, 400, "invalid_request"},
		{"bad uuid release", "POST", "/v1/reservations/" + id + "x/release", e.shop, ``, nil, 400, "invalid_request"},
		{"unknown reservation", "POST", "/v1/reservations/6f1d3c3e-0000-4000-8000-000000000000/confirm", e.shop, ``, nil, 404, "not_found"},
		{"release with unknown field", "POST", "/v1/reservations/" + id + "/release", e.shop, `{"why":"x"}`, nil, 400, "invalid_request"},
		{"release with a long reason", "POST", "/v1/reservations/" + id + "/release", e.shop, `{"reason":"` + strings.Repeat("r", 501) + `"}`, nil, 422, "invalid_request"},
		{"confirm with a body", "POST", "/v1/reservations/" + id + "/confirm", e.shop, `{"paid":true}`, nil, 400, "invalid_request"},
		{"adjust by shop", "POST", "/v1/skus/A1/adjustments", e.shop, `{"delta":5}`, key, 403, "forbidden"},
		{"adjust zero", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":0}`, key, 422, "invalid_request"},
		{"adjust string", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":"5"}`, key, 400, "invalid_request"},
		{"adjust too much", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":1000000001}`, key, 422, "invalid_request"},
		{"adjust below available", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":-10,"reason":"x"}`, key, 409, "insufficient_available"},
		{"adjust unknown sku down", "POST", "/v1/skus/ZZ/adjustments", e.ops, `{"delta":-1,"reason":"x"}`, key, 404, "unknown_sku"},
		{"adjust without key", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":1}`, nil, 400, "idempotency_key_missing"},
		{"adjust control sku", "POST", "/v1/skus/A%01/adjustments", e.ops, `{"delta":1}`, key, 422, "invalid_request"},
		{"adjust slash sku", "POST", "/v1/skus/A%2F1/adjustments", e.ops, `{"delta":1}`, key, 422, "invalid_request"},
		{"adjust long sku", "POST", "/v1/skus/" + strings.Repeat("S", 65) + "/adjustments", e.ops, `{"delta":1}`, key, 422, "invalid_request"},
		{"adjust bad pool", "POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":1,"pool":"a/b"}`, key, 422, "invalid_request"},
		{"pause without reason", "POST", "/v1/skus/A1/pause", e.ops, `{"pool":"main"}`, nil, 422, "invalid_request"},
		{"pause unknown pool", "POST", "/v1/skus/A1/pause", e.ops, `{"pool":"nope","reason":"x"}`, nil, 422, "unknown_pool"},
		{"pause by shop", "POST", "/v1/skus/A1/pause", e.shop, `{"reason":"x"}`, nil, 403, "forbidden"},
		{"unknown sku", "GET", "/v1/skus/NOPE", e.shop, ``, nil, 404, "unknown_sku"},
		{"ledger limit", "GET", "/v1/skus/A1/ledger?limit=0", e.ops, ``, nil, 422, "invalid_request"},
		{"ledger limit text", "GET", "/v1/skus/A1/ledger?limit=ten", e.ops, ``, nil, 400, "invalid_request"},
		{"ack with an empty operator", "POST", "/v1/alerts/1/ack", e.ops, `{"operator":""}`, nil, 422, "invalid_request"},
		{"end with an empty operator", "POST", "/v1/campaigns/c1/end", e.ops, `{"operator":""}`, nil, 422, "invalid_request"},
		{"resume with an empty operator", "POST", "/v1/rollbacks/1/resume", e.ops, `{"operator":""}`, nil, 422, "invalid_request"},
		{"reconcile no skus", "POST", "/v1/reconciliations", e.ops, `{"skus":[]}`, key, 422, "invalid_request"},
		{"rollback cutoff later than now", "POST", "/v1/rollbacks", e.ops,
			`{"operator":"alice","reason":"x","campaign":"c1","cutoff":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`, key, 422, "invalid_request"},
		{"rollback cutoff not a time", "POST", "/v1/rollbacks", e.ops, `{"operator":"alice","reason":"x","sku":"A1","cutoff":"tomorrow"}`, key, 400, "invalid_request"},
		{"unknown route", "GET", "/v1/nothing", e.shop, ``, nil, 404, "not_found"},
		{"wrong method", "DELETE", "/v1/reservations/" + id, e.shop, ``, nil, 405, "method_not_allowed"},
	}
	before := e.counts()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headers := slices.Clone(c.headers)
			if n := len(headers); n >= 2 && headers[n-2] == "Idempotency-Key" && headers[n-1] == "bad-1" {
				headers[n-1] = fmt.Sprint("bad-", i)
			}
			var body any
			if c.body != "" {
				body = c.body
			}
			r := e.do(c.method, c.path, c.token, body, headers...)
			requireProblem(t, r, c.status, c.code)
			require.Equal(t, before, e.counts(), "bad input changed nothing")
		})
	}
}

// TestRequestBodiesMustBeJSON: a body is read only when it says it is JSON
// (any parameters); what curl -d sends, or a body with no type, is 415
// naming what came. A request without a body needs no type.
func TestRequestBodiesMustBeJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	body := `{"items":[{"sku":"A1","quantity":1}]}`
	before := e.counts()

	r := e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", "form", "Content-Type", "application/x-www-form-urlencoded")
	p := requireProblem(t, r, 415, "unsupported_media_type")
	require.Contains(t, p["detail"], `"application/x-www-form-urlencoded"`)
	r = e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", "none", "Content-Type", "")
	p = requireProblem(t, r, 415, "unsupported_media_type")
	require.Contains(t, p["detail"], "no Content-Type")
	require.Equal(t, before, e.counts(), "a refused body changed nothing")

	r = e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", "charset", "Content-Type", "application/json; charset=utf-8")
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	r = e.do("POST", "/v1/reservations/"+id+"/release", e.shop, nil)
	require.Equal(t, 200, r.status, "a body-less release needs no Content-Type: %s", r.body)
	require.Equal(t, "released", r.json(t)["status"])
}

// TestLookAlikeNamesAreRefused is the five look-alike SKUs: LOOK1
// with a zero-width space and an A with a combining ring (not NFC) are
// refused with 422 and change nothing, so what is left are names that
// differ in what they show (a Cyrillic О is another letter).
func TestLookAlikeNamesAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for i, c := range []struct {
		sku    string
		status int
		detail string
	}{
		{"LOOK1", 200, ""},
		{"LOOK1\u200b", 422, "invisible format character (U+200B)"},
		{"L\u041e\u041eK1", 200, ""},
		{"\u00c51", 200, ""},
		{"A\u030a1", 422, `not in Unicode normalization form C (NFC): send "A\u030A1" as "\u00C51"`},
	} {
		r := e.do("POST", "/v1/skus/"+url.PathEscape(c.sku)+"/adjustments", e.ops, map[string]any{"delta": 5, "reason": "restock"},
			"Idempotency-Key", fmt.Sprint("look-", i))
		if c.status != 200 {
			p := requireProblem(t, r, c.status, "invalid_request")
			require.Contains(t, p["detail"], c.detail)
			continue
		}
		require.Equal(t, 200, r.status, "%q: %s", c.sku, r.body)
	}
	before := e.counts()
	for i, body := range []string{
		`{"items":[{"sku":"LOOK1\u200b","quantity":1}]}`,
		`{"items":[{"sku":"A\u030a1","quantity":1}]}`,
		`{"items":[{"sku":"LOOK1","quantity":1}],"order_ref":"o-1\u200b"}`,
		`{"items":[{"sku":"LOOK1","quantity":1}],"order_ref":"o\n1"}`,
		`{"items":[{"sku":"LOOK1","quantity":1}],"campaign":"bf\u2060"}`,
	} {
		requireProblem(t, e.do("POST", "/v1/reservations", e.shop, body, "Idempotency-Key", fmt.Sprint("hold-", i)), 422, "invalid_request")
	}
	requireProblem(t, e.do("POST", "/v1/stock/adjustments", e.ops,
		`{"reason":"count","lines":[{"sku":"LOOK1","delta":1},{"sku":"\ufeffLOOK1","delta":1}]}`, "Idempotency-Key", "bulk"), 422, "invalid_request")
	requireProblem(t, e.do("POST", "/v1/skus/LOOK1/adjustments", e.ops, `{"delta":1,"reason":"x","ref":"PO\u200d7"}`,
		"Idempotency-Key", "ref"), 422, "invalid_request")
	require.Equal(t, before, e.counts(), "refused names changed nothing")
	var skus int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(DISTINCT sku) FROM stock`).Scan(&skus))
	require.Equal(t, 3, skus)
}

// TestNULIsRefusedByName: PostgreSQL stores no NUL, in text or in jsonb,
// so a \u0000 anywhere in a body (a unit's attributes were a 500, 22P05)
// is 422 naming the field, and changes nothing; a NUL in a query or path
// parameter is refused by the name checks.
func TestNULIsRefusedByName(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.stockIn("A1", 10)
	id := e.hold("seed", line("A1", 1)).json(t)["id"].(string)
	require.Equal(t, 200, e.do("POST", "/v1/skus/SHOW/units", e.ops, `{"reason":"plan","units":[{"id":"A-1"}]}`, "Idempotency-Key", "plan").status)

	nul := `a\u0000b`
	cases := []struct{ method, path, token, body, field string }{
		{"POST", "/v1/skus/SHOW/units", e.ops, `{"reason":"plan","units":[{"id":"A-2","attributes":{"note":"` + nul + `"}}]}`, "units[0].attributes.note"},
		{"POST", "/v1/skus/SHOW/units", e.ops, `{"reason":"plan","units":[{"id":"A-2","attributes":{"` + nul + `":1}}]}`, "units[0].attributes.a\x00b"},
		{"POST", "/v1/skus/SHOW/units", e.ops, `{"reason":"` + nul + `","units":[{"id":"A-2"}]}`, "reason"},
		{"POST", "/v1/skus/SHOW/units/retire", e.ops, `{"reason":"x","units":["` + nul + `"]}`, "units[0]"},
		{"POST", "/v1/reservations", e.shop, `{"order_ref":"` + nul + `","items":[{"sku":"A1","quantity":1}]}`, "order_ref"},
		{"POST", "/v1/reservations", e.shop, `{"items":[{"sku":"A1\u0000","quantity":1}]}`, "items[0].sku"},
		{"POST", "/v1/reservations/" + id + "/release", e.shop, `{"reason":"` + nul + `"}`, "reason"},
		{"POST", "/v1/skus/A1/adjustments", e.ops, `{"delta":1,"reason":"x","ref":"` + nul + `"}`, "ref"},
		{"POST", "/v1/skus/A1/pause", e.ops, `{"reason":"` + nul + `"}`, "reason"},
		{"POST", "/v1/skus/A1/repair", e.ops, `{"to":"ledger","reason":"` + nul + `"}`, "reason"},
		{"PUT", "/v1/stop-sale", e.ops, `{"active":true,"reason":"` + nul + `"}`, "reason"},
		{"POST", "/v1/rollbacks", e.ops, `{"operator":"` + nul + `","reason":"x","sku":"A1"}`, "operator"},
		{"POST", "/v1/reconciliations", e.ops, `{"skus":["` + nul + `"]}`, "skus[0]"},
		{"POST", "/v1/alerts/1/ack", e.ops, `{"operator":"` + nul + `"}`, "operator"},
	}
	before := e.counts()
	for i, c := range cases {
		r := e.do(c.method, c.path, c.token, c.body, "Idempotency-Key", fmt.Sprint("nul-", i))
		p := requireProblem(t, r, 422, "invalid_request")
		require.Contains(t, p["detail"], c.field+" contains a NUL character", "%s %s", c.method, c.path)
		require.Equal(t, before, e.counts(), "%s %s changed something", c.method, c.path)
	}
	for _, path := range []string{"/v1/reservations?order_ref=a%00b", "/v1/reservations?sku=a%00b", "/v1/skus/a%00b", "/v1/skus/SHOW/units?cursor=a%00b",
		"/v1/skus/SHOW/units?group=a%00b"} {
		r := e.do("GET", path, e.ops, nil)
		require.True(t, r.status == 400 || r.status == 422, "%s: %d %s", path, r.status, r.body)
	}
}
