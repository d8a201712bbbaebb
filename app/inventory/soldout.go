package inventory

import (
	"context"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Sold out, answered in memory (issue 28).
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
//     before it untrusted (written). Writes other packages make through
//     inventory's functions in their own transactions (a campaign giving
//     its pool back, an import) are an other instance's: the bound.
//   - A retried request whose first attempt was granted must get that
//     answer: an entry is used only once it knows the idempotency keys of
//     every hold that drew on its rows up to the versions it rests on
//     (read from the ledger, a few at a time as the versions move), and a
//     request whose key is among them goes to its batch.
//   - What memory answers is the batch's own answer: only a hold's first
//     line (in the order the batch decides them) is looked up, lines
//     naming units or asking them adjacent are not (their answer names
//     units), nor holds a campaign's cap may refuse first, nor while sales
//     are stopped: nothing is remembered while the switch for everything
//     is on, nor answered for a client whose sales are stopped (its batch
//     answers stop_sale first). The recheck loop reads which clients those
//     are with the rows; memory answers no one while that read is older
//     than SoldOutRecheck, or began before this instance's last write (a
//     flip of any switch on this instance is one, through inTx); a
//     client's flip on this instance also takes effect on the set at once.

// soldOutMaxKeys is the most holds a remembered ask's rows may have had:
// a pool with more is not remembered (reading their keys would cost more
// than the refusals save). soldOutMaxAsks bounds the asks remembered at
// once, and an ask nobody asked for in soldOutIdle is forgotten: the
// recheck loop reads every entry's rows each time.
const (
	soldOutMaxKeys = 100_000
	soldOutMaxAsks = 1_000
	soldOutIdle    = 10 * time.Second
)

// soldOut is a process's memory of asks refused for want of any stock.
type soldOut struct {
	trust time.Duration
	now   func() time.Time
	seed  maphash.Seed
	read  func(ctx context.Context, checks []soldOutCheck) []soldOutRenewal

	// writes counts the writes of this instance, other than hold batches
	// and changes to holds, that may have put stock back on a row: an
	// entry read before one of them is not trusted.
	writes atomic.Uint64

	mu      sync.Mutex
	entries map[string]*soldOutEntry
	// byPool is the asks resting on each pool (poolKey).
	byPool map[string]map[string]bool
	// tooMany are asks whose rows had more holds than soldOutMaxKeys,
	// not remembered until the time given.
	tooMany map[string]time.Time
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
	// rows are the rows the verdict rests on, with their versions as read.
	rows []soldOutRow
	// readAt is when the read it rests on began; writes is the
	// instance's writes then.
	readAt time.Time
	writes uint64
	// keys are the hashes of the idempotency keys of the holds that drew on
	// the rows, sorted, through the versions in through (by rowKey).
	keys    []uint64
	through map[string]int64
	// asked is when a hold last asked for it.
	asked time.Time
}

type soldOutRow struct {
	sku, location, pool string
	version             int64
}

func (r soldOutRow) key() string { return rowKey(r.sku, r.location, r.pool) }

func newSoldOut(trust time.Duration) *soldOut {
	return &soldOut{trust: trust, now: time.Now, seed: maphash.MakeSeed(), entries: map[string]*soldOutEntry{},
		byPool: map[string]map[string]bool{}, tooMany: map[string]time.Time{}}
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
	if _, over := overCap(h); over {
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

func (m *soldOut) keyHash(client, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	h.WriteString(client)
	h.WriteByte(0)
	h.WriteString(key)
	return h.Sum64()
}

// refuse returns the verdict memory gives hold h: the refusal its batch
// would give, when its ask is remembered, trusted now, and its key made no
// hold on the rows.
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
	if _, made := slices.BinarySearch(e.keys, m.keyHash(h.req.Client, h.req.IdempotencyKey)); made {
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
	if now.Sub(e.readAt) >= m.trust || e.writes != m.writes.Load() {
		return false
	}
	for _, r := range e.rows {
		if e.through[r.key()] < r.version {
			return false
		}
	}
	return true
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
		if !ok || first != v.line {
			continue
		}
		if until, ok := m.tooMany[ask]; ok && m.now().Before(until) {
			continue
		}
		var rows []soldOutRow
		for _, k := range m.rowsOf(st, first) {
			r := st.rows[k]
			rows = append(rows, soldOutRow{sku: r.sku, location: r.location, pool: r.pool, version: r.version})
		}
		if len(rows) == 0 {
			continue
		}
		probe := h
		probe.wants = []want{{SKU: first.SKU, Location: first.Location, Pool: first.Pool, Quantity: 1, Split: first.Split}}
		probe.asks, probe.maxPerOrder = nil, nil
		e := m.entries[ask]
		if e == nil {
			if len(m.entries) >= soldOutMaxAsks {
				continue
			}
			e = &soldOutEntry{ask: ask, through: map[string]int64{}}
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
		e.v, e.h, e.rows, e.readAt, e.writes, e.asked = v, probe, rows, seen.at, seen.writes, seen.at
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

// forgetLines drops the entries on the pools of a change's lines that put
// stock back (every kind but confirm).
func (m *soldOut) forgetLines(ch *changes) {
	if m == nil || len(ch.list) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, one := range ch.list {
		if one.how.Kind == "confirm" {
			continue
		}
		for _, l := range one.lines {
			m.forgetLocked(poolKey(l.SKU, l.Pool))
		}
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
	ask     string
	h       hold
	rows    []soldOutRow
	through map[string]int64
}

// soldOutRenewal is the recheck loop's verdict on one entry: read at at,
// still refused on the rows read (with their versions), and the keys of
// the holds that drew on them since through, up to the versions read; or
// not refused any more (gone), or too many holds.
type soldOutRenewal struct {
	ask     string
	gone    bool
	tooMany bool
	at      time.Time
	writes  uint64
	rows    []soldOutRow
	keys    []uint64
	// after are the rows whose keys were read (by rowKey), each with the
	// version after which they were: the keys through a row's version
	// read are known only where the entry knew them through that one.
	after map[string]int64
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
			checks = append(checks, soldOutCheck{ask: e.ask, h: e.h, rows: slices.Clone(e.rows), through: cloneMap(e.through)})
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), m.trust)
		renewals := m.read(ctx, checks)
		cancel()
		m.renew(renewals)
	}
}

func cloneMap[K comparable, V any](in map[K]V) map[K]V {
	out := make(map[K]V, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// renew applies the recheck loop's verdicts.
func (m *soldOut) renew(renewals []soldOutRenewal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range renewals {
		e := m.entries[r.ask]
		if e == nil {
			continue
		}
		if !r.gone && !r.tooMany {
			// The keys of the holds on the rows up to the versions read are
			// known whenever the read began, even if a batch remembered
			// the entry since (as batches do, one after another, while
			// the pool's refusals still go to the database): without them
			// the entry would wait for a read that no batch overtakes.
			for _, row := range r.rows {
				k := row.key()
				if after, read := r.after[k]; read && e.through[k] >= after {
					e.through[k] = max(e.through[k], row.version)
				}
			}
			if len(r.keys) > 0 {
				e.keys = append(e.keys, r.keys...)
				slices.Sort(e.keys)
				e.keys = slices.Compact(e.keys)
			}
		}
		if r.at.Before(e.readAt) {
			continue
		}
		if r.gone || r.tooMany {
			if r.tooMany {
				m.tooMany[r.ask] = m.now().Add(time.Minute)
			}
			m.dropLocked(r.ask)
			continue
		}
		e.rows, e.readAt, e.writes = r.rows, r.at, r.writes
	}
}

// recheck is the recheck loop's read: every entry's rows again, without
// locking them, and in a later statement the keys of the holds that drew
// on them since the versions each entry knows the keys through. An entry
// whose first line would no longer be refused out_of_stock with nothing
// left, as its batch decides it, is gone.
func (s *Service) recheckSoldOut(ctx context.Context, checks []soldOutCheck) []soldOutRenewal {
	seen := s.soldOut.seenNow()
	var rows db.StockRowsReadParams
	for _, c := range checks {
		w := c.h.wants[0]
		rows.Skus = append(rows.Skus, w.SKU)
		rows.Pools = append(rows.Pools, w.Pool)
		rows.Locations = append(rows.Locations, w.Location)
	}
	var keys db.LedgerHoldKeysParams
	keys.Lim = soldOutMaxKeys + 1
	for _, c := range checks {
		for _, r := range c.rows {
			keys.Skus = append(keys.Skus, r.sku)
			keys.Locations = append(keys.Locations, r.location)
			keys.Pools = append(keys.Pools, r.pool)
			keys.AfterVersions = append(keys.AfterVersions, c.through[r.key()])
		}
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil
	}
	defer pc.Release()
	p := newPipe(pc.Conn())
	q := db.New(p)
	reading := q.StockRowsRead(ctx, []db.StockRowsReadParams{rows})
	keying := q.LedgerHoldKeys(ctx, []db.LedgerHoldKeysParams{keys})
	var (
		read  []db.StockRowsReadRow
		known []db.LedgerHoldKeysRow
	)
	if err := p.roundTrip(ctx, func() {
		read, _ = collect(reading.Query)
		known, _ = collect(keying.Query)
	}); err != nil {
		s.log.Warn("rereading the pools remembered sold out failed; their entries lapse", "err", err)
		return nil
	}
	stopped := false
	locked := make([]lockedRow, 0, len(read))
	for i, r := range read {
		if i == 0 {
			s.soldOut.stoppedRead(seen, r.StoppedClients)
		}
		stopped = stopped || r.StopSale
		locked = append(locked, lockedRow{sku: r.Sku, location: r.Location, pool: r.Pool, available: r.Available, status: r.Status,
			serialized: r.Serialized, priority: r.Priority, active: r.Active, stopped: domain.Value(r.StopSaleReason), version: r.Version})
	}
	st := newStockRows(locked)
	keysOf := map[string][]uint64{}
	for _, k := range known {
		rk := rowKey(k.Sku, k.Location, k.Pool)
		keysOf[rk] = append(keysOf[rk], s.soldOut.keyHash(k.Client, k.IdempotencyKey))
	}
	out := make([]soldOutRenewal, 0, len(checks))
	for _, c := range checks {
		r := soldOutRenewal{ask: c.ask, at: seen.at, writes: seen.writes, after: make(map[string]int64, len(c.rows))}
		for _, row := range c.rows {
			r.after[row.key()] = c.through[row.key()]
		}
		v := decideHold(st, map[string]int64{}, map[string]bool{}, c.h)
		if stopped || v.granted || v.why != domain.CodeOutOfStock || v.left != 0 {
			r.gone = true
			out = append(out, r)
			continue
		}
		for _, k := range s.soldOut.rowsOf(st, c.h.wants[0]) {
			row := st.rows[k]
			r.rows = append(r.rows, soldOutRow{sku: row.sku, location: row.location, pool: row.pool, version: row.version})
			r.keys = append(r.keys, keysOf[k]...)
		}
		r.tooMany = len(known) > soldOutMaxKeys || len(r.rows) == 0
		out = append(out, r)
	}
	return out
}
