package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Confirm turns a held reservation into a sale. Confirming a confirmed hold
// again succeeds with the same answer; a hold that was released or expired
// (including one found past its expiry now, which this expires) is refused
// with its status, so a late payment never resurrects stock that was handed
// back. Confirms are group-committed with other confirms and releases.
//
// A confirm refused because the hold was released or expired is a late
// payment: it also raises a late_confirmation alert (see lateConfirmation),
// and Reinstate can hold the same lines again.
func (s *Service) Confirm(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	start := time.Now()
	r, err := s.changeBatched(ctx, &changeCall{id: id, by: by, confirm: true})
	s.confirmTimes.add(time.Since(start), r.Lines())
	var de *domain.Error
	if errors.As(err, &de) && de.Code == domain.CodeNotHeld && (de.Status == StatusReleased || de.Status == StatusExpired) {
		s.lateConfirmation(ctx, id, by)
	}
	return r, err
}

// Release releases a held reservation at the shop's request. Releasing it
// again answers the same; a confirmed hold is refused with its status; one
// that expired meanwhile is answered as it is, since its stock is back, and
// one found past its expiry is expired rather than released (a change to
// an overdue hold expires it, whatever was asked).
func (s *Service) Release(ctx context.Context, id uuid.UUID, by Caller, reason string) (Reservation, error) {
	if err := domain.ValidText("reason", reason, domain.MaxTextLength); err != nil {
		return Reservation{}, err
	}
	if reason == "" {
		reason = "cancelled"
	}
	return s.changeBatched(ctx, &changeCall{id: id, by: by, reason: reason})
}

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

func (c *changeCall) keys() []string   { return c.key }
func (c *changeCall) gone() bool       { return c.ctx.Err() != nil }
func (c *changeCall) answer(err error) { c.reply(changeResult{err: err}) }

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
	s.changes.submit(c)
	select {
	case res := <-c.done:
		return res.r, res.err
	case <-ctx.Done():
		return Reservation{}, ctx.Err()
	}
}

// runChanges runs one batch of confirms and releases and answers them.
func (s *Service) runChanges(ctx context.Context, calls []*changeCall) []*changeCall {
	err := s.changeBatch(ctx, calls)
	if err == nil {
		return nil
	}
	switch classify(ctx, err) {
	case failLock:
		ids := make([]uuid.UUID, len(calls))
		for i, c := range calls {
			ids[i] = c.id
		}
		locked, perr := s.lockedHolds(ctx, ids)
		if perr != nil {
			s.log.Warn("confirm/release batch hit its lock timeout; finding the locked rows failed", "err", perr)
		}
		// The first time, everyone goes again: a request may only have
		// queued behind another batch that waited. The second time, those
		// whose rows are still locked answer busy.
		var rest []*changeCall
		for _, c := range calls {
			c.timeouts++
			why, onLocked := locked[c.id]
			switch {
			case onLocked && c.timeouts >= maxLockTimeouts:
				c.answer(s.lockWaits.answered(why))
			case c.timeouts > maxLockTimeouts:
				c.answer(&domain.Error{Code: domain.CodeBusy, Detail: fmt.Sprintf("reservation %s is locked by another transaction; retry in a moment", c.id)})
			default:
				rest = append(rest, c)
			}
		}
		if len(rest) > 0 {
			return s.runChanges(ctx, rest)
		}
		return nil
	case failRetry:
		if calls[0].timeouts < maxLockTimeouts {
			for _, c := range calls {
				c.timeouts++
			}
			return s.runChanges(ctx, calls)
		}
	case failSlow:
		err = errSlow
	case failStatement:
		if len(calls) > 1 {
			half := len(calls) / 2
			return append(s.runChanges(ctx, calls[:half]), s.runChanges(ctx, calls[half:])...)
		}
		if refusal, ok := refused(err); ok {
			s.refusedByDatabase(ctx, "confirm/release", calls[0].id.String(), err)
			err = refusal
		}
	}
	for _, c := range calls {
		c.answer(err)
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
	defer rollback(conn)
	defer s.timeBatch(BatchChange, time.Now())

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
			c.answer(errs[i])
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
	p := newPipe(conn)
	q := db.New(p)
	p.begin()
	q.BatchSettingsSet(ctx, []string{s.lockTimeout})
	lock := queueLock(ctx, q, ids)
	var holds map[uuid.UUID]*lockedHold
	if err := p.roundTrip(ctx, func() { holds = lock.read() }); err != nil {
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
		how := Outcome{Status: StatusReleased, Kind: "release", Actor: c.by.Name, Reason: c.reason}
		if c.confirm {
			how = Outcome{Status: StatusConfirmed, Kind: "confirm", Actor: c.by.Name}
		}
		change, err := how.decide(h)
		if err != nil {
			errs[i] = err
			continue
		}
		if change != nil {
			ch.add(change)
			h.row.Status = change.how.Status
		}
		switch status := h.row.Status; {
		case c.confirm && status != StatusConfirmed, !c.confirm && status == StatusConfirmed:
			errs[i] = errNotHeld(c.id, status)
		}
	}
	return ch, errs
}

// writeChanges is a change batch's second round trip: write the changes,
// read the changed holds back, commit.
func (s *Service) writeChanges(ctx context.Context, conn *pgx.Conn, ch *changes) ([]db.Reservation, error) {
	p := newPipe(conn)
	q := db.New(p)
	writing := ch.queue(ctx, q)
	var rereading *db.ReservationsGetManyBatchResults
	if writing != nil {
		rereading = q.ReservationsGetMany(ctx, [][]uuid.UUID{ch.p.Ids})
	}
	p.commit()
	var after []db.Reservation
	err := p.roundTrip(ctx, func() {
		if writing != nil {
			ch.readSoldShort()
			after, _ = collect(rereading.Query)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("change holds: %w", err)
	}
	ch.count(s.rec)
	s.soldOut.forgetLines(ch)
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
	err := s.inTx(ctx, func(tx pgx.Tx) error {
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

// inTx runs fn in a transaction, committing when it returns nil. Such a
// transaction may put stock back on a row: no hold is refused from memory
// on a read made before it (see soldout.go).
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, fn)
	s.soldOut.written()
	return err
}

// InTx is inTx for another package's transaction that puts stock back
// through inventory's functions (a campaign's finish giving its pools back
// to main): once it ends, this instance refuses no hold from memory on a
// read made before it, as after the service's own writes.
func (s *Service) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTx(ctx, fn)
}
