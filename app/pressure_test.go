package app_test

import (
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestLockedRowAnswersBusy holds one stock row locked from another session,
// as a DBA's SELECT ... FOR UPDATE left open would. Requests that need the
// row answer 503 busy with Retry-After, from the lock timeout (250 ms), not
// the request timeout; holds of other SKUs and /readyz go on answering, and
// once the lock goes the row takes holds again.
//
// /readyz gets a minute for its database check rather than the default 2 s,
// so that what decides its answer is the condition under test, not the
// machine's speed: a check that waited on the locked row, or on a
// connection the locked requests took, would wait until the lock goes
// (after every answer is in) and answer 503; one that does not answers 200
// whenever the database does, however busy the machine.
func TestLockedRowAnswersBusy(t *testing.T) {
	t.Parallel()
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_READY_TIMEOUT": "1m"}})
	ctx := context.Background()
	in.stockIn("A1", 100)
	in.stockIn("B1", 100)
	held, err := in.hold("before-lock", "A1")
	require.NoError(t, err)
	require.Equal(t, 201, held.status, "%s", held.body)
	id := held.problemless(t)["id"].(string)

	dba, err := in.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = dba.Rollback(ctx) }()
	_, err = dba.Exec(ctx, `SELECT * FROM stock WHERE sku = 'A1' FOR UPDATE`)
	require.NoError(t, err)

	type result struct {
		what string
		a    answer
		err  error
	}
	results := make(chan result, 100)
	var wg sync.WaitGroup
	send := func(what string, f func() (answer, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := f()
			results <- result{what, a, err}
		}()
	}
	for i := range 15 {
		send("hold A1", func() (answer, error) { return in.hold(fmt.Sprintf("locked-%d", i), "A1") })
		send("hold B1", func() (answer, error) { return in.hold(fmt.Sprintf("free-%d", i), "B1") })
		send("readyz", func() (answer, error) { return in.do("GET", "/readyz", "", "") })
	}
	send("confirm A1", func() (answer, error) { return in.do("POST", "/v1/reservations/"+id+"/confirm", in.shop, "") })
	wg.Wait()
	close(results)

	slowest := map[string]time.Duration{}
	for r := range results {
		require.NoError(t, r.err, r.what)
		slowest[r.what] = max(slowest[r.what], r.a.took)
		switch r.what {
		case "hold A1", "confirm A1":
			require.Equal(t, http.StatusServiceUnavailable, r.a.status, "%s: %s", r.what, r.a.body)
			require.Equal(t, "busy", r.a.problem(t)["code"], r.what)
			require.Equal(t, "1", r.a.header.Get("Retry-After"))
		case "hold B1":
			require.Equal(t, http.StatusCreated, r.a.status, "%s: %s", r.what, r.a.body)
		case "readyz":
			require.Equal(t, http.StatusOK, r.a.status, "%s", r.a.body)
		}
	}
	t.Logf("slowest answers while A1 was locked: %v", slowest)

	require.NoError(t, dba.Rollback(ctx))
	again, err := in.hold("after-lock", "A1")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, again.status, "%s", again.body)
	dbtest.RequireInvariants(t, in.pool)
}

func (a answer) problemless(t testing.TB) map[string]any {
	t.Helper()
	require.Equal(t, "application/json", strings.Split(a.header.Get("Content-Type"), ";")[0], "%s", a.body)
	m := map[string]any{}
	require.NoError(t, json.Unmarshal(a.body, &m), "%s", a.body)
	return m
}

// proxy forwards TCP connections to PostgreSQL until cut, as a network
// path to the database would until it failed.
type proxy struct {
	t      *testing.T
	target func() (net.Conn, error)
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newProxy(t *testing.T, target func() (net.Conn, error)) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	up, err := p.target()
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut refuses new connections and drops the open ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the same address.
func (p *proxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(ln)
}

// TestDatabaseUnreachable serves through a proxy to PostgreSQL and cuts it.
// Requests answer 503 unavailable with Retry-After (not 500), the log gets
// a line per interval rather than per request, /readyz says only that the
// database is unreachable, and when the path comes back so does service.
func TestDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	var p *proxy
	pool := dbtest.NewWithConfig(t, func(c *pgxpool.Config) {
		target := c.ConnConfig.Config
		dial := func() (net.Conn, error) {
			if strings.HasPrefix(target.Host, "/") {
				return net.Dial("unix", fmt.Sprintf("%s/.s.PGSQL.%d", target.Host, target.Port))
			}
			return net.Dial("tcp", net.JoinHostPort(target.Host, fmt.Sprint(target.Port)))
		}
		p = newProxy(t, dial)
		host, port, _ := net.SplitHostPort(p.addr)
		c.ConnConfig.Host = host
		_, _ = fmt.Sscan(port, &c.ConnConfig.Port)
		c.ConnConfig.Fallbacks = nil
	})
	in := start(t, &instanceOpts{pool: pool})
	in.stockIn("A1", 1000)

	p.cut()
	const requests = 300
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests / 10 {
				a, err := in.hold(fmt.Sprintf("down-%d-%d", w, i), "A1")
				switch {
				case err != nil:
					errs <- err
				case a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), `"code":"unavailable"`) ||
					a.header.Get("Retry-After") == "":
					errs <- fmt.Errorf("%d %s (Retry-After %q)", a.status, a.body, a.header.Get("Retry-After"))
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a hold while the database is unreachable")
	}

	ready := in.must("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, ready.status)
	require.Equal(t, "database unreachable", ready.problem(t)["detail"], "a short reason, no error text")
	require.NotContains(t, string(ready.body), "127.0.0.1")

	// The throttle logs the first refusal and then at most one line per
	// interval (10 s), each with the count since the line before: on a
	// loaded machine the 300 holds may span several intervals, so the bound
	// is by the time they took, and the counts must add up to every hold.
	httpLines, counted := 0, 0.0
	for _, l := range in.logs.lines(t, slog.LevelWarn) {
		if l["msg"] == "request failed" {
			t.Errorf("a request was logged as a failure (500): %v", l)
		}
		if l["msg"] == "requests refused under pressure (logged once per interval)" && l["code"] == "unavailable" {
			httpLines++
			counted += l["count"].(float64)
		}
	}
	require.Positive(t, httpLines, "the outage is logged")
	bound := 1 + int(took/(10*time.Second))
	require.LessOrEqual(t, httpLines, bound, "%d refused requests in %s are not %d log lines", requests, took, httpLines)
	require.LessOrEqual(t, counted, float64(requests), "the lines count no more refusals than there were")
	t.Logf("%d holds refused with 503 unavailable, %d HTTP log lines, %d warnings and errors in all (River's included)",
		requests, httpLines, len(in.logs.lines(t, slog.LevelWarn)))

	p.restore()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a, err := in.hold("back", "A1")
		if assert.NoError(c, err) {
			assert.Equal(c, http.StatusCreated, a.status, "%s", a.body)
		}
	}, 30*time.Second, 100*time.Millisecond, "service comes back with the database")
}
