package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedAuthRateLimited: a client IP that fails to authenticate more
// than its budget gets 429 problem+json with Retry-After, before its key is
// looked up, on API routes and the dashboard alike.
func TestFailedAuthRateLimited(t *testing.T) {
	t.Parallel()
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_AUTH_FAILURES_PER_MINUTE": "3"}})
	for range 3 {
		a := in.must("GET", "/v1/skus/A1", "sh_guess", "")
		require.Equal(t, http.StatusUnauthorized, a.status)
	}
	for _, a := range []answer{
		in.must("GET", "/v1/skus/A1", "sh_guess", ""),
		in.must("GET", "/v1/skus/A1", in.shop, ""),
		in.must("GET", "/ops/jobs/", "", "", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("a:sh_guess"))),
	} {
		require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
		require.Equal(t, "too_many_requests", a.problem(t)["code"])
		wait, err := strconv.Atoi(a.header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, wait)
	}
	// No token at all is not a guess: it is told to authenticate.
	a := in.must("GET", "/v1/skus/A1", "", "")
	require.Equal(t, http.StatusUnauthorized, a.status)
}

// TestFailedAuthLimitCoversEveryDoor: the console's sign-in form, bearer
// and Basic auth on /ops/ spend the same budget per client as the API's
// bearer token, so a guesser cannot spread its guesses over the doors:
// once over it, each answers 429 with Retry-After, a valid key included,
// before any key is looked up.
func TestFailedAuthLimitCoversEveryDoor(t *testing.T) {
	t.Parallel()
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_AUTH_FAILURES_PER_MINUTE": "4"}})
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, form url.Values, set func(*http.Request)) (int, http.Header, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, in.base+path, body)
		require.NoError(t, err)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", in.base)
		}
		if set != nil {
			set(req)
		}
		res, err := browser.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, res.Header, string(b)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	signIn := func(key string) (int, http.Header, string) {
		_, _, page := send("GET", "/ops/signin", nil, nil)
		m := csrf.FindStringSubmatch(page)
		require.NotNil(t, m, page)
		return send("POST", "/ops/signin", url.Values{"csrf": {m[1]}, "key": {key}}, nil)
	}
	bearer := func(key string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
	}
	basic := func(key string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth("x", key) } }

	// One wrong key at each door: four failures, the whole budget.
	status, _, _ := signIn("sh_guess-1")
	require.Equal(t, http.StatusUnauthorized, status)
	status, _, _ = send("GET", "/ops/", nil, bearer("sh_guess-2"))
	require.Equal(t, http.StatusUnauthorized, status)
	status, _, _ = send("GET", "/ops/skus", nil, basic("sh_guess-3"))
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, http.StatusUnauthorized, in.must("GET", "/v1/skus/A1", "sh_guess-4", "").status)

	// Over it: every door answers 429, even to the right key.
	for name, try := range map[string]func() (int, http.Header, string){
		"sign-in":           func() (int, http.Header, string) { return signIn("sh_guess-5") },
		"sign-in right key": func() (int, http.Header, string) { return signIn(in.ops) },
		"bearer":            func() (int, http.Header, string) { return send("GET", "/ops/", nil, bearer("sh_guess-6")) },
		"basic right key":   func() (int, http.Header, string) { return send("GET", "/ops/alerts", nil, basic(in.ops)) },
	} {
		status, header, body := try()
		require.Equal(t, http.StatusTooManyRequests, status, "%s: %s", name, body)
		wait, err := strconv.Atoi(header.Get("Retry-After"))
		require.NoError(t, err, name)
		require.Positive(t, wait, name)
		require.Contains(t, body, "Too many failed sign-ins", name)
	}
	a := in.must("GET", "/v1/skus/A1", in.shop, "")
	require.Equal(t, http.StatusTooManyRequests, a.status, "the API shares the budget: %s", a.body)
}

// TestClientGoneIsNotAnError: a request whose client hangs up while it
// waits (here for a locked row) is logged and counted as 499, not as a 500.
func TestClientGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_DB_LOCK_TIMEOUT": "5s"}})
	ctx := context.Background()
	in.stockIn("A1", 10)
	dba, err := in.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = dba.Rollback(ctx) }()
	_, err = dba.Exec(ctx, `SELECT * FROM stock WHERE sku = 'A1' FOR UPDATE`)
	require.NoError(t, err)

	// A client that sends a hold, then hangs up while the hold waits.
	conn, err := net.Dial("tcp", in.addr)
	require.NoError(t, err)
	defer conn.Close()
	body := `{"items": [{"sku": "A1", "quantity": 1}]}`
	_, err = fmt.Fprintf(conn, "POST /v1/reservations HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Idempotency-Key: gone\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		in.addr, in.shop, len(body), body)
	require.NoError(t, err)
	// Hang up only once the hold's batch waits for the row: the server has it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting int
		assert.NoError(c, in.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%StockLockMany%'`).Scan(&waiting))
		assert.Positive(c, waiting)
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, conn.Close())

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := in.do("GET", "/metrics", "", "")
		assert.NoError(c, err)
		assert.Contains(c, string(m.body), `stockhold_http_request_duration_seconds_count{method="POST",route="/v1/reservations",status="499"}`)
	}, 10*time.Second, 50*time.Millisecond)
	for _, l := range in.logs.lines(t, slog.LevelError) {
		require.NotEqual(t, "request failed", l["msg"], "%v", l)
	}
	require.NoError(t, dba.Rollback(ctx))
}
