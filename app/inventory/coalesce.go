package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/metrics"
)

// combiner coalesces single-SKU holds on one (sku, pool). Many transactions
// updating one row queue on its lock, one commit at a time; the combiner
// instead gathers the holds that arrive while the previous batch runs (or
// for one short window when a batch would hold a single request), locks the
// row once, grants in arrival order while stock lasts, writes every
// reservation, line, ledger row and release job in bulk, and commits once.
// Each caller still gets its own answer, and it is the same SQL as the plain
// path, batched, so idempotency and the CHECK constraints hold as before.
type combiner struct {
	s        *Service
	window   time.Duration
	maxBatch int

	mu     sync.Mutex
	queues map[stockKey]*queue
}

type stockKey struct{ sku, pool string }

type queue struct {
	pending []*waiter
}

type waiter struct {
	ctx  context.Context
	h    hold
	done chan holdResult
}

type holdResult struct {
	r        Reservation
	replayed bool
	err      error
}

func newCombiner(s *Service, window time.Duration, maxBatch int) *combiner {
	if maxBatch < 1 {
		maxBatch = 64
	}
	return &combiner{s: s, window: window, maxBatch: maxBatch, queues: map[stockKey]*queue{}}
}

// hold queues h behind its stock row and waits for the batch that takes it.
func (c *combiner) hold(ctx context.Context, h hold) (Reservation, bool, error) {
	w := &waiter{ctx: ctx, h: h, done: make(chan holdResult, 1)}
	key := stockKey{h.lines[0].SKU, h.lines[0].Pool}

	c.mu.Lock()
	q, running := c.queues[key]
	if !running {
		q = &queue{}
		c.queues[key] = q
	}
	q.pending = append(q.pending, w)
	c.mu.Unlock()
	if !running {
		go c.drain(key, q)
	}

	select {
	case res := <-w.done:
		return res.r, res.replayed, res.err
	case <-ctx.Done():
		// The batch may still commit this hold; a retry with the same
		// Idempotency-Key will find it.
		return Reservation{}, false, ctx.Err()
	}
}

// drain runs batches for one stock row until nobody waits on it.
func (c *combiner) drain(key stockKey, q *queue) {
	waited := false
	for {
		c.mu.Lock()
		if len(q.pending) == 1 && !waited && c.window > 0 {
			// Alone: give company a moment to arrive.
			c.mu.Unlock()
			time.Sleep(c.window)
			waited = true
			continue
		}
		if len(q.pending) == 0 {
			delete(c.queues, key)
			c.mu.Unlock()
			return
		}
		n := min(len(q.pending), c.maxBatch)
		batch := make([]*waiter, n)
		copy(batch, q.pending)
		q.pending = append(q.pending[:0], q.pending[n:]...)
		c.mu.Unlock()

		c.run(batch)
		waited = false
	}
}

// run grants one batch. If the batch transaction fails as a whole (a
// deadlock with a conflicting key, a lost connection), every request in it
// falls back to the plain path, which decides each on its own.
func (c *combiner) run(batch []*waiter) {
	live := batch[:0:0]
	for _, w := range batch {
		if w.ctx.Err() == nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	metrics.HoldBatch.Observe(float64(len(live)))
	results, err := c.s.holdBatch(ctx, live)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		// lock_timeout: the row is locked by someone else, and each hold
		// alone would wait for it all over again. The caller answers busy.
		for _, w := range live {
			w.done <- holdResult{err: err}
		}
		return
	}
	if err != nil {
		c.s.log.Warn("coalesced hold batch failed, retrying each hold alone", "size", len(live), "err", err)
		var wg sync.WaitGroup
		for _, w := range live {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, replayed, err := c.s.holdOne(w.ctx, w.h)
				w.done <- holdResult{r, replayed, err}
			}()
		}
		wg.Wait()
		return
	}
	for i, w := range live {
		w.done <- results[i]
	}
}

// holdBatch is the coalesced transaction for holds on one stock row.
func (s *Service) holdBatch(ctx context.Context, ws []*waiter) ([]holdResult, error) {
	results := make([]holdResult, len(ws))
	line0 := ws[0].h.lines[0]
	var (
		p       db.ReservationInsertManyParams
		granted []int
		failed  []uuid.UUID
	)
	for _, w := range ws {
		h := w.h
		p.Ids = append(p.Ids, h.id)
		p.Clients = append(p.Clients, h.req.Client)
		p.IdempotencyKeys = append(p.IdempotencyKeys, h.req.IdempotencyKey)
		p.RequestHashes = append(p.RequestHashes, h.hash)
		p.OrderRefs = append(p.OrderRefs, h.req.OrderRef)
		p.Campaigns = append(p.Campaigns, h.req.Campaign)
		p.TtlSeconds = append(p.TtlSeconds, h.ttl)
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := db.New(tx)

	rows, err := q.ReservationInsertMany(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("insert reservations: %w", err)
	}
	inserted := make(map[uuid.UUID]db.Reservation, len(rows))
	for _, r := range rows {
		inserted[r.ID] = r
	}

	st, err := q.StockLock(ctx, line0.SKU, line0.Pool)
	onSale := err == nil && st.Status == StockOnSale
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("lock %s/%s: %w", line0.SKU, line0.Pool, err)
	}
	left, sum := st.Available, int64(0)
	for i, w := range ws {
		if _, ok := inserted[w.h.id]; !ok {
			continue // the key was used before: answered after commit
		}
		qty := w.h.lines[0].Quantity
		if onSale && qty <= left {
			left -= qty
			sum += qty
			granted = append(granted, i)
		} else {
			failed = append(failed, w.h.id)
		}
	}
	if len(failed) > 0 {
		if err := q.ReservationsDelete(ctx, failed); err != nil {
			return nil, fmt.Errorf("drop refused holds: %w", err)
		}
	}
	if len(granted) > 0 {
		version, err := q.StockReserve(ctx, sum, line0.SKU, line0.Pool)
		if err != nil {
			return nil, fmt.Errorf("reserve %s/%s: %w", line0.SKU, line0.Pool, err)
		}
		ids := make([]uuid.UUID, len(granted))
		lines := make([][]Line, len(granted))
		jobs := make([]river.InsertManyParams, len(granted))
		for j, i := range granted {
			h := ws[i].h
			ids[j], lines[j] = h.id, h.lines
			jobs[j] = river.InsertManyParams{
				Args:       ReleaseHoldArgs{ReservationID: h.id},
				InsertOpts: &river.InsertOpts{ScheduledAt: inserted[h.id].ExpiresAt},
			}
		}
		if err := insertLines(ctx, q, ids, lines); err != nil {
			return nil, err
		}
		if err := appendLedger(ctx, q, ids, []Line{line0}, []int64{version}, movement{kind: "reserve", available: -1, reserved: +1}); err != nil {
			return nil, err
		}
		if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
			return nil, fmt.Errorf("enqueue release_hold: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit hold batch: %w", err)
	}

	for _, i := range granted {
		h := ws[i].h
		results[i] = holdResult{r: newReservation(inserted[h.id], h.lines)}
	}
	for i, w := range ws {
		if _, ok := inserted[w.h.id]; ok {
			if results[i].r.ID == uuid.Nil {
				results[i] = holdResult{err: s.whyNot(ctx, w.h.lines[0])}
			}
			continue
		}
		r, replayed, err := s.replay(ctx, w.h.req.Client, w.h.req.IdempotencyKey, w.h.hash)
		if err == nil && !replayed {
			// Its key's first use was refused in this very batch: decide
			// this one on its own.
			r, replayed, err = s.holdOne(w.ctx, w.h)
		}
		results[i] = holdResult{r, replayed, err}
	}
	return results, nil
}
