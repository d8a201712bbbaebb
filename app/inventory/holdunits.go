package inventory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
)

// What a hold batch reads of units with an identity. Once the batch has
// locked its stock rows (every change to a pool's units locks its stock
// row first, so they cannot change under it), it reads, per pool of units
// a hold draws on, the units the batch's holds name, enough available
// units in seat order for every pick, and enough windows of adjacent
// available units for every adjacent pick. A pool of units lives at one
// location, so these reads go by (sku, pool).
//
// The reads go in the batch's first round trip, queued after the
// statement that locks the stock rows (each statement of a pipeline takes
// its snapshot when it starts, so they see every change committed before
// the locks were granted): what a hold names or asks adjacent is read
// wherever it asks, and a plain quantity on a pool this process has seen
// hold units (a pool never stops holding them). A pool of units a batch
// meets for the first time costs one more round trip, once (readUnits).
//
// How many windows of adjacent units to read. A unit a hold of the batch
// takes spoils at most one window of a length (a length's windows are
// disjoint), so one window more than all the units the batch's holds
// could take always leaves one whole for each adjacent pick. Most of
// those units are often named ones, though (buyers picking seats off a
// map), and a named unit spoils only a window it is in, which the read
// shows. So the first read takes fewer windows (runsLim): one more than
// the units the batch picks without naming them, plus some room for
// named units among them. If that leaves fewer windows free of every
// named unit than it would need, the batch reads them again, all of
// them, in readUnits' extra round trip (enoughRuns). Either way, what
// the batch reads is the first windows of the pool in seat order, with
// at least one for each adjacent pick whatever the others take: each
// pick gets the window it would get from all of them.

// unitNeed is what a batch's holds ask of one pool's units.
type unitNeed struct {
	sku, pool string
	named     []string
	pick      int64
	// runs are the lengths adjacent picks ask for; most is every unit the
	// batch could take from the pool.
	runs []int64
	most int64
}

func (n *unitNeed) same(o *unitNeed) bool {
	return o != nil && n.pick == o.pick && n.most == o.most && slices.Equal(n.runs, o.runs) && slices.Equal(n.named, o.named)
}

// picked is how many units the need's holds could take without naming
// them.
func (n *unitNeed) picked() int64 { return n.most - int64(len(n.named)) }

// runsLim is how many windows of each length a read takes: all that any
// batch needs, or fewer (see above). No read asks for more than an int
// LIMIT holds: the asks of a batch summed may be far more (100 lines of
// 1,000,000 per hold, many holds); the reads stop at what the pool has
// anyway.
func (n *unitNeed) runsLim(all bool) int32 {
	lim := n.most + 1
	if !all {
		lim = min(lim, n.picked()+1+int64(len(n.named))/8)
	}
	return int32(min(lim, math.MaxInt32))
}

// enoughRuns reports whether the windows u has of the pool, read with
// runsLim(false), leave one whole for every adjacent pick of n: the pool
// had no more, or enough of them have none of the units n names.
func (n *unitNeed) enoughRuns(u *poolUnits) bool {
	lim := n.runsLim(false)
	if lim == n.runsLim(true) {
		return true
	}
	named := make(map[string]bool, len(n.named))
	for _, id := range n.named {
		named[id] = true
	}
	for _, length := range n.runs {
		windows := u.runs[length]
		if len(windows) < int(lim) {
			continue
		}
		clean := int64(0)
		for _, w := range windows {
			if !slices.ContainsFunc(w, func(id string) bool { return named[id] }) {
				clean++
			}
		}
		if clean < n.picked()+1 {
			return false
		}
	}
	return true
}

// unitNeeds is what leaders ask of units, by poolKey, in first-asked
// order: every line naming units or asking them adjacent, and the plain
// quantities of the pools units says hold units.
func unitNeeds(leaders []*holdCall, units func(sku, pool string) bool) (map[string]*unitNeed, []string) {
	needs := map[string]*unitNeed{}
	var order []string
	for _, c := range leaders {
		for _, w := range c.h.wants {
			pk := poolKey(w.SKU, w.Pool)
			ask, asked := c.h.asks[pk]
			if !asked {
				if !units(w.SKU, w.Pool) {
					continue
				}
				ask = unitAsk{pick: w.Quantity}
			}
			n, ok := needs[pk]
			if !ok {
				n = &unitNeed{sku: w.SKU, pool: w.Pool}
				needs[pk] = n
				order = append(order, pk)
			}
			n.named = append(n.named, ask.named...)
			n.most += int64(len(ask.named)) + ask.pick
			switch {
			case !ask.adjacent:
				n.pick += ask.pick
			case !slices.Contains(n.runs, ask.pick):
				n.runs = append(n.runs, ask.pick)
			}
		}
	}
	return needs, order
}

// unitPools are the pools (poolKey) a process has seen hold units.
type unitPools struct{ m sync.Map }

func (u *unitPools) has(sku, pool string) bool {
	_, ok := u.m.Load(poolKey(sku, pool))
	return ok
}

func (u *unitPools) learn(st stockRows) {
	for _, r := range st.rows {
		if r.serialized {
			u.m.Store(poolKey(r.sku, r.pool), true)
		}
	}
}

// unitsRead is the units reads queued on a pipe; read collects them, by
// poolKey, once the pipe's round trip is made.
type unitsRead struct {
	needs map[string]*unitNeed
	order []string
	named *db.UnitsNamedBatchResults
	free  *db.UnitsFreeBatchResults
	runs  *db.UnitsRunsBatchResults
}

// queueUnits queues the reads of the pools order names (keys of needs),
// with every window a batch could need (allRuns) or fewer (see runsLim).
func queueUnits(ctx context.Context, q *db.Queries, needs map[string]*unitNeed, order []string, allRuns bool) unitsRead {
	r := unitsRead{needs: needs, order: order}
	var named db.UnitsNamedParams
	var free db.UnitsFreeParams
	var runs db.UnitsRunsParams
	for _, pk := range order {
		n := needs[pk]
		// No LIMIT past an int (see runsLim).
		most := min(n.most, math.MaxInt32-1)
		for _, id := range n.named {
			named.Skus, named.Ids = append(named.Skus, n.sku), append(named.Ids, id)
		}
		if n.pick > 0 {
			// Enough for every pick even if every unit the batch's other
			// holds take is among the first.
			free.Skus, free.Pools = append(free.Skus, n.sku), append(free.Pools, n.pool)
			free.Lims = append(free.Lims, int32(most))
		}
		for _, length := range n.runs {
			runs.Skus, runs.Pools = append(runs.Skus, n.sku), append(runs.Pools, n.pool)
			runs.MinLens, runs.Lims = append(runs.MinLens, int32(length)), append(runs.Lims, n.runsLim(allRuns))
		}
	}
	if len(named.Ids) > 0 {
		r.named = q.UnitsNamed(ctx, []db.UnitsNamedParams{named})
	}
	if len(free.Skus) > 0 {
		r.free = q.UnitsFree(ctx, []db.UnitsFreeParams{free})
	}
	if len(runs.Skus) > 0 {
		r.runs = q.UnitsRuns(ctx, []db.UnitsRunsParams{runs})
	}
	return r
}

// read collects the reads (in the order they were queued, as a pipe wants
// them); like every read of a pipe's result it leaves errors to the round
// trip.
func (r unitsRead) read() map[string]*poolUnits {
	if len(r.order) == 0 {
		return nil
	}
	var (
		namedRows []db.UnitsNamedRow
		freeRows  []db.UnitsFreeRow
		runRows   []db.UnitsRunsRow
	)
	if r.named != nil {
		namedRows, _ = batch.Collect(r.named.Query)
	}
	if r.free != nil {
		freeRows, _ = batch.Collect(r.free.Query)
	}
	if r.runs != nil {
		runRows, _ = batch.Collect(r.runs.Query)
	}
	units := make(map[string]*poolUnits, len(r.order))
	for _, pk := range r.order {
		units[pk] = &poolUnits{named: map[string]namedUnit{}, runs: map[int64][][]string{}}
	}
	for _, u := range namedRows {
		// A named unit of the SKU, whichever pool it is in: the decision
		// refuses one that is not in the line's pool.
		for _, pk := range r.order {
			if r.needs[pk].sku == u.Sku {
				units[pk].named[u.ID] = namedUnit{location: u.Location, pool: u.Pool, status: u.Status}
			}
		}
	}
	for _, u := range freeRows {
		if p := units[poolKey(u.Sku, u.Pool)]; p != nil {
			p.free = append(p.free, u.ID)
		}
	}
	for _, w := range runRows {
		if p := units[poolKey(w.Sku, w.Pool)]; p != nil {
			p.runs[int64(w.MinLen)] = append(p.runs[int64(w.MinLen)], w.Ids)
		}
	}
	return units
}

// units is what the batch read of a pool's units (by poolKey), on its
// serialized row; nil if none.
func (st stockRows) units(pk string) *poolUnits {
	for _, k := range st.places[pk] {
		if r := st.rows[k]; r.serialized {
			return r.units
		}
	}
	return nil
}

// attachUnits gives each pool's units to its stock row: the serialized
// row of the pool, at the one location the pool lives at.
func attachUnits(st stockRows, units map[string]*poolUnits) {
	for pk, u := range units {
		for _, k := range st.places[pk] {
			if r := st.rows[k]; r.serialized {
				r.units = u
				st.rows[k] = r
				break
			}
		}
	}
}

// readUnits is a hold batch's extra round trip for the pools of units its
// first round trip did not read as the batch needs them (pre: what it
// read, by poolKey): pools this process had not seen hold units yet, and
// pools whose windows of adjacent units read fell short (enoughRuns).
// It reads every window the batch could need.
func (s *Service) readUnits(ctx context.Context, conn *pgx.Conn, leaders []*holdCall, st stockRows, pre map[string]*unitNeed) error {
	s.unitPools.learn(st)
	needs, order := unitNeeds(leaders, s.unitPools.has)
	missing := order[:0:0]
	for _, pk := range order {
		if !needs[pk].same(pre[pk]) {
			missing = append(missing, pk)
		} else if u := st.units(pk); u != nil && !needs[pk].enoughRuns(u) {
			missing = append(missing, pk)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	p := batch.NewPipe(conn)
	reading := queueUnits(ctx, db.New(p), needs, missing, true)
	var units map[string]*poolUnits
	if err := p.RoundTrip(ctx, func() { units = reading.read() }); err != nil {
		return fmt.Errorf("read units: %w", err)
	}
	attachUnits(st, units)
	return nil
}

// sortedIDs returns ids sorted byte-wise, the order units are written in.
func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortFunc(out, strings.Compare)
	return out
}
