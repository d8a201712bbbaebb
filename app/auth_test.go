package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
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
