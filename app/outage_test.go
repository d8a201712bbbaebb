package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/logging"
)

// dbProxy stands between an instance and PostgreSQL, so a test can take
// the database away and give it back: cut closes every connection and the
// listening socket (new connections are refused, as with a stopped
// server); restore listens on the same address again.
type dbProxy struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newDBProxy(t *testing.T, target string) *dbProxy {
	t.Helper()
	p := &dbProxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *dbProxy) serve(ln net.Listener) {
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

func (p *dbProxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		_, _ = c.Close(), s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
	_, _ = c.Close(), s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// cut takes the database away: every connection through the proxy is
// closed and new ones are refused.
func (p *dbProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *dbProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}

// outageLength is how long TestDatabaseOutage keeps the database away:
// 3 s in the suite, STOCKHOLD_TEST_OUTAGE (20s, say) to measure.
func outageLength(t *testing.T) time.Duration {
	v := os.Getenv("STOCKHOLD_TEST_OUTAGE")
	if v == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err)
	return d
}

// TestDatabaseOutage takes the database away from a serving instance under
// traffic, then gives it back: the outage logs one line when the database
// goes and one when it answers again (saying for how long, and how many
// lines it held back), at most 30 in all, and holds succeed again within
// 5 s of the database's return. (It takes the outage's length and ten
// seconds: the one way to see an outage is to have one.)
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := dbtest.New(t)
	pc, err := pgx.ParseConfig(dbtest.URL(t, direct))
	require.NoError(t, err)
	proxy := newDBProxy(t, fmt.Sprintf("127.0.0.1:%d", pc.Port))
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pc.User, proxy.addr, pc.Database)

	env := map[string]string{"DATABASE_URL": url, "STOCKHOLD_DRAIN_DELAY": "0s", "STOCKHOLD_SHUTDOWN_TIMEOUT": "5s",
		"STOCKHOLD_JOB_STOP_TIMEOUT": "5s"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	logs := &logBuffer{}
	log, err := logging.New(logging.FormatJSON, "info", logs)
	require.NoError(t, err)
	pool, err := app.Open(ctx, cfg)
	require.NoError(t, err)
	a, err := app.New(cfg, pool, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.ServeListener(serveCtx, ln) }()
	defer func() {
		stop()
		<-served
		_ = a.Close()
		pool.Close()
	}()
	shop, err := auth.Create(ctx, direct, "shop", auth.RoleShop)
	require.NoError(t, err)
	dbtest.StockIn(t, direct, "A1", 1_000_000)

	// Traffic: four shops' checkouts, each holding one unit every 20 ms.
	type result struct {
		at     time.Time
		status int
	}
	var (
		mu      sync.Mutex
		results []result
	)
	client := &http.Client{Timeout: 10 * time.Second}
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; trafficCtx.Err() == nil; i++ {
				body := `{"items":[{"sku":"A1","quantity":1}],"ttl_seconds":60}`
				req, _ := http.NewRequestWithContext(trafficCtx, "POST", "http://"+ln.Addr().String()+"/v1/reservations", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+shop)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("w%d-%d", w, i))
				var r result
				if resp, err := client.Do(req); err == nil {
					r.status = resp.StatusCode
					_ = resp.Body.Close()
				}
				r.at = time.Now() // answered
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				select {
				case <-trafficCtx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	defer func() { stopTraffic(); wg.Wait() }()
	heldSince := func(since time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.status == http.StatusCreated && r.at.After(since) {
				return r.at, true
			}
		}
		return time.Time{}, false
	}
	require.Eventually(t, func() bool { _, ok := heldSince(time.Time{}); return ok }, 30*time.Second, 10*time.Millisecond, "traffic flows")

	before := logs.count()
	outage := outageLength(t)
	proxy.cut()
	cutAt := time.Now()
	<-time.After(outage)
	proxy.restore(t)
	backAt := time.Now()

	var first time.Time
	require.Eventually(t, func() bool {
		var ok bool
		first, ok = heldSince(backAt)
		return ok
	}, 30*time.Second, 10*time.Millisecond, "holds succeed again")
	recovered := first.Sub(backAt)
	// Ten seconds on, every retry and reconnection of the outage is over.
	<-time.After(10 * time.Second)
	// Every request has its line (at info: the access log, as in normal
	// times); the outage's are the others.
	var lines, summary []string
	requests := 0
	for _, l := range logs.since(before) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == "request" && m["level"] == "INFO" {
			requests++
			continue
		}
		lines = append(lines, l)
		summary = append(summary, fmt.Sprintf("%v %v err=%v %v", m["level"], m["msg"], cmpOr(m["err"], m["error"]), cmpOr(m["held_back"], m["log_note"])))
	}
	mu.Lock()
	statuses := map[int]int{}
	for _, r := range results {
		if r.at.After(cutAt) && r.at.Before(backAt) {
			statuses[r.status]++
		}
	}
	mu.Unlock()
	t.Logf("outage %s: %d log lines from the cut to 10 s after the return (and %d request lines); first hold %s after the return; answers during it %v\n%s",
		outage, len(lines), requests, recovered.Round(time.Millisecond), statuses, strings.Join(summary, "\n"))
	require.LessOrEqual(t, len(lines), 30, "log lines for the outage")
	require.Less(t, recovered, 5*time.Second, "holds succeed again within 5 s")
	var back bool
	for _, l := range lines {
		back = back || strings.Contains(l, "database answers again")
	}
	require.True(t, back, "a line says the database is back")
}

// count is how many lines were logged so far; since(n) is every line
// after the first n.
func (b *logBuffer) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), "\n")
}

func (b *logBuffer) since(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n")
	if n >= len(all) {
		return nil
	}
	return all[n:]
}

func cmpOr(a, b any) any {
	if a != nil {
		return a
	}
	return b
}
