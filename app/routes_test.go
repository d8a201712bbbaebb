package app_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// oddSegments are path segments, as sent on the wire, that must never get
// a 5xx from any route: invalid UTF-8, NUL and other control characters,
// 400 characters, SQL, a bad escape (refused by net/http itself, answered
// as problem+json all the same), and numbers out of range.
var oddSegments = map[string]string{
	"invalid UTF-8":        "%FF",
	"overlong UTF-8":       "%C0%AF",
	"NUL":                  "%00",
	"control character":    "A%01",
	"400 characters":       strings.Repeat("x", 400),
	"SQL":                  url.PathEscape("'; DROP TABLE stock; --"),
	"SQL quote":            "A1'--",
	"bad escape":           "%ZZ",
	"escaped slash":        "..%2F..%2Fetc",
	"negative":             "-1",
	"beyond int64":         "99999999999999999999",
	"right-to-left mark":   "%E2%80%AE",
	"white space":          "%20A1",
	"percent-encoded dots": "%2E%2E",
}

var routeParam = regexp.MustCompile(`:[A-Za-z_]+|\*$`)

// TestEveryRouteOddPathParams sends every odd path parameter to every
// route the router has (so routes added later are covered too) and
// requires a 4xx problem+json, or a success, never a 5xx; and that none of
// it changed anything.
func TestEveryRouteOddPathParams(t *testing.T) {
	t.Parallel()
	in := start(t, nil)
	in.stockIn("A1", 5)
	counts := func() string {
		var s string
		require.NoError(t, in.pool.QueryRow(t.Context(), `
			SELECT format('%s/%s/%s/%s/%s', (SELECT count(*) FROM reservations), (SELECT count(*) FROM ledger),
				(SELECT count(*) FROM campaigns), (SELECT count(*) FROM rollback_requests), (SELECT sum(available) FROM stock))`).Scan(&s))
		return s
	}
	before := counts()

	tried := 0
	for _, r := range in.app.HTTP.Routes() {
		if strings.HasPrefix(r.Method, "echo_") || !routeParam.MatchString(r.Path) {
			continue
		}
		if strings.HasPrefix(r.Path, "/ops/jobs") {
			switch r.Method {
			case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			default:
				continue
			}
		}
		for name, seg := range oddSegments {
			path := routeParam.ReplaceAllString(r.Path, seg)
			body := ""
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				body = `{}`
			}
			req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: odd-%d\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
				r.Method, path, in.addr, in.ops, tried, len(body), body)
			a, err := in.raw(req)
			require.NoError(t, err, "%s %s (%s)", r.Method, r.Path, name)
			tried++
			require.Less(t, a.status, 500, "%s %s with %s: %d %s", r.Method, r.Path, name, a.status, a.body)
			// Pages under /ops/ (River's dashboard, the console) answer
			// their own way; only a path net/http cannot parse is ours.
			if a.status >= 400 && (!strings.HasPrefix(r.Path, "/ops") || seg == "%ZZ") {
				p := a.problem(t)
				require.EqualValues(t, a.status, p["status"])
			}
		}
	}
	require.Greater(t, tried, 100, "every route with a parameter was tried")
	require.Equal(t, before, counts(), "odd paths changed nothing")
}

// TestBadEscapeIsProblemJSON: a path net/http cannot parse is answered by
// net/http itself, before any handler; it is problem+json all the same.
func TestBadEscapeIsProblemJSON(t *testing.T) {
	t.Parallel()
	in := start(t, nil)
	for _, req := range []string{
		"GET /v1/skus/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/skus/A1 HTTP/1.1\r\n\r\n",                             // no Host
		"GET /v1/skus/A1 HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n", // malformed header
	} {
		a, err := in.raw(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, a.status, "%q", req)
		p := a.problem(t)
		require.Equal(t, "invalid_request", p["code"])
		require.NotEmpty(t, p["detail"])
	}
}
