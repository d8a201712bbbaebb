package inventory

import (
	"slices"
	"sync"
	"time"
)

// Allocation from memory.
//
// A line that names no location may draw on its pool at every location,
// and its batch locks every one of those rows to decide among them
// (lockKeys): a pool at three warehouses costs three row locks per line
// where a pool at one costs one. placeMemory keeps, per pool at more than
// one location, the rows the last batch that locked them all read (less
// what it granted), and a later batch whose lines on that pool allocate
// plainly picks each line's location by its strategy on those figures
// and locks only the rows picked. Around it:
//
//   - Nothing is granted on memory: the rows picked are locked and the
//     batch decides on them as locked (decideHolds), the write's
//     conditional UPDATEs checking it again. What memory decides is only
//     which rows to lock, so it can never oversell; a line the locked
//     rows refuse goes again with the next batch, which locks every row
//     of its pool (laterForPicks) and refuses it, or grants it, on all
//     of them.
//   - What memory can get wrong is the choice among locations: a line
//     may be allocated to the location its strategy picked on figures at
//     most Config.AllocationMemory old (another instance's holds, or
//     stock put back elsewhere, unseen), never to a location its hold
//     may not use or that is inactive or stopped as its batch reads it
//     (the rows picked are read with their locations under the lock).
//   - This instance's own writes forget at once, as for the sold-out
//     memory (soldout.go): a release, an expiry or any change to holds
//     that puts stock back drops its pools' entries (forgetPutBack), and
//     any other write of its own that can put stock back makes every
//     entry read before it unused (soldOut.written).
//   - Only plain lines pick: not split, not partial, not a bundle's
//     component, naming no units, of a hold with no customer (a
//     customer's hold locks its pools everywhere, limits.go), on a pool
//     whose rows are not serialized and have no backorder policy. A
//     batch with any other line on a pool locks all its rows, as does a
//     hold sent on by a refusal here.

// placeMemoryMax bounds the pools remembered at once: when full, entries
// past their trust are dropped, and a pool finding no room is not
// remembered.
const placeMemoryMax = 5_000

// placeMemory is a process's memory of the rows of pools at several
// locations, as hold batches last locked them all.
type placeMemory struct {
	trust time.Duration

	mu    sync.Mutex
	pools map[string]*placeEntry // by poolKey
	// swept is when a full memory was last swept (roomLocked).
	swept time.Time
}

// placeEntry is one pool's rows as a batch locked them all (st, never
// changed once made: picks reads it outside the lock), when that read
// began (readAt, with the instance's writes then), and what the batches
// since took from each row, by rowKey: the batch that read it, then each
// batch that locked the row since, as it left it.
type placeEntry struct {
	st     stockRows
	took   map[string]int64
	readAt time.Time
	writes uint64
}

func newPlaceMemory(trust time.Duration) *placeMemory {
	return &placeMemory{trust: trust, pools: map[string]*placeEntry{}}
}

// picks is, per pool (poolKey) the batch's leaders lock in part, the
// locations their lines there are picked at, on the entries usable at
// seen (read less than the trust before it, with the instance's writes
// then): every line of the leaders on such a pool is plain, and memory's
// figures, less what the batch's earlier lines picked, fit each whole at
// the first location its strategy orders that can. Every other pool is
// locked whole. seen is the batch's start, read before its lock.
func (m *placeMemory) picks(leaders []*holdCall, seen soldOutSeen) map[string][]string {
	if m == nil || m.trust <= 0 {
		return nil
	}
	lines, whole := pickable(leaders)
	entries, taken := m.usable(lines, whole, seen)
	if entries == nil {
		return nil
	}
	out := map[string][]string{}
	mine := map[string]int64{}
	for _, l := range lines {
		e := entries[l.pk]
		if e == nil || whole[l.pk] {
			continue
		}
		clear(mine)
		d := holdDecision{st: e.st, taken: taken, h: l.c.h, mine: mine}
		if _, ok := d.allocate(l.w); !ok {
			whole[l.pk] = true
			continue
		}
		for k, q := range mine {
			taken[k] += q
			if loc := e.st.rows[k].location; !slices.Contains(out[l.pk], loc) {
				out[l.pk] = append(out[l.pk], loc)
			}
		}
	}
	for pk := range whole {
		delete(out, pk)
	}
	return out
}

// pickLine is a line of a batch's leaders that names no location, with
// its pool (poolKey).
type pickLine struct {
	c  *holdCall
	w  want
	pk string
}

// pickable is the leaders' lines that name no location, and the pools
// (poolKey) locked whole whatever memory has: those a line that is not
// plain draws on, and every pool of a customer's hold, even through a
// line naming its location (limits.go).
func pickable(leaders []*holdCall) ([]pickLine, map[string]bool) {
	var lines []pickLine
	whole := map[string]bool{}
	for _, c := range leaders {
		for _, w := range c.h.wants {
			switch {
			case c.h.req.CustomerRef != "":
				whole[poolKey(w.SKU, w.Pool)] = true
			case w.Location == "":
				l := pickLine{c, w, poolKey(w.SKU, w.Pool)}
				if !plainLine(c, w) {
					whole[l.pk] = true
				}
				lines = append(lines, l)
			}
		}
	}
	return lines, whole
}

// usable is the entries lines may be picked on at seen (read less than the
// trust before it, with the instance's writes then), by poolKey, and what
// the batches since their reads took, by rowKey; a pool of lines with no
// usable entry joins whole.
func (m *placeMemory) usable(lines []pickLine, whole map[string]bool, seen soldOutSeen) (map[string]*placeEntry, map[string]int64) {
	var (
		entries map[string]*placeEntry
		taken   map[string]int64
	)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range lines {
		if _, ok := entries[l.pk]; ok || whole[l.pk] || len(m.pools) == 0 {
			continue
		}
		e := m.pools[l.pk]
		if e == nil || seen.at.Sub(e.readAt) >= m.trust || e.writes != seen.writes {
			whole[l.pk] = true
			continue
		}
		if entries == nil {
			entries, taken = map[string]*placeEntry{}, map[string]int64{}
		}
		entries[l.pk] = e
		for k, q := range e.took {
			taken[k] = q
		}
	}
	return entries, taken
}

// plainLine reports whether line w of call c, which names no location,
// may be picked from memory (see the list above); the pool's rows are
// looked at when they are picked from.
func plainLine(c *holdCall, w want) bool {
	_, units := c.h.asks[poolKey(w.SKU, w.Pool)]
	return !c.lockAll && c.h.req.CustomerRef == "" && !w.Split && !w.Partial && w.bundle == nil && !units
}

// remember records, for the pools a committed batch locked at every
// location (everywhere, by poolKey), the rows as it read them at seen and
// what it granted from each (taken), for pools at more than one location
// and neither serialized nor promising; and, for the pools it locked in
// part (picked), what it left on the rows it locked, in an entry read no
// later.
func (m *placeMemory) remember(seen soldOutSeen, st stockRows, taken map[string]int64, everywhere map[string]bool, picked map[string][]string) {
	if m == nil || m.trust <= 0 {
		return
	}
	var made map[string]*placeEntry
	for pk := range everywhere {
		if e := poolEntry(st, pk, taken); e != nil {
			if made == nil {
				made = map[string]*placeEntry{}
			}
			e.readAt, e.writes = seen.at, seen.writes
			made[pk] = e
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for pk, e := range made {
		if old := m.pools[pk]; (old == nil || !seen.at.Before(old.readAt)) && m.roomLocked(pk, seen.at) {
			m.pools[pk] = e
		}
	}
	for pk, locations := range picked {
		e := m.pools[pk]
		if e == nil || seen.at.Before(e.readAt) {
			continue
		}
		for _, k := range e.st.places[pk] {
			if !slices.Contains(locations, e.st.rows[k].location) {
				continue
			}
			now, ok := st.rows[k]
			if !ok || now.serialized || now.promise != nil {
				delete(m.pools, pk)
				break
			}
			if e.took == nil {
				e.took = map[string]int64{}
			}
			e.took[k] = e.st.rows[k].available - (now.available - taken[k])
		}
	}
}

// poolEntry is pool pk's entry from a batch's rows st, which locked it at
// every location, less taken; nil for a pool at one location, serialized
// or with a backorder policy.
func poolEntry(st stockRows, pk string, taken map[string]int64) *placeEntry {
	keys := st.places[pk]
	if len(keys) < 2 {
		return nil
	}
	rows := make([]lockedRow, 0, len(keys))
	for _, k := range keys {
		r := st.rows[k]
		if r.serialized || r.promise != nil {
			return nil
		}
		r.units = nil
		rows = append(rows, r)
	}
	e := &placeEntry{st: newStockRows(rows)}
	for _, k := range keys {
		if taken[k] != 0 {
			if e.took == nil {
				e.took = map[string]int64{}
			}
			e.took[k] = taken[k]
		}
	}
	return e
}

// roomLocked reports whether pool pk may be remembered: it is already, or
// there is room, once entries past their trust at now are dropped. A full
// memory is swept at most four times per trust: between sweeps a pool
// finds no room, rather than every batch scanning every entry.
func (m *placeMemory) roomLocked(pk string, now time.Time) bool {
	if _, ok := m.pools[pk]; ok || len(m.pools) < placeMemoryMax {
		return true
	}
	if now.Sub(m.swept) < m.trust/4 {
		return false
	}
	m.swept = now
	for k, e := range m.pools {
		if now.Sub(e.readAt) >= m.trust {
			delete(m.pools, k)
		}
	}
	return len(m.pools) < placeMemoryMax
}

// forget drops the entries of pools (poolKey).
func (m *placeMemory) forget(pools []string) {
	if m == nil || len(pools) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pk := range pools {
		delete(m.pools, pk)
	}
}
