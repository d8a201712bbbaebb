package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/stock"
)

// TestShutdownAnswersQueuedHolds stops the server while a hundred holds
// wait for their batches (a row lock keeps the first one waiting): every
// one of them still gets its answer, and the answers match the database.
func TestShutdownAnswersQueuedHolds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	cfg, err := config.Load(func(k string) string {
		return map[string]string{
			"DATABASE_URL": "postgres://unused", "STOCKHOLD_ADDR": "127.0.0.1:0",
			"STOCKHOLD_DB_LOCK_TIMEOUT": "30s", "STOCKHOLD_DB_STATEMENT_TIMEOUT": "30s", "STOCKHOLD_BATCH_FLIGHTS": "2",
			"STOCKHOLD_DRAIN_DELAY": "0s",
			// The holds wait on the lock until the shutdown, however long a
			// busy machine takes to get them all there.
			"STOCKHOLD_REQUEST_TIMEOUT": "60s", "STOCKHOLD_HTTP_WRITE_TIMEOUT": "70s",
		}[k]
	})
	require.NoError(t, err)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	shop, err := auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)
	_, err = a.Inventory.Adjust(ctx, stock.Adjustment{SKU: "S", Delta: 50, Actor: "test"})
	require.NoError(t, err)

	// Counts the holds the server has read and is handling.
	var handling atomic.Int64
	a.HTTP.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().URL.Path == "/v1/reservations" {
				handling.Add(1)
			}
			return next(c)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- a.ServeListener(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := http.Get(base + "/healthz")
		if assert.NoError(c, err) {
			res.Body.Close()
			assert.Equal(c, 200, res.StatusCode)
		}
	}, 10*time.Second, 10*time.Millisecond)

	// A DBA's lock keeps the first batch waiting; the rest queue behind it.
	lock, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(context.WithoutCancel(ctx))
	_, err = lock.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'S' FOR UPDATE`)
	require.NoError(t, err)

	const n = 100
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	type answer struct {
		status int
		err    error
	}
	answers := make(chan answer, n)
	var written sync.WaitGroup
	for i := range n {
		written.Add(1)
		go func() {
			var once sync.Once
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(written.Done) }}
			req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST",
				base+"/v1/reservations", strings.NewReader(`{"items":[{"sku":"S","quantity":1}]}`))
			if err != nil {
				once.Do(written.Done)
				answers <- answer{err: err}
				return
			}
			req.Header.Set("Authorization", "Bearer "+shop)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprint("k", i))
			res, err := client.Do(req)
			once.Do(written.Done)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			answers <- answer{status: res.StatusCode}
		}()
	}
	written.Wait()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.EqualValues(c, n, handling.Load(), "the server is handling every hold")
	}, 10*time.Second, 5*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting int
		assert.NoError(c, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		assert.Positive(c, waiting)
	}, 10*time.Second, 5*time.Millisecond)

	cancel() // shut down with every hold still waiting
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			conn.Close()
		}
		assert.Error(c, err, "the listener is closed: shutdown has begun")
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, lock.Commit(context.Background()))
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}

	counts := map[int]int{}
	for range n {
		a := <-answers
		require.NoError(t, a.err, "every queued hold gets an answer")
		counts[a.status]++
	}
	require.Equal(t, map[int]int{201: 50, 409: 50}, counts)
	var held int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE status = 'held'`).Scan(&held))
	require.Equal(t, 50, held)
}
