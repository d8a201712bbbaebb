package inventory

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// readUnits is a hold batch's extra round trip when some of its holds
// need units with an identity: once the batch has locked its stock rows
// (and so every change to those pools' units waits for it), it reads, per
// serialized row a hold draws on, the units the batch's holds name, enough
// available units in seat order for every pick, and the runs of adjacent
// available units for adjacent picks. A batch with no serialized row and
// no unit named skips it.
func (s *Service) readUnits(ctx context.Context, conn *pgx.Conn, leaders []*holdCall, st stockRows) error {
	type need struct {
		sku, location, pool string
		named               []string
		pick                int64
		// runs are the lengths adjacent picks ask for; most is every unit
		// the batch could take from the pool.
		runs []int64
		most int64
	}
	needs := map[string]*need{}
	var order []string
	for _, c := range leaders {
		for _, w := range c.h.wants {
			// A pool of units lives at one location: the serialized row
			// among those the line may draw on, if any.
			k := ""
			for _, place := range st.places[poolKey(w.SKU, w.Pool)] {
				if r := st.rows[place]; r.serialized && (w.Location == "" || r.location == w.Location) {
					k = place
					break
				}
			}
			if k == "" {
				continue
			}
			n, ok := needs[k]
			if !ok {
				r := st.rows[k]
				n = &need{sku: r.sku, location: r.location, pool: r.pool}
				needs[k] = n
				order = append(order, k)
			}
			ask, asked := c.h.asks[poolKey(w.SKU, w.Pool)]
			if !asked {
				ask = unitAsk{pick: w.Quantity}
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
	if len(needs) == 0 {
		return nil
	}

	var named db.UnitsNamedParams
	var free db.UnitsFreeParams
	var runs db.UnitsRunsParams
	for _, k := range order {
		n := needs[k]
		// No read needs more units than the pool has available (nor one
		// more run than that): the asks of a batch summed may be far more
		// (100 lines of 1,000,000 per hold, many holds) and overflow the
		// statements' int LIMITs.
		n.most = min(n.most, max(st.rows[k].available, 0), math.MaxInt32-1)
		for _, id := range n.named {
			named.Skus, named.Ids = append(named.Skus, n.sku), append(named.Ids, id)
		}
		if n.pick > 0 {
			// Enough for every pick even if every unit the batch's other
			// holds take is among the first.
			free.Skus, free.Pools = append(free.Skus, n.sku), append(free.Pools, n.pool)
			free.Lims = append(free.Lims, int32(n.most))
		}
		for _, length := range n.runs {
			// Each unit the batch's other holds take spoils at most one
			// run: one more than they could take leaves one whole.
			runs.Skus, runs.Pools = append(runs.Skus, n.sku), append(runs.Pools, n.pool)
			runs.MinLens, runs.Lims = append(runs.MinLens, int32(length)), append(runs.Lims, int32(n.most+1))
		}
	}
	p := newPipe(conn)
	q := db.New(p)
	var (
		namedRows []db.UnitsNamedRow
		freeRows  []db.UnitsFreeRow
		runRows   []db.UnitsRunsRow
		reading   = []func(){}
	)
	if len(named.Ids) > 0 {
		r := q.UnitsNamed(ctx, []db.UnitsNamedParams{named})
		reading = append(reading, func() { namedRows, _ = collect(r.Query) })
	}
	if len(free.Skus) > 0 {
		r := q.UnitsFree(ctx, []db.UnitsFreeParams{free})
		reading = append(reading, func() { freeRows, _ = collect(r.Query) })
	}
	if len(runs.Skus) > 0 {
		r := q.UnitsRuns(ctx, []db.UnitsRunsParams{runs})
		reading = append(reading, func() { runRows, _ = collect(r.Query) })
	}
	err := p.roundTrip(ctx, func() {
		for _, read := range reading {
			read()
		}
	})
	if err != nil {
		return fmt.Errorf("read units: %w", err)
	}

	units := make(map[string]*poolUnits, len(needs))
	for _, k := range order {
		units[k] = &poolUnits{named: map[string]namedUnit{}, runs: map[int64][][]string{}}
	}
	// The pools read are serialized, so each lives at one location: the
	// free units and runs read by (sku, pool) are its row's.
	byPool := map[string]string{}
	for _, k := range order {
		byPool[poolKey(needs[k].sku, needs[k].pool)] = k
	}
	for _, u := range namedRows {
		// A named unit of the SKU, whichever pool it is in: the decision
		// refuses one that is not in the line's pool.
		for _, k := range order {
			if needs[k].sku == u.Sku {
				units[k].named[u.ID] = namedUnit{location: u.Location, pool: u.Pool, status: u.Status}
			}
		}
	}
	for _, u := range freeRows {
		if k, ok := byPool[poolKey(u.Sku, u.Pool)]; ok {
			units[k].free = append(units[k].free, u.ID)
		}
	}
	for _, r := range runRows {
		if k, ok := byPool[poolKey(r.Sku, r.Pool)]; ok {
			units[k].runs[int64(r.MinLen)] = append(units[k].runs[int64(r.MinLen)], r.Ids)
		}
	}
	for k, u := range units {
		row := st.rows[k]
		row.units = u
		st.rows[k] = row
	}
	return nil
}
