package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// lockRow holds sku's main stock row locked from another session, as a
// DBA's `SELECT ... FOR UPDATE` left open would, until unlock is called.
func lockRow(t *testing.T, pool *pgxpool.Pool, sku string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM stock WHERE sku = $1 FOR UPDATE) x`, sku).Scan(&n))
	require.Equal(t, 1, n)
	var once sync.Once
	unlock = func() { once.Do(func() { require.NoError(t, tx.Commit(ctx)) }) }
	t.Cleanup(unlock)
	return unlock
}

// waitLockWait waits until some session of pool's database waits for a
// row lock.
func waitLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		assert.NoError(c, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		assert.Positive(c, n)
	}, 10*time.Second, 5*time.Millisecond)
}

type outcome struct {
	r        inventory.Reservation
	replayed bool
	err      error
}

// gatedBatch makes the next hold batch of svc (one flight) carry every
// request send submits: it keeps the flight busy on a locked row while they
// queue, then lets everything go. send gets a function that submits one
// request and waits until it is queued; it returns the outcomes in order.
func gatedBatch(t *testing.T, svc *inventory.Service, pool *pgxpool.Pool, send func(submit func(ctx context.Context, req inventory.HoldRequest) <-chan outcome)) {
	t.Helper()
	ctx := context.Background()
	dbtest.StockIn(t, pool, "GATE", 1)
	unlock := lockRow(t, pool, "GATE")
	gate := make(chan outcome, 1)
	go func() {
		r, replayed, err := svc.Hold(ctx, holdReq("gate", item("GATE", 1)))
		gate <- outcome{r, replayed, err}
	}()
	waitLockWait(t, pool)
	queued := 0
	send(func(ctx context.Context, req inventory.HoldRequest) <-chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			r, replayed, err := svc.Hold(ctx, req)
			ch <- outcome{r, replayed, err}
		}()
		queued++
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, queued, inventory.PendingHolds(svc), "requests waiting for the next batch")
		}, 10*time.Second, time.Millisecond)
		return ch
	})
	unlock()
	require.NoError(t, (<-gate).err)
}

// TestBatchAnswersEachCaller puts into one batch a request the database
// refuses, a caller that goes away, refusals of every kind, replays and a
// key reused with another body: each caller gets the answer it would get
// alone, and the batch's stock adds up.
func TestBatchAnswersEachCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Flights: 1, LockTimeout: 10 * time.Second}})
	dbtest.StockIn(t, b.pool, "A", 10)
	dbtest.StockIn(t, b.pool, "B", 5)
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.order_ref = 'poison' THEN RAISE EXCEPTION 'poisoned hold'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER poison BEFORE INSERT ON reservations FOR EACH ROW EXECUTE FUNCTION poison();`)
	require.NoError(t, err)

	leaving, leave := context.WithCancel(ctx)
	var (
		ok1, short, poisoned, gone, first, again, reused, multi, unknown, rest, late <-chan outcome
	)
	gatedBatch(t, svc, b.pool, func(submit func(context.Context, inventory.HoldRequest) <-chan outcome) {
		ok1 = submit(ctx, holdReq("ok1", item("A", 3)))
		short = submit(ctx, holdReq("short", item("B", 6)))
		p := holdReq("poison", item("A", 1))
		p.OrderRef = "poison"
		poisoned = submit(ctx, p)
		gone = submit(leaving, holdReq("gone", item("A", 2)))
		first = submit(ctx, holdReq("dup", item("A", 1)))
		again = submit(ctx, holdReq("dup", item("A", 1)))
		reused = submit(ctx, holdReq("dup", item("A", 4)))
		multi = submit(ctx, holdReq("multi", item("B", 5), item("A", 1)))
		unknown = submit(ctx, holdReq("unknown", item("A", 1), item("ZZ", 1)))
		rest = submit(ctx, holdReq("rest", item("A", 5)))
		late = submit(ctx, holdReq("late", item("A", 1)))
		leave()
		require.ErrorIs(t, (<-gone).err, context.Canceled)
	})

	o := <-ok1
	require.NoError(t, o.err)
	require.Equal(t, inventory.StatusHeld, o.r.Status)
	o = <-short
	require.Equal(t, domain.CodeOutOfStock, code(o.err))
	require.Equal(t, "B", o.err.(*domain.Error).SKU)
	o = <-poisoned
	require.Error(t, o.err)
	var de *domain.Error
	require.NotErrorAs(t, o.err, &de, "the database's refusal is not the caller's fault: %v", o.err)
	f := <-first
	require.NoError(t, f.err)
	require.False(t, f.replayed)
	o = <-again
	require.NoError(t, o.err)
	require.True(t, o.replayed)
	require.Equal(t, f.r, o.r)
	o = <-reused
	require.Equal(t, domain.CodeKeyReused, code(o.err))
	o = <-multi
	require.NoError(t, o.err)
	require.Equal(t, []inventory.HeldItem{{SKU: "A", Pool: "main", Quantity: 1, Location: "default"}, {SKU: "B", Pool: "main", Quantity: 5, Location: "default"}}, o.r.Items)
	o = <-unknown
	require.Equal(t, domain.CodeUnknownSKU, code(o.err))
	require.Equal(t, "ZZ", o.err.(*domain.Error).SKU)
	o = <-rest
	require.NoError(t, o.err, "A: 10 - 3 - 1 - 1 = 5 left")
	o = <-late
	require.Equal(t, domain.CodeOutOfStock, code(o.err))

	var keys []string
	rows, err := b.pool.Query(ctx, `SELECT idempotency_key FROM reservations WHERE idempotency_key <> 'gate' ORDER BY 1`)
	require.NoError(t, err)
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"dup", "multi", "ok1", "rest"}, keys, "the poisoned, the gone and the refused left no hold")
	a := pool(t, svc, "A", "main")
	require.Zero(t, a.Available)
	require.Equal(t, int64(10), a.Reserved)
	require.Zero(t, pool(t, svc, "B", "main").Available)
}

// TestLockedRowAnswersBusy: a stock row another session keeps locked makes
// the requests that need it answer busy within the lock timeout, while the
// requests for other SKUs that shared their batches succeed.
func TestLockedRowAnswersBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Flights: 1, LockTimeout: 200 * time.Millisecond}})
	dbtest.StockIn(t, b.pool, "LOCKED", 10)
	for i := range 5 {
		dbtest.StockIn(t, b.pool, fmt.Sprint("FREE", i), 100)
	}
	paid, _, err := svc.Hold(ctx, holdReq("paid", item("LOCKED", 1)))
	require.NoError(t, err)
	unlock := lockRow(t, b.pool, "LOCKED")

	type result struct {
		locked bool
		err    error
	}
	results := make(chan result, 100)
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case i == 0:
				_, err := svc.Confirm(ctx, paid.ID, shop)
				results <- result{true, err}
			case i%10 == 1:
				_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("l", i), item("LOCKED", 1)))
				results <- result{true, err}
			case i%10 == 2:
				_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("m", i), item(fmt.Sprint("FREE", i%5), 1), item("LOCKED", 1)))
				results <- result{true, err}
			default:
				_, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("f", i), item(fmt.Sprint("FREE", i%5), 1)))
				results <- result{false, err}
			}
		}()
	}
	wg.Wait() // all answered while the row is still locked
	close(results)
	busy, held := 0, 0
	for r := range results {
		if r.locked {
			require.Equal(t, domain.CodeBusy, code(r.err), "%v", r.err)
			busy++
			var e *domain.Error
			if errors.As(r.err, &e) && e.SKU != "" {
				require.Equal(t, "LOCKED", e.SKU)
			}
			continue
		}
		require.NoError(t, r.err)
		held++
	}
	require.Equal(t, 13, busy)
	require.Equal(t, 47, held)
	var reserved int64
	for i := range 5 {
		reserved += pool(t, svc, fmt.Sprint("FREE", i), "main").Reserved
	}
	require.Equal(t, int64(47), reserved, "nothing of the refused multi-line holds")
	require.Equal(t, int64(1), pool(t, svc, "LOCKED", "main").Reserved)

	unlock()
	_, _, err = svc.Hold(ctx, holdReq("after", item("LOCKED", 1)))
	require.NoError(t, err, "the row is free again")
	c, err := svc.Confirm(ctx, paid.ID, shop)
	require.NoError(t, err)
	require.Equal(t, inventory.StatusConfirmed, c.Status)
}

// TestBatchPanicIsAnError: a panic inside a batch answers its callers with
// an error and raises an alert; the process, and the next batches, go on.
func TestBatchPanicIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alerts := make(chan stock.Alert, 1)
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Alert: func(_ context.Context, a stock.Alert) { alerts <- a }}})
	inventory.SetBeforeGrant(svc, func(r inventory.HoldRequest) {
		if r.OrderRef == "boom" {
			panic("boom")
		}
	})
	dbtest.StockIn(t, b.pool, "A1", 10)
	req := holdReq("boom", item("A1", 1))
	req.OrderRef = "boom"
	_, _, err := svc.Hold(ctx, req)
	require.ErrorContains(t, err, "panicked: boom")
	var de *domain.Error
	require.NotErrorAs(t, err, &de, "an internal error (500), not the caller's fault")
	a := <-alerts
	require.Equal(t, "batch_panicked", a.Kind)
	require.Equal(t, "boom", a.Details["panic"])
	require.Contains(t, a.Details["stack"], "holdBatch")

	r, _, err := svc.Hold(ctx, holdReq("fine", item("A1", 2)))
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, r.Status)
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM reservations`).Scan(&n))
	require.Equal(t, 1, n, "the panicked batch committed nothing")
}

// TestFlashAcrossInstances: 1,000 clients race for 100 units through two
// instances of the service: exactly 100 holds. Each client sends its hold
// again while it answers busy, as a client of the API does: busy is what
// a hold answers when the row stays locked past the lock timeout, as it
// does here at first (another transaction keeps it locked until the first
// busy answer), and as it does when a machine too loaded to commit a
// batch within the lock timeout keeps the row locked by turns. Every
// client gets a final answer, held or out_of_stock.
func TestFlashAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{})
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "FLASH", 100)
	unlock := lockRow(t, b.pool, "FLASH")
	var (
		held, out, busy atomic.Int64
		firstBusy       = make(chan struct{})
		once            sync.Once
	)
	errs := make(chan error, 1000)
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := svc
			if i%2 == 1 {
				s = other
			}
			n, err := untilAnswered(func() error {
				_, _, err := s.Hold(ctx, holdReq(fmt.Sprint("f", i), item("FLASH", 1)))
				if code(err) == domain.CodeBusy {
					once.Do(func() { close(firstBusy) })
				}
				return err
			})
			busy.Add(int64(n))
			switch code(err) {
			case "":
				if err != nil {
					errs <- err
					return
				}
				held.Add(1)
			case domain.CodeOutOfStock:
				out.Add(1)
			default:
				errs <- err
			}
		}()
	}
	select {
	case <-firstBusy:
	case <-time.After(answerWait):
		t.Error("no hold answered busy while the row was locked")
	}
	unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d busy answers sent again", busy.Load())
	require.Positive(t, busy.Load())
	require.Equal(t, int64(100), held.Load())
	require.Equal(t, int64(900), out.Load())
	p := pool(t, svc, "FLASH", "main")
	require.Zero(t, p.Available)
	require.Equal(t, int64(100), p.Reserved)
}

// TestLockOrderOnICUCollation races multi-SKU holds against multi-SKU
// confirms and releases on a database whose collation sorts "a1" before
// "B1" (en-US) while byte order puts "B1" first. Every path locks stock rows
// in byte order, so nothing deadlocks or times out.
func TestLockOrderOnICUCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprint("coalesce=", coalesce), func(t *testing.T) {
			t.Parallel()
			svc, b := setup(t, &setupOpts{icu: true, serial: !coalesce})
			var collated, bytewise bool
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT 'a1' < 'B1', 'a1' < 'B1' COLLATE "C"`).Scan(&collated, &bytewise))
			require.True(t, collated, "en-US puts a1 first")
			require.False(t, bytewise, "bytes put B1 first")

			skus := []string{"a1", "B1", "a2", "B2"}
			for _, s := range skus {
				dbtest.StockIn(t, b.pool, s, 100_000)
			}
			const workers, rounds = 24, 20
			errs := make(chan error, workers*rounds)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range rounds {
						var items []inventory.Item
						for _, j := range rand.Perm(len(skus)) {
							items = append(items, item(skus[j], 1))
						}
						r, _, err := svc.Hold(ctx, holdReq(fmt.Sprint(w, "-", i), items...))
						if err != nil {
							errs <- fmt.Errorf("hold: %w", err)
							continue
						}
						if i%2 == 0 {
							_, err = svc.Confirm(ctx, r.ID, shop)
						} else {
							_, err = svc.Release(ctx, r.ID, shop, "")
						}
						if err != nil {
							errs <- fmt.Errorf("confirm or release: %w", err)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for _, s := range skus {
				require.Equal(t, int64(workers*rounds/2), pool(t, svc, s, "main").Sold)
			}
		})
	}
}

// TestRandomizedHolds runs many clients holding, replaying, confirming and
// releasing at random over a few scarce SKUs, then checks every answer
// against the database: each key made at most one hold, every answer that
// named a hold names the one the database has, replays repeat it, a reused
// key was refused only for a different body, and the counters are exactly
// what the answers add up to (so grants never exceeded stock). The
// invariants and the ledger are checked when the test ends.
func TestRandomizedHolds(t *testing.T) {
	t.Parallel()
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprint("coalesce=", coalesce), func(t *testing.T) {
			t.Parallel()
			testRandomizedHolds(t, coalesce)
		})
	}
}

func testRandomizedHolds(t *testing.T, coalesce bool) {
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{serial: !coalesce})
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow() // the steps share state: a failed one ends the scenario
		}
	}
	stockOf := map[string]int64{"S1": 120, "S2": 60, "S3": 20, "S4": 5}
	skus := []string{"S1", "S2", "S3", "S4"}
	for s, n := range stockOf {
		dbtest.StockIn(t, b.pool, s, n)
	}

	type answer struct {
		key, body string
		id        uuid.UUID
		replayed  bool
		code      domain.Code
		items     []inventory.HeldItem
	}
	type hold struct {
		id     uuid.UUID
		items  []inventory.HeldItem
		status string
	}
	const clients, ops = 24, 30
	answers := make([][]answer, clients)
	holds := make([][]*hold, clients)

	step("clients hold, replay, confirm and cancel at random", func(t *testing.T) {
		errs := make(chan error, clients*ops)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 7))
				client := fmt.Sprint("shop-", c%3) // clients share owners, and so key spaces
				bodies := map[string][]inventory.Item{}
				mine := map[uuid.UUID]*hold{}
				for i := range ops {
					switch op := rng.IntN(10); {
					case op < 6 || len(mine) == 0:
						key := fmt.Sprintf("c%d-k%d", c, rng.IntN(8))
						items, ok := bodies[key]
						if !ok || rng.IntN(10) == 0 {
							items = nil
							for range 1 + rng.IntN(3) {
								items = append(items, item(skus[rng.IntN(len(skus))], 1+int64(rng.IntN(3))))
							}
							if !ok {
								bodies[key] = items
							}
						}
						req := inventory.HoldRequest{Client: client, IdempotencyKey: key, Items: items}
						r, replayed, err := svc.Hold(ctx, req)
						a := answer{key: client + "/" + key, body: fmt.Sprint(items), id: r.ID, replayed: replayed, code: code(err), items: r.Items}
						if err != nil && a.code == "" {
							errs <- fmt.Errorf("op %d: %w", i, err)
							continue
						}
						answers[c] = append(answers[c], a)
						if err == nil && !replayed {
							h := &hold{id: r.ID, items: r.Items, status: string(inventory.StatusHeld)}
							mine[r.ID] = h
							holds[c] = append(holds[c], h)
						}
					default:
						var h *hold
						for _, x := range mine {
							h = x
							break
						}
						var err error
						if op < 8 {
							_, err = svc.Confirm(ctx, h.id, inventory.Caller{Name: client})
							if err == nil {
								h.status = string(inventory.StatusConfirmed)
							}
						} else {
							_, err = svc.Release(ctx, h.id, inventory.Caller{Name: client}, "changed mind")
							if err == nil {
								h.status = string(inventory.StatusReleased)
							}
						}
						if err != nil {
							errs <- fmt.Errorf("op %d on %s: %w", i, h.id, err)
						}
						delete(mine, h.id) // decided: leave it alone
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})

	type row struct {
		id     uuid.UUID
		status string
	}
	byKey := map[string]row{}
	step("each key made at most one hold", func(t *testing.T) {
		rows, err := b.pool.Query(ctx, `SELECT client || '/' || idempotency_key, id, status FROM reservations`)
		require.NoError(t, err)
		for rows.Next() {
			var k string
			var r row
			require.NoError(t, rows.Scan(&k, &r.id, &r.status))
			_, dup := byKey[k]
			require.False(t, dup, "key %s made two holds", k)
			byKey[k] = r
		}
		require.NoError(t, rows.Err())
	})

	firstBody := map[string]string{}
	step("every answer names the hold the database has", func(t *testing.T) {
		for c := range clients {
			for _, a := range answers[c] {
				switch a.code {
				case "":
					r, ok := byKey[a.key]
					require.True(t, ok, "answered hold %s of key %s is not in the database", a.id, a.key)
					require.Equal(t, r.id, a.id, "key %s", a.key)
					if prev, ok := firstBody[a.key]; ok {
						require.Equal(t, prev, a.body, "key %s answered holds for two bodies", a.key)
					}
					firstBody[a.key] = a.body
				case domain.CodeKeyReused:
					_, ok := byKey[a.key]
					require.True(t, ok, "key %s refused as reused but has no hold", a.key)
				case domain.CodeOutOfStock:
				default:
					t.Fatalf("unexpected refusal %s for key %s", a.code, a.key)
				}
			}
		}
	})

	step("a key was refused as reused only for another body", func(t *testing.T) {
		for c := range clients {
			for _, a := range answers[c] {
				if a.code == domain.CodeKeyReused {
					require.NotEqual(t, firstBody[a.key], a.body, "key %s refused for its own body", a.key)
				}
			}
		}
	})

	step("the counters are what the answers add up to", func(t *testing.T) {
		statusOf := map[uuid.UUID]string{}
		for _, r := range byKey {
			statusOf[r.id] = r.status
		}
		reserved, sold := map[string]int64{}, map[string]int64{}
		made := 0
		for c := range clients {
			for _, h := range holds[c] {
				made++
				require.Equal(t, h.status, statusOf[h.id], "hold %s", h.id)
				for _, l := range h.items {
					switch inventory.HoldStatus(h.status) {
					case inventory.StatusHeld:
						reserved[l.SKU] += l.Quantity
					case inventory.StatusConfirmed:
						sold[l.SKU] += l.Quantity
					}
				}
			}
		}
		require.Len(t, byKey, made, "every hold in the database was answered as made")
		for _, s := range skus {
			p := pool(t, svc, s, "main")
			require.Equal(t, reserved[s], p.Reserved, s)
			require.Equal(t, sold[s], p.Sold, s)
			require.Equal(t, stockOf[s]-reserved[s]-sold[s], p.Available, s)
		}
		t.Logf("%d holds made, %d answers", made, func() (n int) {
			for c := range clients {
				n += len(answers[c])
			}
			return n
		}())
	})
}

// TestChangeBatchAnswersEachCaller puts confirms and releases of the same
// holds into one batch: each is answered as if it ran alone, in arrival
// order.
func TestChangeBatchAnswersEachCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Flights: 1, LockTimeout: 10 * time.Second}})
	dbtest.StockIn(t, b.pool, "A1", 100)
	h := make([]inventory.Reservation, 6)
	for i := range h {
		req := holdReq(fmt.Sprint("h", i), item("A1", int64(i+1)))
		if i == 5 {
			req.Client = "shop-b"
		}
		var err error
		h[i], _, err = svc.Hold(ctx, req)
		require.NoError(t, err)
	}
	_, err := b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, h[3].ID)
	require.NoError(t, err)

	// Keep the first batch (a confirm of h0) waiting on h0's row.
	lock, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx)
	_, err = lock.Exec(ctx, `SELECT 1 FROM reservations WHERE id = $1 FOR UPDATE`, h[0].ID)
	require.NoError(t, err)
	type answer struct {
		r   inventory.Reservation
		err error
	}
	first := make(chan answer, 1)
	go func() {
		r, err := svc.Confirm(ctx, h[0].ID, shop)
		first <- answer{r, err}
	}()
	waitLockWait(t, b.pool)
	var queued []chan answer
	queue := func(f func() (inventory.Reservation, error)) {
		ch := make(chan answer, 1)
		go func() {
			r, err := f()
			ch <- answer{r, err}
		}()
		queued = append(queued, ch)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, len(queued), inventory.PendingChanges(svc), "changes waiting for the next batch")
		}, 10*time.Second, time.Millisecond)
	}
	queue(func() (inventory.Reservation, error) { return svc.Confirm(ctx, h[1].ID, shop) })
	queue(func() (inventory.Reservation, error) { return svc.Release(ctx, h[1].ID, shop, "") })
	queue(func() (inventory.Reservation, error) { return svc.Release(ctx, h[2].ID, shop, "found it cheaper") })
	queue(func() (inventory.Reservation, error) { return svc.Confirm(ctx, h[2].ID, shop) })
	queue(func() (inventory.Reservation, error) { return svc.Confirm(ctx, h[3].ID, shop) })
	queue(func() (inventory.Reservation, error) { return svc.Confirm(ctx, h[4].ID, shop) })
	queue(func() (inventory.Reservation, error) { return svc.Confirm(ctx, h[4].ID, shop) })
	queue(func() (inventory.Reservation, error) { return svc.Confirm(ctx, h[5].ID, shop) })
	queue(func() (inventory.Reservation, error) { return svc.Release(ctx, uuid.New(), shop, "") })
	require.NoError(t, lock.Commit(ctx))

	a := <-first
	require.NoError(t, a.err)
	require.Equal(t, inventory.StatusConfirmed, a.r.Status)
	got := make([]answer, len(queued))
	for i, ch := range queued {
		got[i] = <-ch
	}
	require.NoError(t, got[0].err)
	require.Equal(t, inventory.StatusConfirmed, got[0].r.Status)
	require.NotNil(t, got[0].r.ConfirmedAt)
	require.Equal(t, domain.CodeNotHeld, code(got[1].err), "released after it was confirmed in the same batch")
	require.Equal(t, string(inventory.StatusConfirmed), got[1].err.(*domain.Error).Status)
	require.NoError(t, got[2].err)
	require.Equal(t, inventory.StatusReleased, got[2].r.Status)
	require.Equal(t, "found it cheaper", *got[2].r.ReleaseReason)
	require.Equal(t, domain.CodeNotHeld, code(got[3].err))
	require.Equal(t, string(inventory.StatusReleased), got[3].err.(*domain.Error).Status)
	require.Equal(t, domain.CodeNotHeld, code(got[4].err), "past its expiry")
	require.Equal(t, string(inventory.StatusExpired), got[4].err.(*domain.Error).Status)
	require.NoError(t, got[5].err)
	require.NoError(t, got[6].err)
	require.Equal(t, got[5].r, got[6].r, "confirming twice answers the same")
	require.Equal(t, []inventory.HeldItem{{SKU: "A1", Pool: "main", Quantity: 5, Location: "default"}}, got[6].r.Items)
	require.Equal(t, domain.CodeNotFound, code(got[7].err), "another shop's hold")
	require.Equal(t, domain.CodeNotFound, code(got[8].err))

	p := pool(t, svc, "A1", "main")
	require.Equal(t, int64(1+2+5), p.Sold)
	require.Equal(t, int64(6), p.Reserved, "only shop-b's hold is left")
	page, err := svc.Ledger(ctx, "A1", 100, 0)
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, m := range page.Movements {
		kinds[m.Kind+"/"+m.Actor]++
	}
	require.Equal(t, 3, kinds["confirm/shop-a"])
	require.Equal(t, 1, kinds["release/shop-a"])
	require.Equal(t, 1, kinds["expire/system:confirm"])
}
