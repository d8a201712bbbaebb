package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// logBuffer collects a test instance's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged records at level or above.
func (b *logBuffer) lines(t testing.TB, level slog.Level) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		var lv slog.Level
		require.NoError(t, lv.UnmarshalText([]byte(m["level"].(string))))
		if lv >= level {
			out = append(out, m)
		}
	}
	return out
}

// instance is a fully wired stockhold (pools, River, HTTP) serving on a
// loopback port, stopped when the test ends.
type instance struct {
	t    *testing.T
	app  *app.App
	pool *pgxpool.Pool
	base string
	addr string
	ops  string
	shop string
	logs *logBuffer
	http *http.Client
}

type instanceOpts struct {
	// env overrides configuration variables.
	env map[string]string
	// pool is the database to serve; nil means a fresh one.
	pool *pgxpool.Pool
}

// start serves a wired App with test-friendly shutdown settings.
func start(t *testing.T, opts *instanceOpts) *instance {
	t.Helper()
	if opts == nil {
		opts = &instanceOpts{}
	}
	env := map[string]string{
		"DATABASE_URL": "postgres://unused", "STOCKHOLD_DRAIN_DELAY": "0s",
		"STOCKHOLD_SHUTDOWN_TIMEOUT": "5s", "STOCKHOLD_JOB_STOP_TIMEOUT": "5s",
	}
	for k, v := range opts.env {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	pool := opts.pool
	if pool == nil {
		pool = dbtest.New(t)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.New(cfg, pool, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
	})
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err := auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)
	in := &instance{t: t, app: a, pool: pool, base: "http://" + ln.Addr().String(), addr: ln.Addr().String(),
		ops: ops, shop: shop, logs: logs,
		http: &http.Client{Transport: apitest.Transport(t, &http.Transport{MaxIdleConnsPerHost: 100}), Timeout: 30 * time.Second}}
	t.Cleanup(in.http.CloseIdleConnections)
	return in
}

type answer struct {
	status int
	header http.Header
	body   []byte
	// took is how long the answer took, for the test log.
	took time.Duration
}

func (a answer) problem(t testing.TB) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", a.header.Get("Content-Type"), "%d %s", a.status, a.body)
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.body, &m), "%s", a.body)
	return m
}

// do sends a request; body is sent as is; headers are pairs. It returns an
// error rather than failing, so goroutines can use it.
func (in *instance) do(method, path, token, body string, headers ...string) (answer, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, in.base+path, rd)
	if err != nil {
		return answer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	began := time.Now()
	res, err := in.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b, took: time.Since(began)}, err
}

// must is do on the test goroutine.
func (in *instance) must(method, path, token, body string, headers ...string) answer {
	in.t.Helper()
	a, err := in.do(method, path, token, body, headers...)
	require.NoError(in.t, err)
	return a
}

func (in *instance) stockIn(sku string, n int) {
	in.t.Helper()
	a := in.must("POST", "/v1/skus/"+sku+"/adjustments", in.ops, fmt.Sprintf(`{"delta": %d, "reason": "restock"}`, n),
		"Idempotency-Key", fmt.Sprintf("in-%s-%d", sku, time.Now().UnixNano()))
	require.Equal(in.t, 200, a.status, "%s", a.body)
}

func (in *instance) hold(key, sku string) (answer, error) {
	return in.do("POST", "/v1/reservations", in.shop, fmt.Sprintf(`{"items": [{"sku": %q, "quantity": 1}]}`, sku), "Idempotency-Key", key)
}

// raw sends request text as is on a new connection (so paths a client
// library would escape or refuse reach the server untouched) and reads
// one answer, which is checked against the OpenAPI document as the
// instance's client checks every other.
func (in *instance) raw(request string) (answer, error) {
	a, err := rawRequest(in.addr, request)
	if err != nil {
		return a, err
	}
	v, err := apitest.Load()
	if err != nil {
		return a, err
	}
	if err := v.CheckRaw([]byte(request), a.status, a.header, a.body); err != nil {
		line, _, _ := strings.Cut(request, "\r\n")
		in.t.Errorf("OpenAPI: %s -> %d: %v\n  answer: %s", line, a.status, err, a.body)
	}
	return a, nil
}

func rawRequest(addr, request string) (answer, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return answer{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		return answer{}, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b}, err
}
