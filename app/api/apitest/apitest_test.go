package apitest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheck shows the validator catches each kind of mismatch (and passes
// what matches), so that the HTTP tests using it prove something.
func TestCheck(t *testing.T) {
	v, err := Load()
	require.NoError(t, err)
	problem := func(status int, code string) string {
		return `{"type":"/problems/` + code + `","title":"t","status":` + strconv.Itoa(status) + `,"detail":"d","code":"` + code + `"}`
	}
	stock := `{"sku":"A1","pools":[{"location":"default","pool":"main","total":1,"available":1,"reserved":0,"sold":0,"quality_control":0,"damaged":0,"safety_stock":0,"incoming":0,"short":0,"status":"on_sale","paused_reason":null,"updated_at":"2026-01-01T00:00:00Z"}]}`
	cases := []struct {
		name                string
		method, path, token string
		body                string
		status              int
		contentType, answer string
		want                string // "" means it matches
	}{
		{"matches", "GET", "/v1/skus/A1", "t", "", 200, "application/json", stock, ""},
		{"answer misses a field", "GET", "/v1/skus/A1", "t", "", 200, "application/json", `{"sku":"A1"}`, "does not match"},
		{"undocumented status", "GET", "/v1/skus/A1", "t", "", 418, "application/problem+json", problem(418, "invalid_request"), "does not match"},
		{"undocumented code", "GET", "/v1/skus/A1", "t", "", 404, "application/problem+json", problem(404, "out_of_stock"), "does not match"},
		{"code outside the enum", "GET", "/v1/skus/A1", "t", "", 404, "application/problem+json", problem(404, "nope"), "does not match"},
		{"refused bad input", "POST", "/v1/alerts/1/ack", "t", `{"operator":""}`, 422, "application/problem+json", problem(422, "invalid_request"), ""},
		{"accepted bad input", "POST", "/v1/alerts/1/ack", "t", `{"operator":""}`, 200, "application/json",
			`{"id":1,"level":"info","kind":"job_discarded","subject":"s","sku":null,"location":null,"pool":null,"details":{},"suggested_action":"a","status":"acked","first_seen_at":"2026-01-01T00:00:00Z","last_seen_at":"2026-01-01T00:00:00Z","occurrences":1,"acked_by":"","acked_key":null,"acked_at":"2026-01-01T00:00:00Z","resolved_at":null}`,
			"accepted a request its document forbids"},
		{"accepted without a token", "GET", "/v1/skus/A1", "", "", 200, "application/json", stock, "accepted a request its document forbids"},
		{"refused without a token", "GET", "/v1/skus/A1", "", "", 401, "application/problem+json", problem(401, "unauthorized"), ""},
		{"unknown route", "GET", "/v1/nothing", "t", "", 404, "application/problem+json", problem(404, "not_found"), ""},
		{"unknown route as text", "GET", "/v1/nothing", "t", "", 404, "text/plain", "404 page not found", "want application/problem+json"},
		{"unknown route answered", "GET", "/v1/nothing", "t", "", 200, "application/json", "{}", "yet answered 200"},
		{"console page", "GET", "/ops/skus", "", "", 200, "text/html", "<html>", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			err := v.Check(req, []byte(c.body), c.status, http.Header{"Content-Type": {c.contentType}}, []byte(c.answer))
			if c.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, c.want)
			}
		})
	}

	// A body the document takes only as application/json: sent as a form
	// (curl -d), it must be refused (415), not served.
	body := `{"operator":"alice"}`
	req := httptest.NewRequest("POST", "/v1/alerts/1/ack", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	require.ErrorContains(t, v.Check(req, []byte(body), 200, http.Header{"Content-Type": {"application/json"}},
		[]byte(strings.Replace(cases[6].answer, `"acked_by":""`, `"acked_by":"alice"`, 1))), "accepted a request its document forbids")
	require.NoError(t, v.Check(req, []byte(body), 415, http.Header{"Content-Type": {"application/problem+json"}},
		[]byte(problem(415, "unsupported_media_type"))))
}
