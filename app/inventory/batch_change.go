package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/stock"
)

// changeCall is one caller's confirm or release waiting for its batch.
type changeCall struct {
	ctx      context.Context
	id       uuid.UUID
	by       Caller
	confirm  bool   // or release
	reason   string // of a release
	key      []string
	done     chan changeResult
	timeouts int
}

type changeResult struct {
	r   Reservation
	err error
}

func (c *changeCall) lockTimeouts() *int { return &c.timeouts }
func (c *changeCall) Keys() []string     { return c.key }
func (c *changeCall) Gone() bool         { return c.ctx.Err() != nil }
func (c *changeCall) Answer(err error)   { c.reply(changeResult{err: err}) }

func (c *changeCall) reply(r changeResult) {
	select {
	case c.done <- r:
	default:
	}
}

func (s *Service) changeBatched(ctx context.Context, c *changeCall) (Reservation, error) {
	c.ctx, c.key, c.done = ctx, []string{c.id.String()}, make(chan changeResult, 1)
	if r, err, ok := s.joinRow(ctx, c); ok {
		return r, err
	}
	s.changes.Submit(c)
	select {
	case res := <-c.done:
		return res.r, res.err
	case <-ctx.Done():
		return Reservation{}, ctx.Err()
	}
}

// runChanges runs one batch of confirms and releases and answers them.
// When the transaction fails as a whole, the batch failure policy answers
// each caller as a transaction of its own would have been answered (see
// failurePolicy).
func (s *Service) runChanges(ctx context.Context, calls []*changeCall) []*changeCall {
	err := s.changeBatch(ctx, calls)
	if err == nil {
		return nil
	}
	return failurePolicy[*changeCall]{s: s, kind: "confirm/release", attempt: s.runChanges, lockTimedOut: s.changesLockTimedOut,
		subject: func(c *changeCall) string { return c.id.String() }, answerRefusal: true}.failed(ctx, calls, err)
}

// changesLockTimedOut is a confirm/release batch's answer to its lock
// timeout. The first time, everyone goes again: a request may only have
// queued behind another batch that waited. The second time, those whose
// rows are still locked answer busy.
func (s *Service) changesLockTimedOut(ctx context.Context, calls []*changeCall) []*changeCall {
	ids := make([]uuid.UUID, len(calls))
	for i, c := range calls {
		ids[i] = c.id
	}
	locked, perr := s.lockedHolds(ctx, ids)
	if perr != nil {
		s.log.Warn("confirm/release batch hit its lock timeout; finding the locked rows failed", "err", perr)
	}
	var rest []*changeCall
	for _, c := range calls {
		c.timeouts++
		why, onLocked := locked[c.id]
		switch {
		case onLocked && c.timeouts >= maxLockTimeouts:
			c.Answer(s.lockWaits.Answered(why))
		case c.timeouts > maxLockTimeouts:
			c.Answer(&domain.Error{Code: domain.CodeBusy, Detail: fmt.Sprintf("reservation %s is locked by another transaction; retry in a moment", c.id)})
		default:
			rest = append(rest, c)
		}
	}
	if len(rest) > 0 {
		return s.runChanges(ctx, rest)
	}
	return nil
}

// changeBatch is one transaction for many confirms and releases, in two
// round trips, following the rule of every change to a hold (see
// change.go):
//
//  1. lock the holds (id order) and read their lines (round trip 1);
//  2. decideCalls, in Go, in arrival order, as one after the other would
//     have been decided alone;
//  3. write the changes in one statement, read the changed holds back, and
//     commit (round trip 2);
//  4. answer each caller.
func (s *Service) changeBatch(ctx context.Context, calls []*changeCall) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer batch.Rollback(conn)
	defer s.timeBatch(holdstats.BatchChange, time.Now())

	holds, err := s.lockForChange(ctx, conn, calls)
	if err != nil {
		return err
	}
	ch, errs := decideCalls(calls, holds)
	after, err := s.writeChanges(ctx, conn, &ch)
	if err != nil {
		return err
	}
	for _, r := range after {
		holds[r.ID].row = r
	}
	for i, c := range calls {
		if errs[i] != nil {
			c.Answer(errs[i])
			continue
		}
		h := holds[c.id]
		c.reply(changeResult{r: newReservation(h.row, h.lines)})
	}
	return nil
}

// lockForChange is a change batch's first round trip: begin, set the lock
// timeout, lock the calls' holds and read their lines.
func (s *Service) lockForChange(ctx context.Context, conn *pgx.Conn, calls []*changeCall) (map[uuid.UUID]*lockedHold, error) {
	ids := make([]uuid.UUID, 0, len(calls))
	seen := map[uuid.UUID]bool{}
	for _, c := range calls {
		if !seen[c.id] {
			seen[c.id] = true
			ids = append(ids, c.id)
		}
	}
	p := batch.NewPipe(conn)
	q := db.New(p)
	p.Begin()
	q.BatchSettingsSet(ctx, []string{s.lockTimeout})
	lock := queueLock(ctx, q, ids)
	var holds map[uuid.UUID]*lockedHold
	if err := p.RoundTrip(ctx, func() { holds = lock.read() }); err != nil {
		return nil, fmt.Errorf("lock holds: %w", err)
	}
	return holds, nil
}

// decideCalls decides a change batch's calls in arrival order against the
// holds as locked, each seeing what the ones before it decided: the
// changes to write, and per call the error it answers (nil: the hold as it
// ends up). A confirm answers a hold that does not end up confirmed with
// reservation_not_held, a release one that ends up confirmed.
func decideCalls(calls []*changeCall, holds map[uuid.UUID]*lockedHold) (changes, []error) {
	var ch changes
	errs := make([]error, len(calls))
	for i, c := range calls {
		h, ok := holds[c.id]
		if !ok || !c.by.maySee(h.row.Client) {
			errs[i] = domain.Missing("reservation")
			continue
		}
		how := Outcome{Status: StatusReleased, Kind: stock.LedgerRelease, Actor: c.by.Name, Reason: c.reason}
		if c.confirm {
			how = Outcome{Status: StatusConfirmed, Kind: stock.LedgerConfirm, Actor: c.by.Name}
		}
		change, err := how.decide(h)
		if err != nil {
			errs[i] = err
			continue
		}
		if change != nil {
			ch.add(change)
			h.row.Status = string(change.how.Status)
		}
		switch status := HoldStatus(h.row.Status); {
		case c.confirm && status != StatusConfirmed, !c.confirm && status == StatusConfirmed:
			errs[i] = errNotHeld(c.id, status)
		}
	}
	return ch, errs
}

// writeChanges is a change batch's second round trip: write the changes,
// read the changed holds back, commit.
func (s *Service) writeChanges(ctx context.Context, conn *pgx.Conn, ch *changes) ([]db.Reservation, error) {
	p := batch.NewPipe(conn)
	q := db.New(p)
	writing := ch.queue(ctx, q)
	var rereading *db.ReservationsGetManyBatchResults
	if writing != nil {
		rereading = q.ReservationsGetMany(ctx, [][]uuid.UUID{ch.p.Ids})
	}
	p.Commit()
	var after []db.Reservation
	err := p.RoundTrip(ctx, func() {
		if writing != nil {
			ch.readSoldShort()
			after, _ = batch.Collect(rereading.Query)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("change holds: %w", err)
	}
	ch.count(s.rec)
	s.forgetPutBack(ch)
	s.soldShort(ctx, ch)
	return after, nil
}

// lockedHolds returns, for the holds among ids that another transaction
// has locked (the hold itself or a stock row of its lines), the busy answer
// its confirm or release gets. It looks without waiting.
func (s *Service) lockedHolds(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]error, error) {
	var (
		free  []uuid.UUID
		lines []db.ReservationLine
	)
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		if free, err = q.ReservationsFree(ctx, ids); err != nil {
			return err
		}
		lines, err = q.ReservationLinesGet(ctx, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look for locked holds: %w", err)
	}
	out := map[uuid.UUID]error{}
	for _, id := range ids {
		out[id] = &domain.Error{Code: domain.CodeBusy, Detail: fmt.Sprintf("reservation %s is locked by another transaction; retry in a moment", id)}
	}
	for _, id := range free {
		delete(out, id)
	}
	rows := map[string]Line{}
	for _, l := range lines {
		rows[rowKey(l.Sku, l.Location, l.Pool)] = Line{SKU: l.Sku, Location: l.Location, Pool: l.Pool}
	}
	locked, err := s.lockedStock(ctx, rows)
	if err != nil {
		return out, err
	}
	for _, l := range lines {
		if row, ok := locked[rowKey(l.Sku, l.Location, l.Pool)]; ok {
			if _, already := out[l.ReservationID]; !already {
				out[l.ReservationID] = errBusy(row)
			}
		}
	}
	return out, nil
}
