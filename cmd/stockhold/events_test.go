package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// consumer pulls GET /v1/events from whichever server is up, keeping its
// cursor across the servers' deaths, as a shop's integration would.
type consumer struct {
	client *http.Client
	token  string

	serverMu sync.Mutex
	addr     string        // the server to ask now
	moved    chan struct{} // closed when addr changes

	mu     sync.Mutex
	cursor string
	got    []events.Event
	errors int // requests that failed (the server was down)
}

// serve points the consumer (and the test's writers) at the server on addr.
func (c *consumer) serve(addr string) {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	if c.moved != nil {
		close(c.moved)
	}
	c.addr, c.moved = addr, make(chan struct{})
}

// server is the server to ask now, and a channel closed once another
// replaces it.
func (c *consumer) server() (string, <-chan struct{}) {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	return c.addr, c.moved
}

func (c *consumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := c.pull(ctx)
		if err != nil {
			c.mu.Lock()
			c.errors++
			c.mu.Unlock()
		}
		if err != nil || n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// pull reads one page and takes it.
func (c *consumer) pull(ctx context.Context) (int, error) {
	c.mu.Lock()
	cursor := c.cursor
	c.mu.Unlock()
	addr, _ := c.server()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/events?limit="+fmt.Sprint(1+rand.IntN(40))+"&after="+cursor, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/events: %s: %s", res.Status, body)
	}
	var page struct {
		Events []events.Event `json:"events"`
		Next   string         `json:"next"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cursor != c.cursor {
		return 0, fmt.Errorf("cursor moved under a pull")
	}
	c.got = append(c.got, page.Events...)
	c.cursor = page.Next
	return len(page.Events), nil
}

func (c *consumer) seen() ([]events.Event, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Event(nil), c.got...), c.errors
}

// TestEventConsumerAcrossServerKills pulls the event feed over HTTP from a
// real `stockhold serve` child while writers hold, confirm, release (whole
// and in part) and restock from many goroutines, some through the child's
// own API and some straight into the database (so transactions of several
// processes commit out of order); the child is killed with SIGKILL twice
// mid-stream and a new one started each time. The consumer, resuming from
// its cursor on each new server, must see every event exactly once, each
// (sku, pool) in the order of its changes, and the counters it walks must
// end where the stock rows are.
func TestEventConsumerAcrossServerKills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	deps := services(t, pool)
	skus := []string{"A1", "B2", "C3"}
	for _, sku := range skus {
		_, err := deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 100_000, Actor: "test"})
		require.NoError(t, err)
	}
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err := auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + smallPoolURL(t, pool), "STOCKHOLD_LOG_LEVEL=info", "STOCKHOLD_WORKERS=4"}

	client := &http.Client{Transport: apitest.Transport(t, &http.Transport{}), Timeout: 10 * time.Second}
	c := &consumer{client: client, token: ops}
	server := startChild(t, env...)
	c.serve(server.addr)
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() { defer close(consumed); c.run(consumeCtx) }()

	// Writers straight into the database, through the service: they go on
	// while the server is down.
	writeCtx, stopWriters := context.WithCancel(ctx)
	errs := make(chan error, 100)
	var writers sync.WaitGroup
	for w := range 6 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			by := inventory.Caller{Name: "shop"}
			for i := 0; writeCtx.Err() == nil; i++ {
				items := []inventory.Item{{SKU: skus[r.IntN(3)], Quantity: 2}, {SKU: skus[r.IntN(3)], Quantity: 1}}
				h, _, err := deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("w", w, "-", i), Items: items})
				if errors.Is(err, &domain.Error{Code: domain.CodeBusy}) {
					continue // a row stayed locked past the lock timeout (a killed server's transaction, on a busy machine): busy is an answer to retry
				}
				if err != nil {
					errs <- err
					return
				}
				switch r.IntN(4) {
				case 0:
					_, err = deps.Inventory.Confirm(ctx, h.ID, by)
				case 1:
					_, err = deps.Inventory.Release(ctx, h.ID, by, "")
				case 2:
					_, err = deps.Inventory.ReleaseItems(ctx, h.ID, by, "", []inventory.Item{{SKU: h.Items[0].SKU, Quantity: 1}})
				case 3:
					_, err = deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: items[0].SKU, Delta: 1, Actor: "restock"})
				}
				if errors.Is(err, &domain.Error{Code: domain.CodeBusy}) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Writers through the server's API: their batches die with it.
	for w := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; writeCtx.Err() == nil; i++ {
				addr, moved := c.server()
				req, _ := http.NewRequestWithContext(writeCtx, http.MethodPost, "http://"+addr+"/v1/reservations",
					strings.NewReader(fmt.Sprintf(`{"items": [{"sku": %q, "quantity": 1}]}`, skus[i%3])))
				req.Header.Set("Authorization", "Bearer "+shop)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprint("http", w, "-", i))
				res, err := client.Do(req)
				if err != nil {
					select { // the server is gone: wait for the next one
					case <-moved:
					case <-writeCtx.Done():
					}
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
	}

	progress := func(more int) {
		t.Helper()
		before, _ := c.seen()
		require.EventuallyWithT(t, func(col *assert.CollectT) {
			now, _ := c.seen()
			assert.GreaterOrEqual(col, len(now), len(before)+more)
		}, 60*time.Second, 10*time.Millisecond, "the consumer reads on")
	}
	for kill := range 2 {
		progress(300)
		require.NoError(t, server.cmd.Process.Kill())
		_ = server.cmd.Wait()
		// The writers go on meanwhile: wait until they have written more.
		ledger := func(t assert.TestingT) int {
			var n int
			assert.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&n))
			return n
		}
		down := ledger(t)
		require.EventuallyWithT(t, func(col *assert.CollectT) {
			assert.GreaterOrEqual(col, ledger(col), down+100)
		}, 60*time.Second, 10*time.Millisecond, "the writers go on while the server is down")
		server = startChild(t, env...)
		c.serve(server.addr)
		t.Logf("killed server %d; the next serves on %s", kill+1, server.addr)
	}
	progress(300)
	stopWriters()
	writers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Everything written is read, once.
	eventstest.WaitServed(t, pool)
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&rows))
	require.EventuallyWithT(t, func(col *assert.CollectT) {
		got, _ := c.seen()
		assert.Equal(col, rows, ledgerRowsOf(got), "the consumer read every ledger row's events")
	}, 60*time.Second, 20*time.Millisecond)
	stopConsumer()
	<-consumed
	got, failed := c.seen()
	eventstest.RequireMatchesLedger(t, pool, got)
	t.Logf("%d events from %d ledger rows read across two kills (%d requests failed while no server was up)", len(got), rows, failed)
	require.Positive(t, failed, "the consumer did see the server go away")
	dbtest.RequireInvariants(t, pool)
}

// ledgerRowsOf counts the ledger rows events came from.
func ledgerRowsOf(evs []events.Event) int {
	rows := map[[2]int64]bool{}
	for _, e := range evs {
		p, err := events.ParsePosition(e.ID)
		if err == nil {
			rows[[2]int64{int64(p.Xid), p.ID}] = true
		}
	}
	return len(rows)
}
