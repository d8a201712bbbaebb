package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/stock"
)

// How a hold changes.
//
// Every path that changes a hold (confirm, release, partial release,
// extend, the expiry loop, the sweeper, reconciliation's repair of a stuck
// hold, rollback batches and so a campaign's end) follows one rule, in the
// steps below and through them only:
//
//  1. lock the holds, in id order (queueLock);
//  2. read their lines in a later statement (queueLock too), so that they
//     are the lines as the last committed change left them: a statement
//     that locks a hold and reads its lines under one snapshot can read
//     lines a partial release changed while it waited for the lock, and
//     hand the same units back twice;
//  3. decide in Go from what was locked and read (Outcome.decide): a hold
//     that is no longer held is left alone, and any change to a hold found
//     past its expiry expires it instead;
//  4. write the decision in one statement (changes.queue), whose stock
//     UPDATE is conditional on the counters it expects and which fails
//     with SQLSTATE SH001, writing nothing, when the database does not
//     agree with the decision (queries/reservations.sql, ReservationsChange).
//     The same statement pays what a count found missing of the held units
//     (stock.short) from what it hands back: those units leave total
//     (ledger kind shortfall) instead of returning to available, whichever
//     path ends the hold; a confirm that sells them records sold_short, and
//     the service raises its alert after the commit (readSoldShort).
//
// The confirm and release batches and the expiry loop run these steps on a
// pipe that also carries the transaction's begin and commit; every other
// path runs them inside its own transaction through changeTx.

// lockedHold is a hold this transaction has locked, with its lines as read
// after the lock.
type lockedHold struct {
	row db.Reservation
	// due: past its expiry when the transaction started.
	due   bool
	lines []Line
}

// lockStep is steps 1 and 2, queued on a pipe.
type lockStep struct {
	locking *db.ReservationsLockManyBatchResults
	reading *db.ReservationLinesGetManyBatchResults
}

// queueLock queues the lock of holds ids (in id order) and, in a later
// statement, the read of their lines.
func queueLock(ctx context.Context, q *db.Queries, ids []uuid.UUID) lockStep {
	return lockStep{
		locking: q.ReservationsLockMany(ctx, [][]uuid.UUID{ids}),
		reading: q.ReservationLinesGetMany(ctx, [][]uuid.UUID{ids}),
	}
}

// read returns the holds locked, by id: an id that names no hold is absent.
// Like every read of a pipe's result, it leaves errors to the round trip.
func (l lockStep) read() map[uuid.UUID]*lockedHold {
	rows, _ := batch.Collect(l.locking.Query)
	lines, _ := batch.Collect(l.reading.Query)
	return lockedHolds(rows, lines)
}

// lockedHolds puts the lines read after a lock with the holds it locked.
func lockedHolds(rows []db.ReservationsLockManyRow, lines []db.ReservationLine) map[uuid.UUID]*lockedHold {
	holds := make(map[uuid.UUID]*lockedHold, len(rows))
	for _, r := range rows {
		holds[r.Reservation.ID] = &lockedHold{row: r.Reservation, due: r.Due}
	}
	for _, l := range lines {
		if h := holds[l.ReservationID]; h != nil {
			h.lines = append(h.lines, storedLine(l))
		}
	}
	return holds
}

// Outcome says what a change makes of the holds it changes: how and why
// they end when they are handed back, expire or are sold (a confirm), or
// what a partial release or an extension records while they stay held.
// Its Kind is the ledger kind the change writes.
type Outcome struct {
	// Status is StatusReleased or StatusExpired (StatusConfirmed for a
	// confirm).
	Status HoldStatus
	// Kind is the ledger kind: release, expire or rollback (confirm;
	// release_partial for a partial release).
	Kind   stock.LedgerKind
	Actor  string
	Reason string
	// DueOnly ends a hold only if it is past its expiry: reconciliation's
	// repair of a stuck hold, which must not end a hold that is not stuck.
	DueOnly bool
	// give, when set, hands back only these units (per SKU: a quantity,
	// or the units with an identity named) and keeps the hold held with
	// the rest: a partial release.
	give map[string]giveBack
	// extend is an extension's outcome: it writes no ledger row, and a hold
	// found past its expiry expires instead.
	extend bool
}

// giveBack is what a partial release hands back of one SKU: a quantity,
// or, on a pool of units with an identity, the units named.
type giveBack struct {
	quantity int64
	units    []string
}

// Releases of the system's own making.
var (
	releaseByExpiry  = Outcome{Status: StatusExpired, Kind: stock.LedgerExpire, Actor: "system:expire_holds", Reason: "hold expired", DueOnly: true}
	releaseBySweeper = Outcome{Status: StatusExpired, Kind: stock.LedgerExpire, Actor: "system:sweep_expired", Reason: "hold expired (sweeper)", DueOnly: true}
)

// expiredInstead is what a change becomes when it finds its hold past its
// expiry: whatever was asked, the hold expires (its stock belongs to
// others again, whether or not the expiry loop got to it yet).
func (how Outcome) expiredInstead() Outcome {
	what := "released"
	switch {
	case how.Kind == stock.LedgerConfirm:
		return Outcome{Status: StatusExpired, Kind: stock.LedgerExpire, Actor: "system:confirm", Reason: "hold expired before payment was confirmed"}
	case how.extend:
		return Outcome{Status: StatusExpired, Kind: stock.LedgerExpire, Actor: "system:extend", Reason: "hold expired before it was extended"}
	case how.Kind == stock.LedgerRollback:
		return Outcome{Status: StatusExpired, Kind: stock.LedgerExpire, Actor: "system:rollback", Reason: "hold expired before it was rolled back"}
	case how.give != nil:
		what = "partly released"
	}
	return Outcome{Status: StatusExpired, Kind: stock.LedgerExpire, Actor: "system:release", Reason: "hold expired before it was " + what}
}

// holdChange is one decided change to a hold: its new status (held for a
// partial release) and the units that move, per line.
type holdChange struct {
	id    uuid.UUID
	how   Outcome
	lines []Line
}

// decide is step 3: the change how makes to hold h, or nil when it makes
// none. A hold that is not held is left alone; a hold past its expiry is
// expired, whatever was asked; a partial release that covers all a hold
// has releases it whole.
func (how Outcome) decide(h *lockedHold) (*holdChange, error) {
	switch {
	case HoldStatus(h.row.Status) != StatusHeld:
		return nil, nil
	case h.due && how.Status != StatusExpired:
		return &holdChange{id: h.row.ID, how: how.expiredInstead(), lines: h.lines}, nil
	case how.DueOnly && !h.due:
		return nil, nil
	case how.give != nil:
		give, left, err := partOf(h.lines, how.give)
		if err != nil {
			return nil, err
		}
		whole := Outcome{Status: StatusReleased, Kind: stock.LedgerRelease, Actor: how.Actor, Reason: how.Reason}
		if left == 0 {
			return &holdChange{id: h.row.ID, how: whole, lines: h.lines}, nil
		}
		whole.Status, whole.Kind = StatusHeld, stock.LedgerReleasePartial
		return &holdChange{id: h.row.ID, how: whole, lines: give}, nil
	}
	return &holdChange{id: h.row.ID, how: how, lines: h.lines}, nil
}

// changes is step 4: the changes decided in one transaction, written by
// one statement.
type changes struct {
	p    db.ReservationsChangeParams
	list []*holdChange
	// written is the statement's results once queued; soldShort, once
	// read, the stock rows where it sold units a count had found missing
	// (ledger kind sold_short), for the alert after the commit.
	written   *db.ReservationsChangeBatchResults
	soldShort []db.ReservationsChangeRow
}

func (c *changes) add(ch *holdChange) {
	p := &c.p
	p.Ids = append(p.Ids, ch.id)
	p.Statuses = append(p.Statuses, string(ch.how.Status))
	p.Actors = append(p.Actors, ch.how.Actor)
	p.Reasons = append(p.Reasons, ch.how.Reason)
	for _, l := range ch.lines {
		p.LineIds = append(p.LineIds, ch.id)
		p.LineSkus = append(p.LineSkus, l.SKU)
		p.LineLocations = append(p.LineLocations, l.Location)
		p.LinePools = append(p.LinePools, l.Pool)
		p.LineQuantities = append(p.LineQuantities, l.Quantity)
		p.LineKinds = append(p.LineKinds, string(ch.how.Kind))
		p.LineBackordered = append(p.LineBackordered, l.Backordered)
		for _, u := range l.Units {
			p.UnitReservationIds = append(p.UnitReservationIds, ch.id)
			p.UnitSkus = append(p.UnitSkus, l.SKU)
			p.UnitLocations = append(p.UnitLocations, l.Location)
			p.UnitPools = append(p.UnitPools, l.Pool)
			p.UnitIds = append(p.UnitIds, u)
		}
	}
	c.list = append(c.list, ch)
}

// queue queues the statement that writes the changes; nil when there are
// none.
func (c *changes) queue(ctx context.Context, q *db.Queries) *db.ReservationsChangeBatchResults {
	if len(c.list) == 0 {
		return nil
	}
	c.written = q.ReservationsChange(ctx, []db.ReservationsChangeParams{c.p})
	return c.written
}

// readSoldShort reads, in the read step of the round trip that wrote the
// changes, the stock rows where they sold units a count had found missing
// (only a confirm does). Like every read of a pipe's result, it leaves
// errors to the round trip.
func (c *changes) readSoldShort() {
	if c == nil || c.written == nil {
		return
	}
	rows, _ := batch.Collect(c.written.Query)
	for _, r := range rows {
		if r.SoldShort != nil && *r.SoldShort > 0 {
			c.soldShort = append(c.soldShort, r)
		}
	}
}

// ended returns the ids of the holds the changes ended (released or
// expired), in the order they were decided.
func (c *changes) ended() []uuid.UUID {
	var ids []uuid.UUID
	for _, ch := range c.list {
		if ch.how.Status == StatusReleased || ch.how.Status == StatusExpired {
			ids = append(ids, ch.id)
		}
	}
	return ids
}

// count tells rec, once written, about the holds the changes handed back.
func (c *changes) count(rec holdstats.Recorder) {
	for _, ch := range c.list {
		if ch.how.Status == StatusReleased || ch.how.Status == StatusExpired {
			rec.Released(string(ch.how.Status), string(ch.how.Kind), ch.how.Actor, 1)
		}
	}
}

// changeTx runs the rule inside the caller's transaction: it locks holds
// ids and reads their lines, lets decide choose each hold's change (in id
// order; nil: none), and writes them. It returns the holds as locked and
// the changes written.
func (s *Service) changeTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, decide func(*lockedHold) (*holdChange, error)) (map[uuid.UUID]*lockedHold, *changes, error) {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)

	p := batch.NewPipe(tx.Conn())
	lock := queueLock(ctx, db.New(p), ids)
	var holds map[uuid.UUID]*lockedHold
	if err := p.RoundTrip(ctx, func() { holds = lock.read() }); err != nil {
		return nil, nil, fmt.Errorf("lock holds: %w", err)
	}
	var c changes
	for _, id := range ids {
		h, ok := holds[id]
		if !ok {
			continue
		}
		ch, err := decide(h)
		if err != nil {
			return nil, nil, err
		}
		if ch != nil {
			c.add(ch)
		}
	}
	if len(c.list) == 0 {
		return holds, &c, nil
	}
	p = batch.NewPipe(tx.Conn())
	c.queue(ctx, db.New(p))
	if err := p.RoundTrip(ctx, nil); err != nil {
		if refusal, ok := refused(err); ok {
			return nil, nil, refusal
		}
		return nil, nil, fmt.Errorf("change holds: %w", err)
	}
	c.count(s.rec)
	s.forgetPutBack(&c)
	return holds, &c, nil
}

// ReleaseTx hands back the stock of every hold among ids that is still held,
// inside the caller's transaction, and returns the ids it ended. It is the
// one release of the paths that end holds in bulk (rollback batches, a
// campaign's end, reconciliation's repair), and follows the rule every
// change to a hold follows (see changeTx): a hold that is no longer held is
// skipped, so nothing is handed back twice, and one found past its expiry
// is expired rather than released.
func (s *Service) ReleaseTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, how Outcome) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	_, c, err := s.changeTx(ctx, tx, ids, how.decide)
	if err != nil {
		return nil, fmt.Errorf("release holds: %w", err)
	}
	return c.ended(), nil
}

// LineScope says which lines of a hold a release in bulk hands back: the
// lines of SKU's Pool (when SKU is set) at Location (when set). The zero
// LineScope is every line: whole holds.
type LineScope struct {
	SKU, Pool, Location string
}

func (sc LineScope) whole() bool { return sc.SKU == "" && sc.Location == "" }

func (sc LineScope) has(l Line) bool {
	return (sc.SKU == "" || (l.SKU == sc.SKU && l.Pool == sc.Pool)) && (sc.Location == "" || l.Location == sc.Location)
}

// in is the lines of a hold (lines) that a release in scope hands back:
// those in scope, and with a component line of a bundle every other
// component line of that bundle line (a recall of the coasters takes the
// gift boxes they are in: a box without its coasters is no box).
func (sc LineScope) in(lines []Line) []Line {
	if sc.whole() {
		return lines
	}
	var bundles []string
	for _, l := range lines {
		if l.Bundle != nil && sc.has(l) && !slices.Contains(bundles, l.Bundle.SKU) {
			bundles = append(bundles, l.Bundle.SKU)
		}
	}
	var in []Line
	for _, l := range lines {
		if sc.has(l) || (l.Bundle != nil && slices.Contains(bundles, l.Bundle.SKU)) {
			in = append(in, l)
		}
	}
	return in
}

// decideIn is decide for the lines of a hold in scope (LineScope.in): a
// hold with no line in scope (a change since took them) is left alone; one
// whose every line is in scope, or that is past its expiry, is decided
// whole (released, or expired instead); otherwise its lines in scope are
// handed back, as a partial release by how's actor and for its reason,
// and it stays held with the rest.
func (how Outcome) decideIn(scope LineScope) func(*lockedHold) (*holdChange, error) {
	return func(h *lockedHold) (*holdChange, error) {
		if scope.whole() || HoldStatus(h.row.Status) != StatusHeld {
			return how.decide(h)
		}
		in := scope.in(h.lines)
		switch {
		case len(in) == 0:
			return nil, nil
		case len(in) == len(h.lines) || h.due || how.DueOnly:
			return how.decide(h)
		}
		part := Outcome{Status: StatusHeld, Kind: stock.LedgerReleasePartial, Actor: how.Actor, Reason: how.Reason}
		return &holdChange{id: h.row.ID, how: part, lines: in}, nil
	}
}

// Handed is what ReleaseLinesTx did to one hold: the units of its lines in
// scope (LineScope.in) it handed back, and whether the hold ended
// (released, or expired instead) or stays held with its other lines.
type Handed struct {
	ID    uuid.UUID
	Units int64
	Ended bool
}

// ReleaseLinesTx is ReleaseTx for the lines in scope (see decideIn): of
// every hold among ids that is still held, it hands back the lines scope
// covers, through the one change path, inside the caller's transaction,
// and returns each hold it changed. A rollback scoped to a SKU or a
// location uses it, so it hands back what its dry run counts and nothing
// else of a hold.
func (s *Service) ReleaseLinesTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, how Outcome, scope LineScope) ([]Handed, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	holds, c, err := s.changeTx(ctx, tx, ids, how.decideIn(scope))
	if err != nil {
		return nil, fmt.Errorf("release holds: %w", err)
	}
	out := make([]Handed, 0, len(c.list))
	for _, ch := range c.list {
		h := Handed{ID: ch.id, Ended: ch.how.Status == StatusReleased || ch.how.Status == StatusExpired}
		for _, l := range scope.in(holds[ch.id].lines) {
			h.Units += l.Quantity
		}
		out = append(out, h)
	}
	return out, nil
}

// soldShort raises, after the commit, the alert of each stock row where a
// confirm sold units a count had found missing (ledger kind sold_short):
// the shop sold what the shelf may not have.
func (s *Service) soldShort(ctx context.Context, c *changes) {
	if s.cfg.Alert == nil {
		return
	}
	for _, r := range c.soldShort {
		sku, location, pool, n := domain.Value(r.Sku), domain.Value(r.Location), domain.Value(r.Pool), domain.Value(r.SoldShort)
		s.cfg.Alert(context.WithoutCancel(ctx), stock.Alert{
			Kind: "sold_short", Subject: stock.PoolSubject(sku, location, pool), SKU: sku, Location: location, Pool: pool,
			Details: map[string]any{"units": n, "count": r.Ref, "holds": r.Holds},
			Summary: fmt.Sprintf("%d units of SKU %s (pool %s) at %s that a stock count (%s) found missing were sold by confirming holds %s: "+
				"the shelf may not have them. Find them (a count that finds them takes them back), or refund or reroute those orders.",
				n, sku, pool, location, r.Ref, strings.Join(r.Holds, ", ")),
		})
	}
}
