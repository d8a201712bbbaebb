package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// TestServe runs the wired service, workers and all, and checks the routes
// that need the whole of it: health, readiness, metrics, the OpenAPI
// document and the job dashboard behind ops auth.
func TestServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.New(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://unused", "STOCKHOLD_ADDR": "127.0.0.1:0", "STOCKHOLD_DRAIN_DELAY": "0s"}[k]
	})
	require.NoError(t, err)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
	})
	base := "http://" + ln.Addr().String()
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err := auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)

	get := func(path string, set func(*http.Request)) (int, string, http.Header) {
		req, err := http.NewRequest("GET", base+path, nil)
		require.NoError(t, err)
		if set != nil {
			set(req)
		}
		res, err := (&http.Client{Transport: apitest.Transport(t, nil)}).Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b), res.Header
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := http.Get(base + "/healthz")
		if assert.NoError(c, err) {
			res.Body.Close()
			assert.Equal(c, 200, res.StatusCode)
		}
	}, 5*time.Second, 20*time.Millisecond)
	status, body, _ := get("/readyz", nil)
	require.Equal(t, 200, status, body)
	status, body, _ = get("/metrics", nil)
	require.Equal(t, 200, status)
	require.Contains(t, body, "stockhold_http_request_duration_seconds")
	status, body, _ = get("/openapi.json", nil)
	require.Equal(t, 200, status)
	require.Contains(t, body, `"openapi"`)

	status, _, hdr := get("/ops/jobs/", nil)
	require.Equal(t, 401, status)
	require.Contains(t, hdr.Get("WWW-Authenticate"), "Basic")
	status, _, _ = get("/ops/jobs/", func(r *http.Request) { r.SetBasicAuth("alice", shop) })
	require.Equal(t, 403, status, "a shop key does not open the dashboard")
	status, body, _ = get("/ops/jobs/", func(r *http.Request) { r.SetBasicAuth("alice", ops) })
	require.Equal(t, 200, status)
	require.Contains(t, strings.ToLower(body), "<html", "the dashboard page")
	status, body, _ = get("/ops/jobs/api/jobs?state=available", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+ops) })
	require.Equal(t, 200, status, body)
}

// TestProfiler serves Go's profiler on STOCKHOLD_PPROF_ADDR only: never on
// the API's address, and not at all unless asked for.
func TestProfiler(t *testing.T) {
	t.Parallel()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := free.Addr().String()
	require.NoError(t, free.Close())
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_PPROF_ADDR": addr}})

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if !assert.NoError(c, err) {
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, res.StatusCode)
		assert.Contains(c, string(b), "goroutine profile:")
	}, 5*time.Second, 50*time.Millisecond)

	a := in.must("GET", "/debug/pprof/", "", "")
	require.Equal(t, http.StatusNotFound, a.status, "the API does not serve the profiler")

	plain := start(t, nil)
	a = plain.must("GET", "/debug/pprof/", "", "")
	require.Equal(t, http.StatusNotFound, a.status)
	require.Empty(t, plain.app.Config.PprofAddr)
}

// TestReadyAcrossAnUpgrade checks /readyz while a new version rolls out:
// an instance whose schema is behind its binary is not ready, and one whose
// schema is ahead (a newer version migrated first) keeps serving.
func TestReadyAcrossAnUpgrade(t *testing.T) {
	t.Parallel()
	in := start(t, nil)
	ctx := context.Background()
	ready := func() (int, string) {
		a, err := in.do("GET", "/readyz", "", "")
		require.NoError(t, err)
		return a.status, string(a.body)
	}
	status, body := ready()
	require.Equal(t, http.StatusOK, status, body)

	// A newer version's migration applied: still ready.
	_, err := in.pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`)
	require.NoError(t, err)
	status, body = ready()
	require.Equal(t, http.StatusOK, status, body)

	// This binary's newest migration missing: not ready, and it says why.
	_, err = in.pool.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id >= (
		SELECT max(version_id) FROM goose_db_version WHERE version_id < 99999)`)
	require.NoError(t, err)
	status, body = ready()
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, "schema not current")
}
