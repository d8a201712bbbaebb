package inventory

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/leader"
)

// ExpiryBatch is how many holds one expiry transaction releases.
const ExpiryBatch = 1000

// SweepBatch is how many holds a bulk repair (reconciliation) releases per
// transaction.
const SweepBatch = 100

// ExpiryRun is what one run of the expiry loop did; the expire_holds job
// records it as its output, so DBAs see it in river_job.
type ExpiryRun struct {
	Released int `json:"released"`
	// WithHolds is how many of those expired in the transactions of the
	// hold batches of hot rows (expireWithHolds) rather than the loop's own.
	WithHolds int `json:"with_holds,omitempty"`
	Passes    int `json:"passes"`
	// Waited is how long the run waited for the previous one to hand over.
	Waited string `json:"waited,omitempty"`
	// Skipped means another runner kept the expiry lock all along.
	Skipped bool `json:"skipped,omitempty"`
}

// ExpireLoop releases holds as they expire until the time until (or ctx
// ends): one set-based pass over every due hold (in transactions of
// ExpiryBatch), then a sleep of at most ExpiryTick, and again. One loop
// runs at a time across every instance, under an advisory lock held by its
// connection's session; a loop that finds the lock taken waits for it
// until until, so the next run takes over where the previous one stops.
// A hold thus expires at most about ExpiryTick late however many expire
// together, where a job per hold would wait its turn in the job queue.
func (s *Service) ExpireLoop(ctx context.Context, until time.Time) (ExpiryRun, error) {
	var run ExpiryRun
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return run, err
	}
	defer pc.Release()
	conn := pc.Conn()
	q := db.New(conn)
	lock := leader.Lock{Name: "expiry", Try: q.ExpiryLockTry, Unlock: q.ExpiryUnlock}
	skip := map[string]Line{}
	lr, err := leader.Loop(ctx, conn, lock, until, s.cfg.ExpiryTick, func(ctx context.Context) error {
		n, withHolds, err := s.expireDue(ctx, conn, releaseByExpiry, 0, skip)
		run.Released += n
		run.WithHolds += withHolds
		return err
	})
	run.Passes, run.Skipped = lr.Passes, lr.Skipped
	if lr.Waited > 10*time.Millisecond {
		run.Waited = lr.Waited.Round(time.Millisecond).String()
	}
	return run, err
}

// SweepExpired releases every hold more than grace past its expiry and
// returns how many it released: the backstop for holds the expiry loop did
// not get to (it was not running, or a row they need was locked).
func (s *Service) SweepExpired(ctx context.Context, grace time.Duration) (int, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer pc.Release()
	n, _, err := s.expireDue(ctx, pc.Conn(), releaseBySweeper, grace, map[string]Line{})
	return n, err
}

// expireDue releases the holds more than grace past their expiry on conn.
// Those on stock rows this process's hold batches are busy with (hot), or
// on rows found locked by another transaction (skip, from a pass before),
// go with those rows' hold batches (expireWithHolds): a transaction of the
// expiry's own would wait for the rows' locks behind the hold batches, or
// hold them up. The rest go ExpiryBatch per transaction of its own, until
// none is left; a row one of those finds locked past the (short) expiry
// lock timeout joins skip, and its holds go with the hold batches too. It
// returns how many expired, and how many of those with the hold batches.
func (s *Service) expireDue(ctx context.Context, conn *pgx.Conn, how Outcome, grace time.Duration, skip map[string]Line) (total, withHolds int, err error) {
	unexplained := 0
	hot := s.hot.now(time.Now())
	maps.Copy(hot, skip)
	clear(skip)
	if len(hot) > 0 {
		n, err := s.expireWithHolds(ctx, conn, how, grace, hot)
		total, withHolds = total+n, withHolds+n
		if err != nil {
			return total, withHolds, err
		}
	}
	for {
		n, ids, err := s.expirePass(ctx, conn, how, grace, hot)
		total += n
		switch {
		case err != nil && classify(ctx, err) == failLock:
			locked, perr := s.lockedOf(ctx, ids)
			if perr != nil {
				return total, withHolds, perr
			}
			if len(locked) == 0 {
				if unexplained++; unexplained > maxLockTimeouts {
					return total, withHolds, err
				}
				continue // it went away meanwhile
			}
			maps.Copy(skip, locked)
			maps.Copy(hot, locked)
			n, err := s.expireWithHolds(ctx, conn, how, grace, locked)
			total, withHolds = total+n, withHolds+n
			if err != nil {
				return total, withHolds, err
			}
			continue
		case err != nil:
			return total, withHolds, err
		case n < ExpiryBatch:
			return total, withHolds, nil
		}
	}
}

// expiryChunk is how many due holds one call to the hold batches carries;
// expiryChunks how many such calls go at once (each batch takes those
// waiting, so about as many holds expire with each batch of a hot row:
// measured on one SKU at 6,500 holds/s, two of 128 kept pace only just,
// and holds waited up to 1.2 s); expiryRounds bounds the reads of due
// holds one pass hands over.
const (
	expiryChunk  = 200
	expiryChunks = 3
	expiryRounds = 10
)

// expireWithHolds hands the holds more than grace past their expiry with a
// line on one of rows to the hold batches of their rows (see batch_joined.go),
// expiryChunk a call, and waits for them: they expire in the transaction
// of the next hold batch on those rows, by the rule every change to a hold
// follows. It returns how many expired. A call answered busy (the rows
// stayed locked by another transaction) leaves its holds for a later pass.
func (s *Service) expireWithHolds(ctx context.Context, conn *pgx.Conn, how Outcome, grace time.Duration, rows map[string]Line) (int, error) {
	var on db.ReservationsDueOnParams
	on.GraceSeconds, on.Lim, on.Scan = grace.Seconds(), ExpiryBatch, 4*ExpiryBatch
	for _, l := range rows {
		on.Skus = append(on.Skus, l.SKU)
		on.Locations = append(on.Locations, l.Location)
		on.Pools = append(on.Pools, l.Pool)
	}
	total := 0
	for range expiryRounds {
		due, err := db.New(conn).ReservationsDueOn(ctx, on)
		if err != nil {
			return total, fmt.Errorf("due holds on hot rows: %w", err)
		}
		var ids []uuid.UUID
		rowsOf := map[uuid.UUID][]want{}
		for _, d := range due {
			if _, ok := rowsOf[d.ID]; !ok {
				ids = append(ids, d.ID)
			}
			rowsOf[d.ID] = append(rowsOf[d.ID], want{SKU: d.Sku, Location: d.Location, Pool: d.Pool})
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, busy := s.expireInChunks(ctx, how, ids, rowsOf)
		total += n
		if busy || n == 0 || len(ids) < ExpiryBatch {
			return total, nil
		}
	}
	return total, nil
}

// expireInChunks sends ids to the hold batches, expiryChunk a call and
// expiryChunks calls at a time, and returns how many expired and whether a
// call was refused (busy, or its batch failed).
func (s *Service) expireInChunks(ctx context.Context, how Outcome, ids []uuid.UUID, rowsOf map[uuid.UUID][]want) (int, bool) {
	var (
		calls []*holdCall
		total int
		busy  bool
	)
	wait := func(c *holdCall) {
		select {
		case res := <-c.done:
			total += res.joined.expired
			if res.err != nil {
				busy = true
				s.log.Warn("expiry with the hold batches of hot rows failed; a later pass retries", "err", res.err)
			}
		case <-ctx.Done():
			busy = true
		}
	}
	for from := 0; from < len(ids); from += expiryChunk {
		chunk := ids[from:min(from+expiryChunk, len(ids))]
		seen := map[string]bool{}
		var rows []want
		for _, id := range chunk {
			for _, w := range rowsOf[id] {
				if !seen[w.key()] {
					seen[w.key()] = true
					rows = append(rows, w)
				}
			}
		}
		c := joinedCall(ctx, rows, &joined{expire: chunk, how: how})
		s.rowBatches.holds.Submit(c)
		calls = append(calls, c)
		if len(calls) == expiryChunks {
			wait(calls[0])
			calls = calls[1:]
		}
		if busy {
			break
		}
	}
	for _, c := range calls {
		wait(c)
	}
	return total, busy
}

// expirePass is one expiry transaction in three round trips: pick and lock
// up to ExpiryBatch due holds, skipping any another transaction is working
// on; read their lines (the rule of every change to a hold, see change.go);
// then expire them in one statement and commit. It returns how many it
// expired, or on failure the holds it had picked.
func (s *Service) expirePass(ctx context.Context, conn *pgx.Conn, how Outcome, grace time.Duration, skip map[string]Line) (int, []uuid.UUID, error) {
	defer batch.Rollback(conn)
	due := db.ReservationsDueParams{GraceSeconds: grace.Seconds(), Lim: ExpiryBatch}
	for _, l := range skip {
		due.SkipSkus = append(due.SkipSkus, l.SKU)
		due.SkipLocations = append(due.SkipLocations, l.Location)
		due.SkipPools = append(due.SkipPools, l.Pool)
	}
	p := batch.NewPipe(conn)
	q := db.New(p)
	p.Begin()
	q.BatchSettingsSet(ctx, []string{s.expiryLockTimeout})
	picking := q.ReservationsDue(ctx, []db.ReservationsDueParams{due})
	var ids []uuid.UUID
	if err := p.RoundTrip(ctx, func() { ids, _ = batch.Collect(picking.Query) }); err != nil {
		return 0, nil, fmt.Errorf("pick due holds: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil, nil // rollback (deferred) ends the transaction
	}

	p = batch.NewPipe(conn)
	lock := queueLock(ctx, db.New(p), ids) // locked already: this reads them, and their lines after
	var holds map[uuid.UUID]*lockedHold
	if err := p.RoundTrip(ctx, func() { holds = lock.read() }); err != nil {
		return 0, ids, fmt.Errorf("read due holds: %w", err)
	}
	var ch changes
	for _, id := range ids {
		h, ok := holds[id]
		if !ok {
			continue
		}
		change, err := how.decide(h)
		if err != nil {
			return 0, ids, err
		}
		if change != nil {
			ch.add(change)
		}
	}
	p = batch.NewPipe(conn)
	ch.queue(ctx, db.New(p))
	p.Commit()
	if err := p.RoundTrip(ctx, nil); err != nil {
		return 0, ids, fmt.Errorf("expire due holds: %w", err)
	}
	ch.count(s.rec)
	s.forgetPutBack(&ch)
	return len(ch.list), nil, nil
}

// lockedOf returns the stock rows of holds ids that another transaction
// keeps locked.
func (s *Service) lockedOf(ctx context.Context, ids []uuid.UUID) (map[string]Line, error) {
	rows, err := db.New(s.pool).StockRowsOfReservations(ctx, ids)
	if err != nil {
		return nil, err
	}
	want := make(map[string]Line, len(rows))
	for _, r := range rows {
		want[rowKey(r.Sku, r.Location, r.Pool)] = Line{SKU: r.Sku, Location: r.Location, Pool: r.Pool}
	}
	return s.lockedStock(ctx, want)
}
