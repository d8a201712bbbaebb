package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/stock"
)

// holdCall is one caller's hold waiting for its batch.
type holdCall struct {
	ctx  context.Context
	h    hold
	rows []string // keys of the stock rows its lines draw on
	done chan holdResult
	// timeouts counts the lock timeouts its batches ran into.
	timeouts int
	// waited: a batch sent it on to the next one (see laterForRuns).
	waited bool
	// lockAll: a batch that locked its pools in part refused it, so the
	// next one locks them at every location (see laterForPicks).
	lockAll bool
	// answered, when set, is told of the call's answer (keysInFlight).
	answered func()
	// joined, when set, makes the call changes to holds on the rows of
	// h.wants (each with its location) instead of a new hold: see
	// batch_joined.go.
	joined *joined
}

type holdResult struct {
	r        Reservation
	replayed bool
	err      error
	joined   joinedResult
}

func (c *holdCall) lockTimeouts() *int { return &c.timeouts }
func (c *holdCall) Keys() []string     { return c.rows }
func (c *holdCall) Gone() bool         { return c.ctx.Err() != nil }
func (c *holdCall) Answer(err error)   { c.reply(holdResult{err: err}) }

func (c *holdCall) reply(r holdResult) {
	select {
	case c.done <- r:
		if c.answered != nil {
			c.answered()
		}
	default: // answered already
	}
}

// rowKey identifies a stock row (stock.RowKey, whose byte order is the
// lock order); an empty location stands, for the batcher and the busy
// checks, for its pool at every location.
func rowKey(sku, location, pool string) string { return stock.RowKey(sku, location, pool) }

// poolKey identifies a SKU's pool, at whichever location.
func poolKey(sku, pool string) string { return sku + "\x00" + pool }

// holdBatched queues h for the next hold batch and waits for its answer. A
// caller that stops waiting gets ctx's error; its hold may still commit,
// as a hold whose caller vanished mid-transaction may on any path, and a
// retry with the same Idempotency-Key finds it.
func (s *Service) holdBatched(ctx context.Context, h hold) (Reservation, bool, error) {
	c := &holdCall{ctx: ctx, h: h, done: make(chan holdResult, 1), rows: rowKeysOf(h)}
	c.answered = s.keysInFlight.add(h.req.Client, h.req.IdempotencyKey)
	s.holds.Submit(c)
	select {
	case res := <-c.done:
		return res.r, res.replayed, res.err
	case <-ctx.Done():
		return Reservation{}, false, ctx.Err()
	}
}

// rowKeysOf is the batcher's keys of the stock rows h's lines draw on.
func rowKeysOf(h hold) []string {
	rows := make([]string, 0, len(h.wants))
	for _, w := range h.wants {
		if h.req.CustomerRef != "" {
			w.Location = "" // a customer's hold locks its pools everywhere (limits.go)
		}
		rows = append(rows, w.key())
	}
	return rows
}

// runHolds runs one hold batch and answers its callers. A batch of
// requests on rows found locked before looks first, without waiting: while
// the rows are still locked their requests answer busy at once.
func (s *Service) runHolds(ctx context.Context, calls []*holdCall) []*holdCall {
	s.rec.HoldBatch(len(calls))
	if s.holds.AnyBlocked(calls) {
		rows := map[string]Line{}
		for _, c := range calls {
			for _, w := range c.h.wants {
				rows[w.key()] = w.row()
			}
		}
		locked, err := s.lockedStock(ctx, rows)
		if err != nil {
			for _, c := range calls {
				c.Answer(err)
			}
			return nil
		}
		var rest []*holdCall
		for _, c := range calls {
			if l, ok := firstLocked(c.h.wants, locked); ok {
				c.Answer(s.lockWaits.Answered(errBusy(l)))
			} else {
				rest = append(rest, c)
			}
		}
		for k := range locked {
			delete(rows, k)
		}
		s.holds.Unblock(slicesKeys(rows)) // free again
		if len(rest) == 0 {
			return nil
		}
		calls = rest
	}
	return s.holdAttempt(ctx, calls)
}

// holdAttempt runs calls as one transaction and answers them. When the
// transaction fails as a whole, the batch failure policy answers each
// caller as a transaction of its own would have been answered (see
// failurePolicy).
func (s *Service) holdAttempt(ctx context.Context, calls []*holdCall) []*holdCall {
	again, err := s.holdBatch(ctx, calls)
	if err == nil {
		return again
	}
	return failurePolicy[*holdCall]{s: s, kind: "hold", attempt: s.holdAttempt, lockTimedOut: s.holdsLockTimedOut,
		subject: func(c *holdCall) string { return c.h.req.IdempotencyKey }}.failed(ctx, calls, err)
}

// holdsLockTimedOut is a hold batch's answer to its lock timeout: requests
// on a row another transaction keeps locked answer busy, once they sat
// through maxLockTimeouts, or go again in a batch of their own; the rest
// go again now.
func (s *Service) holdsLockTimedOut(ctx context.Context, calls []*holdCall) []*holdCall {
	rows := map[string]Line{}
	for _, c := range calls {
		for _, w := range c.h.wants {
			rows[w.key()] = w.row()
		}
	}
	locked, perr := s.lockedStock(ctx, rows)
	if perr != nil {
		s.log.Warn("hold batch hit its lock timeout; finding the locked rows failed", "err", perr)
	}
	// Requests on a row still locked go again in a batch of their
	// own, which looks before it waits: they answer busy at once if
	// the row is still locked then, or go through if the lock was only
	// another batch waiting its turn. The others go again now.
	var rest, later []*holdCall
	for _, c := range calls {
		c.timeouts++
		l, onLocked := firstLocked(c.h.wants, locked)
		switch {
		case c.timeouts > maxLockTimeouts && onLocked:
			c.Answer(s.lockWaits.Answered(errBusy(l)))
		case c.timeouts > maxLockTimeouts:
			c.Answer(errBusy(c.h.wants[0].row()))
		case onLocked:
			later = append(later, c)
		default:
			rest = append(rest, c)
		}
	}
	s.holds.Block(slicesKeys(locked))
	if len(rest) > 0 {
		later = append(later, s.holdAttempt(ctx, rest)...)
	}
	return later
}

// holdBatch is one transaction for many holds, in two round trips, in
// four steps:
//
//  1. insertAndLock (round trip 1): begin; set the lock timeout; insert
//     every hold's reservation (a key used before is skipped); lock the
//     stock rows every line may draw on (the location it names, or every
//     location of its pool), in (sku, location, pool) byte order, reading
//     their locations' priority and switches with them.
//  2. decideHolds, in Go, in arrival order, against the rows as locked:
//     where each line is taken from, and whether the hold is granted.
//  3. writeHolds (round trip 2): delete the rows of the holds not granted;
//     move the counters, insert the lines and the ledger rows of the
//     granted ones in one statement; read the holds the replayed keys
//     made; commit.
//  4. answer each caller.
//
// A request whose key another request of the batch uses too goes again
// with the next batch, once the first one's fate is committed.
func (s *Service) holdBatch(ctx context.Context, calls []*holdCall) ([]*holdCall, error) {
	leaders, again := firstOfEachKey(calls)
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer batch.Rollback(conn)
	defer s.timeBatch(holdstats.BatchHold, time.Now())

	seen := s.soldOut.seenNow()
	picks := s.places.picks(leaders, seen)
	everywhere := lockedEverywhere(leaders, picks)
	ft, err := s.insertAndLock(ctx, conn, leaders, picks, everywhere)
	if err != nil {
		return nil, err
	}
	rows := ft.rows
	s.hot.mark(rows.lockOrder, time.Now())
	if err := s.readUnits(ctx, conn, leaders, rows, ft.pre); err != nil {
		return nil, err
	}
	b := s.planBatch(leaders, ft.made, ft.stop)
	if ft.bundles != nil {
		s.staleBundles(ctx, &b, ft.bundles)
	}
	changed := decideJoined(b.joined, ft.holds, rows)
	verdicts, taken := decideHolds(rows, b.holds())
	verdicts = b.laterForRuns(verdicts, changed.gaveUnits)
	verdicts = b.laterForPicks(verdicts, picks, taken, rows.promised)
	again = append(again, b.later...)
	w := b.writes(verdicts, taken, rows.promised, rows.lockOrder)
	w.change = &changed.ch
	firsts, firstsOf, after, err := s.writeHolds(ctx, conn, w)
	if err != nil {
		return nil, err
	}
	changed.ch.count(s.rec)
	s.places.remember(seen, rows, taken, everywhere, picks)
	s.forgetPutBack(&changed.ch) // after: what the joined changes put back is not in rows
	if !ft.stop.on {
		s.soldOut.remember(seen, rows, b.holds(), verdicts)
	}
	changed.answer(b.joined, after)
	b.answer(ctx, s, ft.made, verdicts, firsts, firstsOf)
	return again, nil
}

// firstOfEachKey splits calls into the first request of each (client, key)
// and the rest, which go again with a later batch.
func firstOfEachKey(calls []*holdCall) (leaders, again []*holdCall) {
	seen := map[[2]string]bool{}
	for _, c := range calls {
		if c.joined != nil {
			leaders = append(leaders, c)
			continue
		}
		k := [2]string{c.h.req.Client, c.h.req.IdempotencyKey}
		if seen[k] {
			again = append(again, c)
			continue
		}
		seen[k] = true
		leaders = append(leaders, c)
	}
	return leaders, again
}

// firstTrip is what a hold batch's first round trip returns: the
// reservations inserted (by id), the stock rows as locked (in lock order,
// with the units read of the pools of units it knew of, see holdunits.go),
// what it read of units (by poolKey), the stop-sale switch as the batch
// reads it, and the holds of its joined calls it locked (batch_joined.go).
type firstTrip struct {
	made  map[uuid.UUID]db.Reservation
	rows  stockRows
	pre   map[string]*unitNeed
	stop  stopSale
	holds map[uuid.UUID]*lockedHold
	// bundles is the current version of each bundle the batch's holds
	// expanded (nil: none did; see staleBundles).
	bundles map[string]int64
}

// insertAndLock is a hold batch's first round trip; it locks the pools
// everywhere at every location, and of those memory picked rows of, the
// rows picked (lockKeys).
func (s *Service) insertAndLock(ctx context.Context, conn *pgx.Conn, leaders []*holdCall, picks map[string][]string, everywhere map[string]bool) (firstTrip, error) {
	ins, clients := insertsOf(leaders)
	lock := lockKeys(leaders, picks, everywhere)

	p := batch.NewPipe(conn)
	q := db.New(p)
	p.Begin()
	q.BatchSettingsSet(ctx, []string{s.stopSaleWait})
	stopping := queueStopSale(ctx, q, clients, s.lockTimeout)
	inserting := q.ReservationsInsertMany(ctx, []db.ReservationsInsertManyParams{ins})
	locking := q.StockLockMany(ctx, []db.StockLockManyParams{lock})
	needs, order := unitNeeds(leaders, s.unitPools.has)
	reading := queueUnits(ctx, q, needs, order, false)
	joining := queueJoined(ctx, q, leaders)
	var (
		counting  *db.CustomerUnitsHeldBatchResults
		customers []db.CustomerUnitsHeldRow
		versions  *db.BundleVersionsBatchResults
		bundles   []db.BundleVersionsRow
	)
	if p := customerCounts(leaders); p != nil {
		counting = q.CustomerUnitsHeld(ctx, []db.CustomerUnitsHeldParams{*p})
	}
	if skus := bundlesOf(leaders); skus != nil {
		versions = q.BundleVersions(ctx, [][]string{skus})
	}
	var (
		inserted []db.Reservation
		stock    []db.StockLockManyRow
		ft       firstTrip
		units    map[string]*poolUnits
	)
	err := p.RoundTrip(ctx, func() {
		ft.stop = readStopSale(stopping)
		inserted, _ = batch.Collect(inserting.Query)
		stock, _ = batch.Collect(locking.Query)
		units = reading.read()
		ft.holds = joining.read()
		if counting != nil {
			customers, _ = batch.Collect(counting.Query)
		}
		if versions != nil {
			bundles, _ = batch.Collect(versions.Query)
		}
	})
	if err != nil && ft.stop.waitedOut {
		return firstTrip{}, errFlipSlow
	}
	if err != nil {
		return firstTrip{}, fmt.Errorf("insert and lock: %w", err)
	}

	made := make(map[uuid.UUID]db.Reservation, len(inserted))
	for _, r := range inserted {
		made[r.ID] = r
	}
	rows := newStockRows(lockedRows(stock))
	if counting != nil {
		rows.customers = make(map[string]int64, len(customers))
		for _, c := range customers {
			rows.customers[customerKey(c.Customer, c.Sku, c.Pool)] = c.Units
		}
	}
	rows.lockOrder = make([]Line, len(stock))
	for i, r := range stock {
		rows.lockOrder[i] = Line{SKU: r.Sku, Location: r.Location, Pool: r.Pool}
	}
	attachUnits(rows, units)
	ft.made, ft.rows, ft.pre = made, rows, needs
	if versions != nil {
		ft.bundles = make(map[string]int64, len(bundles))
		for _, b := range bundles {
			ft.bundles[b.Sku] = b.Version
		}
	}
	return ft, nil
}

// insertsOf is the reservations a hold batch inserts, and its clients, in
// (client, key) order: two batches sharing keys wait on each other in one
// order (the batch decides in arrival order). Joined calls insert none.
func insertsOf(leaders []*holdCall) (db.ReservationsInsertManyParams, []string) {
	byKey := slices.Clone(leaders)
	slices.SortFunc(byKey, func(a, b *holdCall) int {
		if d := strings.Compare(a.h.req.Client, b.h.req.Client); d != 0 {
			return d
		}
		return strings.Compare(a.h.req.IdempotencyKey, b.h.req.IdempotencyKey)
	})
	var ins db.ReservationsInsertManyParams
	for _, c := range byKey {
		if c.joined != nil {
			continue
		}
		h := c.h
		ins.Ids = append(ins.Ids, h.id)
		ins.Clients = append(ins.Clients, h.req.Client)
		ins.IdempotencyKeys = append(ins.IdempotencyKeys, h.req.IdempotencyKey)
		ins.RequestHashes = append(ins.RequestHashes, h.hash)
		ins.OrderRefs = append(ins.OrderRefs, h.req.OrderRef)
		ins.Campaigns = append(ins.Campaigns, h.req.Campaign)
		ins.TtlSeconds = append(ins.TtlSeconds, h.ttl)
		ins.CustomerRefs = append(ins.CustomerRefs, h.req.CustomerRef)
	}
	var clients []string
	for _, c := range byKey {
		if c.joined != nil {
			continue
		}
		if n := len(clients); n == 0 || clients[n-1] != c.h.req.Client {
			clients = append(clients, c.h.req.Client)
		}
	}
	return ins, clients
}

// lockKeys is what StockLockMany locks for a batch: per (sku, pool), every
// location for the pools everywhere (lockedEverywhere), the locations
// memory picked and those the lines name for the pools it picked rows of
// (picks, by poolKey, see places.go), else the locations the lines name.
func lockKeys(leaders []*holdCall, picks map[string][]string, everywhere map[string]bool) db.StockLockManyParams {
	var lock db.StockLockManyParams
	seen := map[string]bool{}
	add := func(sku, loc, pool string) {
		if k := rowKey(sku, loc, pool); !seen[k] {
			seen[k] = true
			lock.Skus = append(lock.Skus, sku)
			lock.Pools = append(lock.Pools, pool)
			lock.Locations = append(lock.Locations, loc)
		}
	}
	for _, c := range leaders {
		for _, w := range c.h.wants {
			pk := poolKey(w.SKU, w.Pool)
			if everywhere[pk] {
				add(w.SKU, "", w.Pool)
				continue
			}
			if w.Location != "" {
				add(w.SKU, w.Location, w.Pool)
			}
			for _, loc := range picks[pk] {
				add(w.SKU, loc, w.Pool)
			}
		}
	}
	return lock
}

// lockedEverywhere are the pools (poolKey) a batch of leaders locks at
// every location: those a line of it allocates, or a hold with a customer
// draws on (limits.go), but for those memory picked rows of (picks).
func lockedEverywhere(leaders []*holdCall, picks map[string][]string) map[string]bool {
	anywhere := map[string]bool{}
	for _, c := range leaders {
		for _, w := range c.h.wants {
			if pk := poolKey(w.SKU, w.Pool); (w.Location == "" || c.h.req.CustomerRef != "") && picks[pk] == nil {
				anywhere[pk] = true
			}
		}
	}
	return anywhere
}

// batchPlan is a hold batch's requests sorted out once their reservations
// are inserted: the ones to decide, the replays of a key used before, the
// ones whose caller left before anything was decided, and the ones a
// stop-sale refuses (with why).
type batchPlan struct {
	deciding []*holdCall
	replays  []*holdCall
	left     []*holdCall
	stopped  []*holdCall
	stopErrs []error
	// joined are the calls that change holds on the batch's rows.
	joined []*holdCall
	// later are the holds that go again with the next batch, undecided
	// here (laterForRuns).
	later []*holdCall
}

// laterForRuns takes out of the batch, to go again with the next one,
// the holds refused for want of adjacent units on a pool the batch's
// joined changes handed units back to (gave, by poolKey): the windows of
// adjacent units were read before those units were free, so the next
// batch, which reads them free, decides. A hold goes again so once. It
// returns the verdicts of the holds left.
func (b *batchPlan) laterForRuns(verdicts []verdict, gave map[string]bool) []verdict {
	if len(gave) == 0 {
		return verdicts
	}
	return b.sendLater(verdicts, func(c *holdCall, v verdict) bool {
		if !v.granted && v.why == domain.CodeOutOfStock && v.left < 0 && gave[poolKey(v.line.SKU, v.line.Pool)] && !c.waited {
			c.waited = true
			return true
		}
		return false
	})
}

// sendLater takes out of the batch, to go again with the next one, the
// holds deciding whose verdict later says go again, and returns the
// verdicts of the holds left.
func (b *batchPlan) sendLater(verdicts []verdict, later func(c *holdCall, v verdict) bool) []verdict {
	var (
		deciding []*holdCall
		kept     []verdict
	)
	for i, c := range b.deciding {
		if v := verdicts[i]; later(c, v) {
			b.later = append(b.later, c)
		} else {
			deciding, kept = append(deciding, c), append(kept, v)
		}
	}
	b.deciding = deciding
	return kept
}

// planBatch sorts a batch's requests out, the stop-sale switches as the
// batch read them refusing the holds they cover before anything is
// decided: those take nothing from the rows.
func (s *Service) planBatch(leaders []*holdCall, made map[uuid.UUID]db.Reservation, stop stopSale) batchPlan {
	var b batchPlan
	for _, c := range leaders {
		if c.joined != nil {
			b.joined = append(b.joined, c)
			continue
		}
		if _, ok := made[c.h.id]; !ok {
			b.replays = append(b.replays, c)
			continue
		}
		if s.beforeGrant != nil {
			s.beforeGrant(c.h.req)
		}
		if c.Gone() {
			b.left = append(b.left, c) // hold nothing for a caller that left
			continue
		}
		if err := stop.refuses(c.h.req.Client); err != nil {
			b.stopped, b.stopErrs = append(b.stopped, c), append(b.stopErrs, err)
			continue
		}
		b.deciding = append(b.deciding, c)
	}
	return b
}

// laterForPicks takes out of the batch, to go again with the next one,
// which locks their pools at every location (lockAll), the holds refused
// on a line of a pool the batch locked in part (picks, see places.go), or
// granted a promise there: the rows memory did not pick may have had what
// the line asks; what a grant taken out took is given back to taken and
// promised (decideHolds). It returns the verdicts of the holds left.
func (b *batchPlan) laterForPicks(verdicts []verdict, picks map[string][]string, taken, promised map[string]int64) []verdict {
	if len(picks) == 0 {
		return verdicts
	}
	return b.sendLater(verdicts, func(c *holdCall, v verdict) bool {
		refusedOnPicks := !v.granted && picks[poolKey(v.line.SKU, v.line.Pool)] != nil
		if !refusedOnPicks && !promisedOnPicks(v, picks) {
			return false
		}
		for _, l := range v.lines { // a grant's
			k := rowKey(l.SKU, l.Location, l.Pool)
			taken[k] -= l.Quantity - l.Backordered
			if l.Backordered > 0 {
				promised[k] -= l.Backordered
			}
		}
		c.lockAll = true
		return true
	})
}

// promisedOnPicks reports whether granted verdict v promises units beyond
// the stock of a row of a pool locked in part (picks): a pool that gained
// a backorder policy since memory read it, whose other rows may have had
// the units on hand.
func promisedOnPicks(v verdict, picks map[string][]string) bool {
	for _, l := range v.lines {
		if l.Backordered > 0 && picks[poolKey(l.SKU, l.Pool)] != nil {
			return true
		}
	}
	return false
}

func (b batchPlan) holds() []hold {
	out := make([]hold, len(b.deciding))
	for i, c := range b.deciding {
		out[i] = c.h
	}
	return out
}

// lockedRows are the rows StockLockMany locked, as the decision takes them.
func lockedRows(stock []db.StockLockManyRow) []lockedRow {
	locked := make([]lockedRow, len(stock))
	for i, r := range stock {
		locked[i] = lockedRow{sku: r.Sku, location: r.Location, pool: r.Pool, available: r.Available - waiting(r), short: r.Short, status: r.Status,
			serialized: r.Serialized, priority: r.Priority, active: r.Active, stopped: domain.Value(r.StopSaleReason),
			latitude: r.Latitude, longitude: r.Longitude, limits: limitsOf(r), promise: promiseOf(r)}
	}
	return locked
}
