package inventory

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Sold out, answered in memory.
//
// A hold batch that refuses a hold out_of_stock because every stock row
// its first line could draw on had nothing available records the line's
// ask in the process's memory. A later hold whose first line asks the same
// is refused at once, as its batch would have refused it, with no round
// trip to the database: memory only ever refuses, never grants. Around it:
//
//   - An entry is trusted only while the read it rests on began less than
//     Config.SoldOutRecheck ago (a batch's lock of the rows, or the
//     recheck loop's read of them); the loop reads every entry's rows
//     again every half of that, in one round trip, and drops those that
//     would no longer be refused. So stock added by another instance, or
//     by hand, is holdable on this one at most SoldOutRecheck after its
//     commit, whatever the loop did meanwhile.
//   - This instance's own writes forget at once: a release, an expiry or
//     a grant on a pool drops its entries; any other write of its own
//     that can put stock back (an adjustment, a move, a count, a transfer
//     received, units added, a repair, a resume) makes every entry read
//     before it untrusted (written); so does another package's
//     transaction run through InTx (a campaign giving its pools back to
//     main). An import, in its own process, is another instance's: the
//     bound.
//   - A retried request whose first attempt was granted must get that
//     answer, on whichever instance it was granted and however soon after:
//     a request memory would refuse first looks its Idempotency-Key up
//     (replay.go: one indexed read, shared by the requests that wait for
//     it at once). A request whose key made a hold is answered from that
//     hold, read without locking any stock row (or refused, a key reused
//     with another body).
//   - What memory answers is the batch's own answer: only a hold's first
//     line (in the order the batch decides them) is looked up, lines
//     naming units or asking them adjacent are not (their answer names
//     units), nor holds a campaign's caps may refuse first, nor asks on
//     a pool with limits (limits.go: nothing is remembered of one, and
//     the recheck loop drops an entry whose pool has gained some), nor
//     while sales are stopped: nothing is remembered while the switch for everything
//     is on, nor answered for a client whose sales are stopped (its batch
//     answers stop_sale first). The recheck loop reads which clients those
//     are with the rows; memory answers no one while that read is older
//     than SoldOutRecheck, or began before this instance's last write (a
//     flip of any switch on this instance is one, through inTx); a
//     client's flip on this instance also takes effect on the set at once.

// soldOutMaxAsks bounds the asks remembered at once, and an ask nobody
// asked for in soldOutIdle is forgotten: the recheck loop reads every
// entry's rows each time.
const (
	soldOutMaxAsks = 1_000
	soldOutIdle    = 10 * time.Second
)

// soldOut is a process's memory of asks refused for want of any stock.
type soldOut struct {
	trust time.Duration
	now   func() time.Time
	read  func(ctx context.Context, checks []soldOutCheck) []soldOutRenewal

	// writes counts the writes of this instance, other than hold batches
	// and changes to holds, that may have put stock back on a row: an
	// entry read before one of them is not trusted.
	writes atomic.Uint64

	mu      sync.Mutex
	entries map[string]*soldOutEntry
	// byPool is the asks resting on each pool (poolKey).
	byPool  map[string]map[string]bool
	looping bool
	// stopped are the clients whose sales are stopped as the recheck loop
	// last read them (this instance's own flips applied since), and
	// stoppedAt when that read began: memory refuses nobody once that read
	// is older than trust.
	stopped   map[string]bool
	stoppedAt time.Time
}

// soldOutEntry is one ask remembered.
type soldOutEntry struct {
	ask string
	// v is the batch's verdict on the ask's line; h the hold it refused,
	// whose first line asks for one unit: what the recheck decides again.
	v verdict
	h hold
	// readAt is when the read it rests on began; writes is the
	// instance's writes then.
	readAt time.Time
	writes uint64
	// asked is when a hold last asked for it.
	asked time.Time
}

func newSoldOut(trust time.Duration) *soldOut {
	return &soldOut{trust: trust, now: time.Now, entries: map[string]*soldOutEntry{}, byPool: map[string]map[string]bool{}}
}

// askOf is the ask memory knows hold h by: its first line as its batch
// decides them (lines naming a location first), with what decides which
// rows it may draw on. It reports false for a hold memory never answers.
func askOf(h hold) (string, want, bool) {
	b, first, ok := appendAsk(nil, h)
	return string(b), first, ok
}

// appendAsk is askOf appending to b: refuse looks the ask up from a buffer
// on its stack, with no string made.
func appendAsk(b []byte, h hold) ([]byte, want, bool) {
	if len(h.wants) == 0 {
		return b, want{}, false
	}
	if _, over := overCap(h); over || (h.maxPerCustomer != nil && h.req.CustomerRef != "") {
		return b, want{}, false // a campaign's cap refuses first
	}
	first := h.wants[0]
	for _, w := range h.wants {
		if w.Location != "" {
			first = w
			break
		}
	}
	if _, asked := h.asks[poolKey(first.SKU, first.Pool)]; asked {
		return b, want{}, false
	}
	for _, part := range [...]string{first.SKU, first.Location, first.Pool} {
		b = append(b, part...)
		b = append(b, 0)
	}
	if first.Split {
		b = append(b, "split"...)
	}
	b = append(b, 0)
	if h.req.Locations != nil {
		locations := slices.Clone(h.req.Locations)
		slices.Sort(locations)
		b = append(b, strings.Join(locations, ",")...)
		b = append(b, ';')
	}
	return b, first, true
}

// refuse returns the verdict memory gives hold h: the refusal its batch
// would give, when its ask is remembered and trusted now. Whether h's key
// made a hold is the caller's to look up (replay.go).
func (m *soldOut) refuse(h hold) (verdict, bool) {
	if m == nil || m.trust <= 0 {
		return verdict{}, false
	}
	var buf [128]byte
	ask, first, ok := appendAsk(buf[:0], h)
	if !ok {
		return verdict{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if now.Sub(m.stoppedAt) >= m.trust || m.stopped[h.req.Client] {
		return verdict{}, false // its batch may answer stop_sale first
	}
	e := m.entries[string(ask)]
	if e == nil || !m.usableLocked(e, now) {
		return verdict{}, false
	}
	e.asked = now
	v := e.v
	v.line = first
	return v, true
}

// usableLocked reports whether e may refuse a hold now (the time read
// under mu).
func (m *soldOut) usableLocked(e *soldOutEntry, now time.Time) bool {
	return now.Sub(e.readAt) < m.trust && e.writes == m.writes.Load()
}

// soldOutSeen is what a read tells memory: when it began, and the
// instance's writes then.
type soldOutSeen struct {
	at     time.Time
	writes uint64
}

func (m *soldOut) seenNow() soldOutSeen { return soldOutSeen{at: m.now(), writes: m.writes.Load()} }

// written counts a write of this instance that may have put stock back:
// nothing read before it is refused from memory after it.
func (m *soldOut) written() {
	if m != nil {
		m.writes.Add(1)
	}
}

// soldOutWrites is how the stock operations tell the memory of the
// service they belong to of their writes (stock.Writes). It reads the
// memory at each call: ShareWith may replace it.
type soldOutWrites struct{ s *Service }

func (w soldOutWrites) Written()                              { w.s.soldOut.written() }
func (w soldOutWrites) ClientSwitched(client string, on bool) { w.s.soldOut.clientSwitched(client, on) }

// stoppedRead records the clients whose sales were stopped as a read that
// began at seen found them; a read that began before this instance's last
// write is not used (the write may be a flip of a client's switch).
func (m *soldOut) stoppedRead(seen soldOutSeen, clients []string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if seen.writes != m.writes.Load() || !seen.at.After(m.stoppedAt) {
		return
	}
	m.stopped = make(map[string]bool, len(clients))
	for _, c := range clients {
		m.stopped[c] = true
	}
	m.stoppedAt = seen.at
}

// clientSwitched applies this instance's flip of client's switch at once
// (inTx counted the flip as a write).
func (m *soldOut) clientSwitched(client string, on bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if on {
		if m.stopped == nil {
			m.stopped = map[string]bool{}
		}
		m.stopped[client] = true
	} else {
		delete(m.stopped, client)
	}
	m.mu.Unlock()
}

// remember records what a committed hold batch decided (its rows as
// locked, the holds it decided and their verdicts): each hold refused
// out_of_stock on its first line with nothing left on any row that line
// could draw on is remembered; the pools of every hold granted are
// forgotten (they had stock).
func (m *soldOut) remember(seen soldOutSeen, st stockRows, holds []hold, verdicts []verdict) {
	if m == nil || m.trust <= 0 {
		return
	}
	start := false
	m.mu.Lock()
	for i, h := range holds {
		v := verdicts[i]
		if v.granted {
			for _, l := range v.lines {
				m.forgetLocked(poolKey(l.SKU, l.Pool))
			}
			continue
		}
		if v.why != domain.CodeOutOfStock || v.left != 0 {
			continue
		}
		ask, first, ok := askOf(h)
		if _, limited := st.limits[poolKey(first.SKU, first.Pool)]; !ok || limited || first != v.line || len(m.rowsOf(st, first)) == 0 {
			continue // a pool's limits may refuse first (limits.go)
		}
		if st.promising(first.SKU, first.Pool) {
			continue // it may promise what arrives within its horizon later (backorders.go)
		}
		probe := h
		probe.wants = []want{{SKU: first.SKU, Location: first.Location, Pool: first.Pool, Quantity: 1, Split: first.Split}}
		probe.asks, probe.maxPerOrder = nil, nil
		e := m.entries[ask]
		if e == nil {
			if len(m.entries) >= soldOutMaxAsks {
				continue
			}
			e = &soldOutEntry{ask: ask}
			m.entries[ask] = e
			pk := poolKey(first.SKU, first.Pool)
			if m.byPool[pk] == nil {
				m.byPool[pk] = map[string]bool{}
			}
			m.byPool[pk][ask] = true
		}
		if seen.at.Before(e.readAt) {
			continue
		}
		e.v, e.h, e.readAt, e.writes, e.asked = v, probe, seen.at, seen.writes, seen.at
		start = start || !m.looping
	}
	if start {
		m.looping = true
	}
	m.mu.Unlock()
	if start {
		go m.loop()
	}
}

// rowsOf are the rows (rowKey) want w could draw on among st's: its own
// row, or its pool's at every location.
func (m *soldOut) rowsOf(st stockRows, w want) []string {
	if w.Location != "" {
		if _, ok := st.rows[w.key()]; ok {
			return []string{w.key()}
		}
		return nil
	}
	return st.places[poolKey(w.SKU, w.Pool)]
}

// forgetPutBack drops what this instance's memories (sold out, and where
// to allocate: places.go) remember of the pools a committed change put
// stock back on.
func (s *Service) forgetPutBack(ch *changes) {
	pools := putBackPools(ch)
	s.soldOut.forget(pools)
	s.places.forget(pools)
}

// putBackPools are the pools (poolKey) of a change's lines that put stock
// back (every kind but confirm).
func putBackPools(ch *changes) []string {
	var pools []string
	for _, one := range ch.list {
		if one.how.Kind == stock.LedgerConfirm {
			continue
		}
		for _, l := range one.lines {
			pools = append(pools, poolKey(l.SKU, l.Pool))
		}
	}
	return pools
}

// forget drops the entries on pools (poolKey).
func (m *soldOut) forget(pools []string) {
	if m == nil || len(pools) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pk := range pools {
		m.forgetLocked(pk)
	}
}

func (m *soldOut) forgetLocked(pk string) {
	for ask := range m.byPool[pk] {
		delete(m.entries, ask)
	}
	delete(m.byPool, pk)
}

func (m *soldOut) dropLocked(ask string) {
	e := m.entries[ask]
	if e == nil {
		return
	}
	delete(m.entries, ask)
	pk := poolKey(e.h.wants[0].SKU, e.h.wants[0].Pool)
	if delete(m.byPool[pk], ask); len(m.byPool[pk]) == 0 {
		delete(m.byPool, pk)
	}
}

// soldOutCheck is one entry as the recheck loop reads it again.
type soldOutCheck struct {
	ask string
	h   hold
}

// soldOutRenewal is the recheck loop's verdict on one entry: read at at
// (writes: the instance's writes then), still refused on the rows read,
// or not refused any more (gone).
type soldOutRenewal struct {
	ask    string
	gone   bool
	at     time.Time
	writes uint64
}

// loop reads every entry again every half of trust until none is left.
func (m *soldOut) loop() {
	tick := time.NewTicker(m.trust / 2)
	defer tick.Stop()
	for range tick.C {
		m.mu.Lock()
		if len(m.entries) == 0 {
			m.looping = false
			m.mu.Unlock()
			return
		}
		checks := make([]soldOutCheck, 0, len(m.entries))
		for _, e := range m.entries {
			if m.now().Sub(e.asked) > soldOutIdle {
				m.dropLocked(e.ask)
				continue
			}
			checks = append(checks, soldOutCheck{ask: e.ask, h: e.h})
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), m.trust)
		renewals := m.read(ctx, checks)
		cancel()
		m.renew(renewals)
	}
}

// renew applies the recheck loop's verdicts.
func (m *soldOut) renew(renewals []soldOutRenewal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range renewals {
		e := m.entries[r.ask]
		if e == nil || r.at.Before(e.readAt) {
			continue
		}
		if r.gone {
			m.dropLocked(r.ask)
			continue
		}
		e.readAt, e.writes = r.at, r.writes
	}
}

// recheckSoldOut is the recheck loop's read: every entry's rows again,
// without locking them, in one statement. An entry whose first line would
// no longer be refused out_of_stock with nothing left, as its batch
// decides it, is gone.
func (s *Service) recheckSoldOut(ctx context.Context, checks []soldOutCheck) []soldOutRenewal {
	seen := s.soldOut.seenNow()
	var skus, pools, locations []string
	for _, c := range checks {
		w := c.h.wants[0]
		skus, pools, locations = append(skus, w.SKU), append(pools, w.Pool), append(locations, w.Location)
	}
	read, err := db.New(s.pool).StockRowsRead(ctx, skus, pools, locations)
	if err != nil {
		s.log.Warn("rereading the pools remembered sold out failed; their entries lapse", "err", err)
		return nil
	}
	stopped := false
	promising := map[string]bool{}
	locked := make([]lockedRow, 0, len(read))
	for i, r := range read {
		if i == 0 {
			s.soldOut.stoppedRead(seen, r.StoppedClients)
		}
		stopped = stopped || r.StopSale
		// A pool of units is decided on its counters, as a plain one: the
		// probe asks for one unit, named by no one, and a serialized row's
		// available counter is its available units (the database's balance
		// check). Deciding it as serialized, without the units a batch
		// reads, would pick from none and refuse it for ever.
		locked = append(locked, lockedRow{sku: r.Sku, location: r.Location, pool: r.Pool, available: r.Available, status: r.Status,
			priority: r.Priority, active: r.Active, stopped: domain.Value(r.StopSaleReason)})
		if r.Limited { // limits set since: they may refuse first
			locked[len(locked)-1].limits = &skuLimits{}
		}
		if r.Promising { // a backorder policy set since: it may grant
			promising[poolKey(r.Sku, r.Pool)] = true
		}
	}
	st := newStockRows(locked)
	out := make([]soldOutRenewal, 0, len(checks))
	for _, c := range checks {
		r := soldOutRenewal{ask: c.ask, at: seen.at, writes: seen.writes}
		v := decideHold(st, map[string]int64{}, map[string]bool{}, c.h)
		_, limited := st.limits[poolKey(c.h.wants[0].SKU, c.h.wants[0].Pool)]
		r.gone = stopped || limited || promising[poolKey(c.h.wants[0].SKU, c.h.wants[0].Pool)] || v.granted || v.why != domain.CodeOutOfStock || v.left != 0 || len(s.soldOut.rowsOf(st, c.h.wants[0])) == 0
		out = append(out, r)
	}
	return out
}
