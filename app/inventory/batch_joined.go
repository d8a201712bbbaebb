package inventory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/stock"
)

// Changes that join a row's hold batch.
//
// A confirm, a release or an expiry of a hold whose stock rows a hold
// batch of this process is busy with goes with the next hold batch on
// those rows instead of a transaction of its own, which would only queue
// on the rows' locks behind the hold batches and take them in turn: one
// lock, one commit and its WAL flush a round for the holds and the
// changes together. In the batch, once its stock rows are locked, the
// holds to change are locked without waiting (ReservationsLockFree: the
// batch locks stock rows first, every other path holds first, so it must
// never wait for a hold), their lines are read in a later statement, and
// each is decided and written by the rule every change to a hold follows
// (change.go), ReservationsChange before the grants, so that what a
// release or expiry hands back is on the rows when the grants are checked.
// A hold the batch could not lock, or with a line on a row the batch did
// not lock, is not changed there: a confirm or release goes through the
// change batcher as it would have, an expiry is left to the expiry loop's
// own passes.

// joined is what a holdCall carries instead of a new hold.
type joined struct {
	// change is a confirm or a release.
	change *changeCall
	// expire are due holds to expire (how: releaseByExpiry, or the
	// sweeper's).
	expire []uuid.UUID
	how    Outcome
}

// joinedResult is a joined call's answer beside holdResult's.
type joinedResult struct {
	// again: the change was not made here; make it as if it had not come.
	again bool
	// expired counts the holds an expiry call expired.
	expired int
}

// joinedCall makes a holdCall of changes on the stock rows wants (each a
// row with its location): its keys are the rows' and their pools' at
// every location, so that it waits for the flights busy with either.
func joinedCall(ctx context.Context, rows []want, j *joined) *holdCall {
	c := &holdCall{ctx: ctx, h: hold{wants: rows}, done: make(chan holdResult, 1), joined: j}
	seen := map[string]bool{}
	for _, w := range rows {
		for _, k := range []string{w.key(), rowKey(w.SKU, "", w.Pool)} {
			if !seen[k] {
				seen[k] = true
				c.rows = append(c.rows, k)
			}
		}
	}
	return c
}

// joinRow sends confirm or release c with the next hold batch on its
// hold's rows when a hold batch is busy with them. It reports false when
// it did not: the hold's rows are not known to this process (it did not
// grant it lately), no hold batch is busy with them, or the batch could
// not change the hold; c then goes through the change batcher.
func (s *Service) joinRow(ctx context.Context, c *changeCall) (Reservation, error, bool) {
	rows, ok := s.recent.rowsOf(c.id)
	if !ok {
		return Reservation{}, nil, false
	}
	hc := joinedCall(ctx, rows, &joined{change: c})
	if !s.holds.InFlight(hc.rows) {
		return Reservation{}, nil, false
	}
	s.holds.Submit(hc)
	select {
	case res := <-hc.done:
		if res.joined.again {
			return Reservation{}, nil, false
		}
		return res.r, res.err, true
	case <-ctx.Done():
		return Reservation{}, ctx.Err(), true
	}
}

// joinedLock is the lock of a batch's joined holds and the read of their
// lines, queued on its first round trip after the stock rows are locked.
type joinedLock struct {
	locking *db.ReservationsLockFreeBatchResults
	reading *db.ReservationLinesGetManyBatchResults
}

func queueJoined(ctx context.Context, q *db.Queries, leaders []*holdCall) *joinedLock {
	var ids []uuid.UUID
	for _, c := range leaders {
		switch j := c.joined; {
		case j == nil:
		case j.change != nil:
			ids = append(ids, j.change.id)
		default:
			ids = append(ids, j.expire...)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	return &joinedLock{
		locking: q.ReservationsLockFree(ctx, [][]uuid.UUID{ids}),
		reading: q.ReservationLinesGetMany(ctx, [][]uuid.UUID{ids}),
	}
}

// read returns the holds locked, by id.
func (l *joinedLock) read() map[uuid.UUID]*lockedHold {
	if l == nil {
		return nil
	}
	free, _ := batch.Collect(l.locking.Query)
	lines, _ := batch.Collect(l.reading.Query)
	rows := make([]db.ReservationsLockManyRow, len(free))
	for i, r := range free {
		rows[i] = db.ReservationsLockManyRow(r)
	}
	return lockedHolds(rows, lines)
}

// joinedDecision is what a batch decided of its joined calls.
type joinedDecision struct {
	ch changes
	// errs are the answers of the joined confirms and releases (nil: the
	// hold as it ends up), again the joined calls not made here, expired
	// the holds each expiry call expires.
	errs    map[*holdCall]error
	again   map[*holdCall]bool
	expired map[*holdCall]int
	holds   map[uuid.UUID]*lockedHold
	// gaveUnits are the pools (poolKey) the changes hand units back to.
	gaveUnits map[string]bool
}

// decideJoined decides a batch's joined calls, in arrival order, against
// the holds as locked, and puts what releases and expiries hand back on
// the batch's rows (st), for its grants to take: less what pays the rows'
// short (held units a count found missing, which leave the books). A hold not locked, or
// with a line on a row the batch did not lock, is not changed here.
func decideJoined(calls []*holdCall, holds map[uuid.UUID]*lockedHold, st stockRows) joinedDecision {
	d := joinedDecision{errs: map[*holdCall]error{}, again: map[*holdCall]bool{}, expired: map[*holdCall]int{}, holds: holds}
	here := func(h *lockedHold) bool {
		for _, l := range h.lines {
			if _, ok := st.rows[rowKey(l.SKU, l.Location, l.Pool)]; !ok {
				return false
			}
		}
		return true
	}
	for _, c := range calls {
		j := c.joined
		if j.change != nil {
			h, ok := holds[j.change.id]
			if !ok || !here(h) {
				d.again[c] = true
				continue
			}
			ch, errs := decideCalls([]*changeCall{j.change}, holds)
			for _, one := range ch.list {
				d.ch.add(one)
			}
			d.errs[c] = errs[0]
			continue
		}
		for _, id := range j.expire {
			h, ok := holds[id]
			if !ok || !here(h) {
				continue
			}
			one, err := j.how.decide(h)
			if err != nil || one == nil {
				continue
			}
			d.ch.add(one)
			h.row.Status = string(one.how.Status)
			d.expired[c]++
		}
	}
	for _, one := range d.ch.list {
		if one.how.Kind == stock.LedgerConfirm {
			continue
		}
		for _, l := range one.lines {
			k := rowKey(l.SKU, l.Location, l.Pool)
			r := st.rows[k]
			// What a count found missing of the held units is paid first:
			// those leave the books, never back to available (as
			// ReservationsChange writes it).
			// A line's promised units go back to the row's promise, not
			// to available (backorders.go).
			onHand := l.Quantity - min(l.Quantity, l.Backordered)
			paid := min(r.short, onHand)
			r.short -= paid
			r.available += onHand - paid
			r.promise = r.promise.givenBack(l.Quantity - onHand)
			st.rows[k] = r
			if r.units == nil || len(l.Units) == 0 {
				continue
			}
			// A unit handed back may be named by a hold of the batch, or
			// picked by one: after the units read free (in seat order),
			// which did not have it.
			if d.gaveUnits == nil {
				d.gaveUnits = map[string]bool{}
			}
			d.gaveUnits[poolKey(l.SKU, l.Pool)] = true
			for _, id := range l.Units {
				if u, ok := r.units.named[id]; ok {
					u.status = stock.UnitAvailable
					r.units.named[id] = u
				}
				r.units.free = append(r.units.free, id)
			}
		}
	}
	return d
}

// answerJoined answers a committed batch's joined calls; after are the
// changed holds as read back before the commit.
func (d joinedDecision) answer(calls []*holdCall, after []db.Reservation) {
	for _, r := range after {
		if h := d.holds[r.ID]; h != nil {
			h.row = r
		}
	}
	for _, c := range calls {
		j := c.joined
		switch {
		case d.again[c]:
			c.reply(holdResult{joined: joinedResult{again: true}})
		case j.change != nil && d.errs[c] != nil:
			c.Answer(d.errs[c])
		case j.change != nil:
			h := d.holds[j.change.id]
			c.reply(holdResult{r: newReservation(h.row, h.lines)})
		default:
			c.reply(holdResult{joined: joinedResult{expired: d.expired[c]}})
		}
	}
}

// recentHolds are the stock rows of the holds this process granted
// lately, the last recentSize of them: what a confirm or release needs to
// know to join the hold batches of its rows (joinRow).
type recentHolds struct {
	mu   sync.Mutex
	rows map[uuid.UUID][]want
	ring []uuid.UUID
	next int
}

const recentSize = 1 << 15

func (r *recentHolds) add(id uuid.UUID, lines []Line) {
	rows := make([]want, len(lines))
	for i, l := range lines {
		rows[i] = want{SKU: l.SKU, Location: l.Location, Pool: l.Pool}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rows == nil {
		r.rows, r.ring = map[uuid.UUID][]want{}, make([]uuid.UUID, recentSize)
	}
	delete(r.rows, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % recentSize
	r.rows[id] = rows
}

func (r *recentHolds) rowsOf(id uuid.UUID) ([]want, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rows, ok := r.rows[id]
	return rows, ok
}

// hotRows are the stock rows this process's hold batches keep busy: locked
// by at least hotBatches hold batches within about the last second or two.
// The expiry loop hands the due holds on them to those batches (on a row
// that only a batch now and then locks, the loop's own transaction hardly
// ever meets one).
type hotRows struct {
	mu   sync.Mutex
	seen map[string]*hotRow
	// swept is the second mark last forgot the quiet rows in.
	swept int64
}

type hotRow struct {
	line      Line
	second    int64 // the Unix second cur counts in
	cur, prev int
}

const hotBatches = 10

func (h *hotRows) mark(lines []Line, at time.Time) {
	sec := at.Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]*hotRow{}
	}
	for _, l := range lines {
		k := rowKey(l.SKU, l.Location, l.Pool)
		r := h.seen[k]
		if r == nil {
			r = &hotRow{line: l, second: sec}
			h.seen[k] = r
		}
		r.roll(sec)
		r.cur++
	}
	if len(h.seen) > hotMax && sec > h.swept {
		// An instance whose expiry loop runs elsewhere never asks (now):
		// forget the rows locked no more here, once a second at most.
		h.swept = sec
		h.sweepLocked(sec)
	}
}

// hotMax is how many rows hotRows keeps before it forgets the quiet ones.
const hotMax = 10_000

func (h *hotRows) sweepLocked(sec int64) {
	for k, r := range h.seen {
		if r.roll(sec); r.cur+r.prev == 0 {
			delete(h.seen, k)
		}
	}
}

func (r *hotRow) roll(sec int64) {
	switch {
	case sec == r.second:
	case sec == r.second+1:
		r.prev, r.cur, r.second = r.cur, 0, sec
	case sec > r.second:
		r.prev, r.cur, r.second = 0, 0, sec
	}
}

// now returns the hot rows at t, and forgets those locked no more.
func (h *hotRows) now(t time.Time) map[string]Line {
	sec := t.Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Line{}
	for k, r := range h.seen {
		r.roll(sec)
		switch {
		case r.cur+r.prev == 0:
			delete(h.seen, k)
		case r.cur+r.prev >= hotBatches:
			out[k] = r.line
		}
	}
	return out
}
