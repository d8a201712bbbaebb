package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// child is a `stockhold serve` process.
type child struct {
	cmd  *exec.Cmd
	addr string
	// serving gets the address the child says it serves on; ended is
	// closed when its stderr ends, as it does when it exits.
	serving chan string
	ended   chan struct{}

	mu  sync.Mutex
	log strings.Builder
}

func (c *child) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

var servingAddr = regexp.MustCompile(`msg="stockhold serving" addr=(\S+)|"msg":"stockhold serving","addr":"([^"]+)"`)

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	c := spawnChild(t, env...)
	c.waitServing(t)
	return c
}

// spawnChild starts `stockhold serve` and returns at once.
func spawnChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=serve", "STOCKHOLD_ADDR=127.0.0.1:0"}, env...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, serving: make(chan string, 1), ended: make(chan struct{})}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		defer close(c.ended)
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			c.mu.Lock()
			c.log.WriteString(s.Text() + "\n")
			c.mu.Unlock()
			if m := servingAddr.FindStringSubmatch(s.Text()); m != nil {
				c.serving <- m[1] + m[2]
			}
		}
	}()
	return c
}

// waitServing waits for the child to say it serves, and where.
func (c *child) waitServing(t *testing.T) {
	t.Helper()
	select {
	case c.addr = <-c.serving:
	case <-time.After(60 * time.Second):
		t.Fatalf("the child did not start serving:\n%s", c.logs())
	}
}

// outcome is one hold request's fate, seen by its client.
type outcome struct {
	key    string
	status int
	err    error
	at     time.Time
}

// TestSIGTERMUnderLoad sends SIGTERM to a real `stockhold serve` while
// clients place holds as fast as they can and one slow client dribbles a
// body. /readyz turns 503 first while holds are still served (the drain);
// then the listener closes and the process exits 0, the slow client cut
// when the shutdown timeout ends. No request is cut: every hold was either
// answered or left no trace, and every hold answered 201 is in the
// database.
func TestSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	shop, err := auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 1_000_000, Actor: "test"})
	require.NoError(t, err)

	c := startChild(t, "DATABASE_URL="+dbtest.URL(t, pool), "STOCKHOLD_LOG_LEVEL=info",
		"STOCKHOLD_DRAIN_DELAY=3s", "STOCKHOLD_SHUTDOWN_TIMEOUT=2s", "STOCKHOLD_HTTP_READ_TIMEOUT=30s",
		"STOCKHOLD_HTTP_WRITE_TIMEOUT=40s", "STOCKHOLD_REQUEST_TIMEOUT=30s")
	base := "http://" + c.addr
	// A fresh connection per request: the only transport errors are then
	// the listener's (refused, or reset in its backlog), never a race on a
	// reused keep-alive connection.
	client := &http.Client{Transport: apitest.Transport(t, &http.Transport{DisableKeepAlives: true}), Timeout: 30 * time.Second}

	stop := make(chan struct{})
	outcomes := make(chan outcome, 100_000)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("load-%d-%d", w, i)
				req, err := http.NewRequest("POST", base+"/v1/reservations", strings.NewReader(`{"items": [{"sku": "A1", "quantity": 1}]}`))
				if err != nil {
					outcomes <- outcome{key: key, err: err}
					return
				}
				req.Header.Set("Authorization", "Bearer "+shop)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				res, err := client.Do(req)
				if err != nil {
					outcomes <- outcome{key: key, err: err}
					if errors.Is(err, syscall.ECONNREFUSED) {
						<-stop // the listener is closed for good: nothing more to send
						return
					}
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				outcomes <- outcome{key: key, status: res.StatusCode, at: time.Now()}
			}
		}()
	}

	// The slow client: headers, then a body too slowly to finish.
	slow, err := net.Dial("tcp", c.addr)
	require.NoError(t, err)
	defer slow.Close()
	_, err = fmt.Fprintf(slow, "POST /v1/reservations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: slow\r\n"+
		"Content-Length: 1000\r\n\r\n{", shop)
	require.NoError(t, err)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		assert.NoError(c, pool.QueryRow(ctx, `SELECT count(*) FROM reservations`).Scan(&n))
		assert.Greater(c, n, 50)
	}, 30*time.Second, 20*time.Millisecond, "load is running")

	signalled := time.Now()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := client.Get(base + "/readyz")
		if assert.NoError(c, err) {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(c, http.StatusServiceUnavailable, res.StatusCode)
			assert.Contains(c, string(body), "shutting down")
		}
	}, 5*time.Second, 10*time.Millisecond, "/readyz turns 503 first")
	drainingFrom := time.Now()

	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", c.logs())
	}
	close(stop)
	wg.Wait()
	close(outcomes)
	require.NoError(t, err, "serve exits 0 after SIGTERM, slow client and all:\n%s", c.logs())
	t.Logf("exited %v after SIGTERM", time.Since(signalled).Round(time.Millisecond))

	held := map[string]bool{}
	rows, err := pool.Query(ctx, `SELECT idempotency_key FROM reservations`)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		held[k] = true
	}
	require.NoError(t, rows.Err())

	var answered, refused, servedWhileDraining int
	for o := range outcomes {
		switch {
		case o.err != nil:
			// The listener was gone or closed with this one in its backlog:
			// the request never reached the service, so it left no trace.
			require.False(t, held[o.key], "hold %s was made but its answer was cut: %v", o.key, o.err)
			refused++
		case o.status == http.StatusCreated:
			require.True(t, held[o.key], "hold %s answered 201 is in the database", o.key)
			answered++
			if o.at.After(drainingFrom) {
				servedWhileDraining++
			}
		default:
			t.Errorf("hold %s answered %d", o.key, o.status)
		}
		delete(held, o.key)
	}
	require.Empty(t, held, "every hold in the database was answered")
	require.Positive(t, servedWhileDraining, "holds are served while /readyz says 503")
	require.Contains(t, c.logs(), "closing connections still open after the shutdown timeout", "the slow client was cut, not waited for")
	t.Logf("%d holds answered 201, %d refused at the door (listener closed), %d served while draining", answered, refused, servedWhileDraining)
	dbtest.RequireInvariants(t, pool)
}

// TestServeWaitsForTheDatabase starts serve before its database can be
// reached (nothing listens at the URL's address yet, as at a boot where
// stockhold starts first): it waits, saying so once, rather than exit,
// and serves, ready, as soon as the database is there. A wrong database
// name is not waited for. A misspelt setting is warned about.
func TestServeWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	cfg, err := pgconn.ParseConfig(dbtest.URL(t, pool))
	require.NoError(t, err)
	// The database's socket, which a proxy on a TCP port of its own
	// forwards to once it is started.
	network, address := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, address = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nothing listens there until the proxy starts
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", cfg.User, port, cfg.Database)

	// A misspelt setting on the way: serve says so, once, and starts.
	c := spawnChild(t, "DATABASE_URL="+url, "STOCKHOLD_LOG_LEVEL=info", "STOCKHOLD_ADRR=:9")
	require.Eventually(t, func() bool { return strings.Contains(c.logs(), "waiting for it") }, 30*time.Second, 20*time.Millisecond,
		"serve says it waits; it logged:\n%s", c.logs())
	// Past a few retries (backoff 0.25 s, 0.5 s, 1 s, ...), still waiting.
	select {
	case <-c.ended:
		t.Fatalf("serve exited while the database could not be reached:\n%s", c.logs())
	case <-time.After(2 * time.Second):
	}
	require.NotContains(t, c.logs(), "stockhold serving")

	proxy, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	go func() {
		for {
			in, err := proxy.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial(network, address)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in) }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	c.waitServing(t)
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + c.addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "ready once the database is there")
	logs := c.logs()
	require.Equal(t, 1, strings.Count(logs, "waiting for it"), "it says it waits once:\n%s", logs)
	require.Contains(t, logs, "PostgreSQL is reachable: starting")
	require.Equal(t, 1, strings.Count(logs, "unknown setting, ignored: STOCKHOLD_ADRR is not a setting: did you mean STOCKHOLD_ADDR?"), logs)

	// No such database: waiting would not mend it.
	bad := spawnChild(t, "DATABASE_URL="+fmt.Sprintf("postgres://%s@127.0.0.1:%d/no_such_db?sslmode=disable", cfg.User, port))
	select {
	case <-bad.ended:
		require.Error(t, bad.cmd.Wait(), "serve exits with an error")
	case <-time.After(30 * time.Second):
		t.Fatalf("serve waited for a database that does not exist:\n%s", bad.logs())
	}
	require.NotContains(t, bad.logs(), "waiting for it")
	require.Contains(t, bad.logs(), "no_such_db")
}
