package inventory

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stockhold/stockhold/app/domain"
)

// lockedRow is a stock row as a hold batch locked it: what its grants are
// decided on. units is read only for a serialized row a hold of the batch
// needs units of.
type lockedRow struct {
	available  int64
	status     string
	serialized bool
	units      *poolUnits
}

// poolUnits is what a hold batch read of one serialized pool's units: the
// units the batch's holds name, the available ones in seat order (enough
// for every pick), and, per length asked for, the runs of available units
// with consecutive positions in one group at least that long (enough for
// every adjacent pick), all as of the row's lock.
type poolUnits struct {
	named map[string]namedUnit
	free  []string
	runs  map[int64][][]string
}

type namedUnit struct {
	pool, status string
}

// verdict is the decision on one hold of a batch: granted, or refused on
// one of its lines.
type verdict struct {
	granted bool
	// line is the line refused, why the reason (unknown_sku, sku_paused,
	// out_of_stock, limit_exceeded or unit_unavailable), left what the row
	// had left for it (out_of_stock), units the units refused
	// (unit_unavailable).
	line  Line
	why   domain.Code
	left  int64
	units []string
	// picked are a granted hold's units, by rowKey, for its lines on
	// serialized rows.
	picked map[string][]string
}

// decideHolds decides a batch's holds against its stock rows as locked
// (keyed by rowKey; a row missing is an unknown SKU), in arrival order,
// each as it would have been decided alone after the ones before it: a
// hold all of whose lines fit what is left of their rows is granted and
// takes its units from what is left; any other is refused on its first
// line (in lock order) that does not fit, and takes nothing, so a
// multi-line hold is all or nothing. A campaign's cap per order refuses a
// hold before its stock is looked at. On a pool of units with an identity
// a line takes the units it names, if each is available and not taken by
// an earlier hold of the batch (a line naming one that is not is refused
// unit_unavailable, naming them, whatever the counters say), and picks the
// rest in seat order (adjacent: the first run of consecutive positions in
// one group that has room). It returns a verdict per hold, and the units granted per row,
// which the write takes from each row at once. It touches no database: the
// write's conditional UPDATEs check it there.
func decideHolds(rows map[string]lockedRow, holds []hold) ([]verdict, map[string]int64) {
	verdicts := make([]verdict, len(holds))
	taken := make(map[string]int64, len(rows))
	unitsTaken := map[string]bool{} // rowKey + "\x00" + unit id
	for i, h := range holds {
		verdicts[i] = decideHold(rows, taken, unitsTaken, h)
		if !verdicts[i].granted {
			continue
		}
		for _, l := range h.lines {
			k := rowKey(l.SKU, l.Pool)
			taken[k] += l.Quantity
			for _, id := range verdicts[i].picked[k] {
				unitsTaken[k+"\x00"+id] = true
			}
		}
	}
	return verdicts, taken
}

// decideHold decides one hold against rows less what earlier holds of the
// batch took.
func decideHold(rows map[string]lockedRow, taken map[string]int64, unitsTaken map[string]bool, h hold) verdict {
	if h.maxPerOrder != nil {
		for _, l := range h.lines {
			if l.Quantity > *h.maxPerOrder {
				return verdict{line: l, why: domain.CodeLimitExceeded, left: *h.maxPerOrder}
			}
		}
	}
	var picked map[string][]string
	for _, l := range h.lines {
		k := rowKey(l.SKU, l.Pool)
		r, ok := rows[k]
		ask, asked := h.asks[k]
		var gone []string // the named units taken, whatever the counters say
		if r.serialized {
			gone = namedTaken(r.units, k, l, ask.named, unitsTaken)
		}
		switch left := r.available - taken[k]; {
		case !ok:
			return verdict{line: l, why: domain.CodeUnknownSKU}
		case r.status != StockOnSale:
			return verdict{line: l, why: domain.CodeSKUPaused}
		case !r.serialized && asked && len(ask.named) > 0:
			return verdict{line: l, why: domain.CodeUnitUnavailable, units: ask.named}
		case !r.serialized && asked && ask.adjacent:
			return verdict{line: l, why: domain.CodeUnitUnavailable}
		case len(gone) > 0:
			return verdict{line: l, why: domain.CodeUnitUnavailable, units: gone}
		case left < l.Quantity:
			return verdict{line: l, why: domain.CodeOutOfStock, left: left}
		case !r.serialized:
			continue
		}
		if !asked {
			ask = unitAsk{pick: l.Quantity}
		}
		units, v := pickUnits(r.units, k, l, ask, unitsTaken)
		if !v.granted {
			return v
		}
		if picked == nil {
			picked = map[string][]string{}
		}
		picked[k] = units
	}
	return verdict{granted: true, picked: picked}
}

// namedTaken returns the units of named (line l's, on row k) that pool
// (as read) does not have available, or that earlier holds of the batch
// took.
func namedTaken(pool *poolUnits, k string, l Line, named []string, unitsTaken map[string]bool) []string {
	if pool == nil {
		pool = &poolUnits{}
	}
	var bad []string
	for _, id := range named {
		u, ok := pool.named[id]
		if !ok || u.pool != l.Pool || u.status != UnitAvailable || unitsTaken[k+"\x00"+id] {
			bad = append(bad, id)
		}
	}
	return bad
}

// pickUnits chooses line l's units from pool (as read) less the units
// earlier holds of the batch took: the units ask names (each available,
// see namedTaken), then ask.pick more in seat order. It returns them in
// byte order, or the refusal.
func pickUnits(pool *poolUnits, k string, l Line, ask unitAsk, unitsTaken map[string]bool) ([]string, verdict) {
	if pool == nil {
		pool = &poolUnits{}
	}
	free := func(id string) bool { return !unitsTaken[k+"\x00"+id] }
	units := slices.Clone(ask.named)
	mine := func(id string) bool { return slices.Contains(ask.named, id) }
	if ask.adjacent {
		run := adjacentRun(pool.runs[ask.pick], int(ask.pick), func(id string) bool { return free(id) && !mine(id) })
		if run == nil {
			return nil, verdict{line: l, why: domain.CodeOutOfStock, left: -1}
		}
		units = append(units, run...)
	} else {
		for _, id := range pool.free {
			if int64(len(units)-len(ask.named)) == ask.pick {
				break
			}
			if free(id) && !mine(id) {
				units = append(units, id)
			}
		}
		if int64(len(units)-len(ask.named)) < ask.pick {
			return nil, verdict{line: l, why: domain.CodeOutOfStock, left: int64(len(units) - len(ask.named))}
		}
	}
	slices.SortFunc(units, strings.Compare)
	return units, verdict{granted: true}
}

// adjacentRun returns the first n consecutive units of runs (each a run of
// consecutive positions in one group, in seat order) that ok takes, or
// nil.
func adjacentRun(runs [][]string, n int, ok func(string) bool) []string {
	for _, run := range runs {
		start := 0
		for i, id := range run {
			if !ok(id) {
				start = i + 1
				continue
			}
			if i-start+1 == n {
				return slices.Clone(run[start : i+1])
			}
		}
	}
	return nil
}

// capError is the refusal of a hold over its campaign's cap per order.
func capError(campaign string, l Line, maxPerOrder int64) error {
	return &domain.Error{Code: domain.CodeLimitExceeded, SKU: l.SKU, Pool: l.Pool,
		Detail: fmt.Sprintf("campaign %q allows at most %d of SKU %q in one hold, %d requested", campaign, maxPerOrder, l.SKU, l.Quantity)}
}
