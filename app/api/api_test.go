package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/jobs"
)

// quiet drops logs; a failing test says what went wrong itself.
var quiet = slog.New(slog.DiscardHandler)

// env is a running API on its own database, with a shop and an ops key.
type env struct {
	t      testing.TB
	url    string
	pool   *pgxpool.Pool
	inv    *inventory.Service
	alerts *alerts.Service
	rec    *reconcile.Service
	camps  *campaigns.Service
	shop   string
	ops    string
	client *http.Client
	// handler is the API itself, for benchmarks that skip the network.
	handler http.Handler
}

type setupOpts struct {
	coalesce bool
}

func setup(t testing.TB, opts *setupOpts) *env {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{}
	}
	ctx := context.Background()
	pool := dbtest.NewWithConfig(t, func(c *pgxpool.Config) { c.MaxConns = 40 })
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.NewServices(config.DefaultsWith(func(c *config.Config) { c.Coalesce = opts.coalesce }), pool, inserter, quiet)
	handler := api.New(api.Deps{
		Events: events.NewFeed(pool), Inventory: deps.Inventory, Reconcile: deps.Reconcile, Alerts: deps.Alerts,
		Rollbacks: deps.Rollbacks, Campaigns: deps.Campaigns, Webhooks: deps.Webhooks, Reports: deps.Reports, Auth: auth.NewAuthenticator(pool, time.Minute),
		Ready: func(context.Context) error { return nil },
		Log:   quiet,
		// The plain path under -race with 1,000 clients on one row takes
		// longer than the 10 s default.
		RequestTimeout: 30 * time.Second,
	})
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	shop, err := auth.Create(ctx, pool, "shop-a", auth.RoleShop)
	require.NoError(t, err)
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	e := &env{t: t, url: srv.URL, pool: pool, inv: deps.Inventory, alerts: deps.Alerts, rec: deps.Reconcile, camps: deps.Campaigns, shop: shop, ops: ops, handler: handler,
		client: &http.Client{Transport: apitest.Transport(t, &http.Transport{MaxIdleConnsPerHost: 200, MaxConnsPerHost: 200})}}
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// do sends a request; body may be a string (sent as is) or a value (sent
// as JSON), with Content-Type application/json; headers are pairs (a
// Content-Type given empty sends the body with none).
func (e *env) do(method, path, token string, body any, headers ...string) resp {
	e.t.Helper()
	r, err := e.send(method, path, token, body, headers...)
	require.NoError(e.t, err)
	return r
}

// send is do for goroutines: it returns errors instead of failing.
func (e *env) send(method, path, token string, body any, headers ...string) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		return resp{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Content-Type" && headers[i+1] == "" {
			req.Header.Del("Content-Type") // a body sent with no type
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}, err
}

// sendRetryingBusy is send for a client that retries, with the same
// Idempotency-Key, when a request is turned away with 503 (busy: a lock
// wait ran out under contention; unavailable or timeout: a machine too busy
// to answer in time), as the API asks clients to. It retries at once: the
// retry itself waits on the lock or the pool, up to their timeouts.
func (e *env) sendRetryingBusy(method, path, token string, body any, headers ...string) (resp, error) {
	for attempt := 1; ; attempt++ {
		r, err := e.send(method, path, token, body, headers...)
		if err != nil || r.status != http.StatusServiceUnavailable || attempt == 50 {
			return r, err
		}
		// busy, unavailable or timeout: the contract's answer to retry
		// with the same key (a busy machine gives all three).
	}
}

func (e *env) stockIn(sku string, n int) {
	e.t.Helper()
	r := e.do("POST", "/v1/skus/"+sku+"/adjustments", e.ops, map[string]any{"delta": n, "reason": "restock"},
		"Idempotency-Key", fmt.Sprintf("in-%s-%d-%d", sku, n, time.Now().UnixNano()))
	require.Equal(e.t, 200, r.status, "%s", r.body)
}

func (e *env) hold(key string, items ...any) resp {
	e.t.Helper()
	return e.do("POST", "/v1/reservations", e.shop, map[string]any{"order_ref": "o-" + key, "items": items}, "Idempotency-Key", key)
}

// sendHold is hold for goroutines: it returns errors instead of failing.
func (e *env) sendHold(key string, items ...any) (resp, error) {
	return e.send("POST", "/v1/reservations", e.shop, map[string]any{"order_ref": "o-" + key, "items": items}, "Idempotency-Key", key)
}

func line(sku string, q int) map[string]any { return map[string]any{"sku": sku, "quantity": q} }

// counts is what bad input must leave untouched.
func (e *env) counts() string {
	e.t.Helper()
	var s string
	err := e.pool.QueryRow(context.Background(), `
		SELECT format('reservations=%s lines=%s ledger=%s stock=%s jobs=%s keys=%s',
			(SELECT count(*) FROM reservations), (SELECT count(*) FROM reservation_lines),
			(SELECT count(*) FROM ledger), (SELECT coalesce(sum(available * 7 + reserved * 3 + sold), 0) FROM stock),
			(SELECT count(*) FROM river_job), (SELECT count(*) FROM idempotency_keys))`).Scan(&s)
	require.NoError(e.t, err)
	return s
}

func requireProblem(t testing.TB, r resp, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	p := r.json(t)
	require.Equal(t, code, p["code"], "body: %s", r.body)
	require.Equal(t, "/problems/"+code, p["type"])
	require.EqualValues(t, status, p["status"])
	require.NotEmpty(t, p["title"])
	require.NotEmpty(t, p["detail"])
	return p
}
