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
	"github.com/stockhold/stockhold/app/metrics"
)

// Release says how and why holds end when they are handed back.
type Release struct {
	// Status is StatusReleased or StatusExpired.
	Status string
	// Kind is the ledger kind: "release", "expire" or "rollback".
	Kind   string
	Actor  string
	Reason string
}

// Releases of the system's own making.
var (
	releaseByExpiry    = Release{Status: StatusExpired, Kind: "expire", Actor: "system:expire_holds", Reason: "hold expired"}
	releaseByExpiryJob = Release{Status: StatusExpired, Kind: "expire", Actor: "system:release_hold", Reason: "hold expired"}
	releaseBySweeper   = Release{Status: StatusExpired, Kind: "expire", Actor: "system:sweep_expired", Reason: "hold expired (sweeper)"}
	releaseOnConfirm   = Release{Status: StatusExpired, Kind: "expire", Actor: "system:confirm", Reason: "hold expired before payment was confirmed"}
)

// change is what ReservationsChange does to a set of holds, one entry each.
type change struct{ db.ReservationsChangeParams }

func (c *change) add(id uuid.UUID, status, kind, actor, reason string) {
	c.Ids = append(c.Ids, id)
	c.Statuses = append(c.Statuses, status)
	c.Kinds = append(c.Kinds, kind)
	c.Actors = append(c.Actors, actor)
	c.Reasons = append(c.Reasons, reason)
}

// countReleases counts, once committed, the holds the change handed back.
func (c *change) countReleases() {
	for i, status := range c.Statuses {
		if status != StatusConfirmed {
			metrics.Released(status, c.Kinds[i], c.Actors[i], 1)
		}
	}
}

// ReleaseTx hands back the stock of every hold among ids that is still held,
// inside the caller's transaction, and returns the ids it released. It is the
// one release every path goes through (cancel, expiry, sweeper, campaign
// end, manual rollback): a hold that is no longer held is skipped, so no
// path can hand stock back twice. It is one statement whatever the number
// of holds; it locks them in id order and their stock rows in (sku, pool)
// byte order, the order every other writer uses.
func ReleaseTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, how Release) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var c change
	for _, id := range ids {
		c.add(id, how.Status, how.Kind, how.Actor, how.Reason)
	}
	released, err := collect(db.New(tx).ReservationsChange(ctx, []db.ReservationsChangeParams{c.ReservationsChangeParams}).Query)
	if err != nil {
		return nil, fmt.Errorf("release holds: %w", err)
	}
	metrics.Released(how.Status, how.Kind, how.Actor, len(released))
	return released, nil
}

// Confirm turns a held reservation into a sale. Confirming a confirmed hold
// again succeeds with the same answer; a hold that was released or expired
// (including one found past its expiry now, which this expires) is refused
// with its status, so a late payment never resurrects stock that was handed
// back. Confirms are group-committed with other confirms and releases.
func (s *Service) Confirm(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	return s.changeBatched(ctx, &changeCall{id: id, by: by, confirm: true})
}

// Cancel releases a held reservation at the shop's request. Releasing it
// again answers the same; a confirmed hold is refused with its status; one
// that expired meanwhile is answered as it is, since its stock is back.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID, by Caller, reason string) (Reservation, error) {
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
				c.answer(why)
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
	}
	for _, c := range calls {
		c.answer(err)
	}
	return nil
}

// changeBatch is one transaction for many confirms and releases, in two
// round trips: lock the holds (id order) and read their lines; then,
// decided in Go in arrival order, as one after the other would have been,
// sell or end the held ones, move their stock and write their ledger rows
// in one statement, read them back, and commit.
func (s *Service) changeBatch(ctx context.Context, calls []*changeCall) error {
	ids := make([]uuid.UUID, 0, len(calls))
	seen := map[uuid.UUID]bool{}
	for _, c := range calls {
		if !seen[c.id] {
			seen[c.id] = true
			ids = append(ids, c.id)
		}
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(conn)

	p := newPipe(conn)
	q := db.New(p)
	p.begin()
	timeout := q.BatchSettingsSet(ctx, []string{s.lockTimeout})
	locking := q.ReservationsLockMany(ctx, [][]uuid.UUID{ids})
	reading := q.ReservationLinesGetMany(ctx, [][]uuid.UUID{ids})
	p.send(ctx)
	_ = done(timeout.Exec)
	holds, _ := collect(locking.Query)
	lines, _ := collect(reading.Query)
	if err := p.close(); err != nil {
		return wrapf(err, "lock holds")
	}

	type state struct {
		row   db.Reservation
		due   bool
		lines []Line
	}
	states := make(map[uuid.UUID]*state, len(holds))
	for _, h := range holds {
		states[h.Reservation.ID] = &state{row: h.Reservation, due: h.Due}
	}
	for _, l := range lines {
		if st := states[l.ReservationID]; st != nil {
			st.lines = append(st.lines, Line{SKU: l.Sku, Pool: l.Pool, Quantity: l.Quantity})
		}
	}
	// Each call's outcome: an error, or the hold's row as it ends up.
	errs := make([]error, len(calls))
	var ch change
	for i, c := range calls {
		st, ok := states[c.id]
		if !ok || !c.by.maySee(st.row.Client) {
			errs[i] = domain.Missing("reservation")
			continue
		}
		status := st.row.Status
		switch {
		case c.confirm && status == StatusHeld && st.due:
			// Held but past its expiry: its stock belongs to others again,
			// whether or not the expiry loop got to it yet. Expire it now.
			ch.add(c.id, StatusExpired, releaseOnConfirm.Kind, releaseOnConfirm.Actor, releaseOnConfirm.Reason)
			st.row.Status = StatusExpired
			errs[i] = errNotHeld(c.id, StatusExpired)
		case c.confirm && status == StatusHeld:
			ch.add(c.id, StatusConfirmed, "confirm", c.by.Name, "")
			st.row.Status = StatusConfirmed
		case c.confirm && status != StatusConfirmed:
			errs[i] = errNotHeld(c.id, status)
		case !c.confirm && status == StatusConfirmed:
			errs[i] = errNotHeld(c.id, status)
		case !c.confirm && status == StatusHeld:
			ch.add(c.id, StatusReleased, "release", c.by.Name, c.reason)
			st.row.Status = StatusReleased
		}
	}

	p = newPipe(conn)
	q = db.New(p)
	var changing *db.ReservationsChangeBatchResults
	var rereading *db.ReservationsGetManyBatchResults
	if len(ch.Ids) > 0 {
		changing = q.ReservationsChange(ctx, []db.ReservationsChangeParams{ch.ReservationsChangeParams})
		rereading = q.ReservationsGetMany(ctx, [][]uuid.UUID{ch.Ids})
	}
	p.commit()
	p.send(ctx)
	var (
		changed []uuid.UUID
		after   []db.Reservation
	)
	if changing != nil {
		changed, _ = collect(changing.Query)
		after, _ = collect(rereading.Query)
	}
	if err := p.close(); err != nil {
		return wrapf(err, "change holds")
	}
	ch.countReleases()
	if len(changed) != len(ch.Ids) {
		// Every hold changed was held and locked by this transaction.
		return fmt.Errorf("changed %d of %d locked holds", len(changed), len(ch.Ids))
	}
	for _, r := range after {
		states[r.ID].row = r
	}
	for i, c := range calls {
		if errs[i] != nil {
			c.answer(errs[i])
			continue
		}
		st := states[c.id]
		c.reply(changeResult{r: newReservation(st.row, st.lines)})
	}
	return nil
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
		rows[rowKey(l.Sku, l.Pool)] = Line{SKU: l.Sku, Pool: l.Pool}
	}
	locked, err := s.lockedStock(ctx, rows)
	if err != nil {
		return out, err
	}
	for _, l := range lines {
		if row, ok := locked[rowKey(l.Sku, l.Pool)]; ok {
			if _, already := out[l.ReservationID]; !already {
				out[l.ReservationID] = errBusy(row)
			}
		}
	}
	return out, nil
}

// ErrNotYetExpired is returned by Expire for a hold whose time has not come;
// Remaining says how long to wait.
type ErrNotYetExpired struct{ Remaining time.Duration }

func (e *ErrNotYetExpired) Error() string { return fmt.Sprintf("hold expires in %s", e.Remaining) }

// Expire ends hold id if it is still held and past its expiry; it is what a
// release_hold job left over from an earlier version runs. A hold that
// already ended is left alone. It reports whether this call released it.
func (s *Service) Expire(ctx context.Context, id uuid.UUID) (bool, error) {
	var released bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := db.New(tx).ReservationExpiry(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && r.Status != StatusHeld {
			return nil
		}
		if err != nil {
			return err
		}
		if r.RemainingSeconds > 0 {
			return &ErrNotYetExpired{Remaining: time.Duration(r.RemainingSeconds * float64(time.Second))}
		}
		ids, err := ReleaseTx(ctx, tx, []uuid.UUID{id}, releaseByExpiryJob)
		released = len(ids) == 1
		return err
	})
	return released, err
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
