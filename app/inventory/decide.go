package inventory

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// lockedRow is a stock row as a hold batch locked it: what its grants are
// decided on, with its location as the batch read it. units is read only
// for a serialized row a hold of the batch may need units of.
type lockedRow struct {
	sku, location, pool string
	available           int64
	// short is the row's held units a count found missing: a joined
	// change's units pay it before they are available (batch_joined.go).
	short      int64
	status     string
	serialized bool
	units      *poolUnits
	// priority, active and stopped are the row's location's: allocation
	// takes the lowest priority first, never an inactive location, nor one
	// whose sales are stopped (stopped is its stop-sale's reason).
	priority int32
	active   bool
	stopped  string
	// latitude and longitude are where the location is, when known: the
	// nearest strategy allocates by them.
	latitude, longitude *float64
	// limits are the row's pool's limits (nil: none).
	limits *skuLimits
	// promise is what the row may promise beyond its stock (nil: its pool
	// has no backorder policy; backorders.go).
	promise *rowPromise
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
	location, pool, status string
}

// stockRows is a hold batch's locked stock rows, by rowKey, and, per (sku,
// pool), the keys of its rows at every location in allocation order:
// lowest priority number first, ties by location id.
type stockRows struct {
	rows   map[string]lockedRow
	places map[string][]string
	// lockOrder is the rows in the order they were locked, the order
	// their counters move in.
	lockOrder []Line
	// limits are the limits of the pools that have some, by poolKey;
	// customers what each customer's holds held of a pool before the
	// batch, by customerKey, and what the batch's grants took since
	// (limits.go).
	limits    map[string]skuLimits
	customers map[string]int64
	// promised is what the batch's grants promised per rowKey, and
	// promisingPools the pools with a backorder policy, by poolKey; both
	// nil when no row has one (backorders.go).
	promised       map[string]int64
	promisingPools map[string]bool
}

func newStockRows(rows []lockedRow) stockRows {
	out := stockRows{rows: make(map[string]lockedRow, len(rows)), places: map[string][]string{}}
	for _, r := range rows {
		k := rowKey(r.sku, r.location, r.pool)
		out.rows[k] = r
		sp := poolKey(r.sku, r.pool)
		out.places[sp] = append(out.places[sp], k)
		if r.limits != nil {
			if out.limits == nil {
				out.limits = map[string]skuLimits{}
			}
			out.limits[sp] = *r.limits
		}
		if r.promise != nil {
			if out.promised == nil {
				out.promised, out.promisingPools = map[string]int64{}, map[string]bool{}
			}
			out.promisingPools[sp] = true
		}
	}
	for _, keys := range out.places {
		slices.SortFunc(keys, func(a, b string) int {
			ra, rb := out.rows[a], out.rows[b]
			if ra.priority != rb.priority {
				return cmp.Compare(ra.priority, rb.priority)
			}
			return strings.Compare(ra.location, rb.location)
		})
	}
	return out
}

// verdict is the decision on one hold of a batch: granted, with where each
// of its lines is taken from, or refused on one of its lines.
type verdict struct {
	granted bool
	// lines are a granted hold's lines as allocated: one per stock row,
	// in lock order.
	lines []Line
	// line is the line refused, why the reason (unknown_sku, sku_paused,
	// out_of_stock, limit_exceeded, unit_unavailable, location_inactive,
	// stop_sale), left what the rows had left for it (out_of_stock), units
	// the units refused (unit_unavailable).
	line  want
	why   domain.Code
	left  int64
	units []string
	// picked are a granted hold's units, by rowKey, for its lines on
	// serialized rows.
	picked map[string][]string
	// reason is why sales are stopped (stop_sale), and at the location
	// stopped when the line names none.
	reason string
	at     string
	// places is how many locations an unallocated line refused
	// out_of_stock could have come from: with one (every SKU before there
	// were locations) the refusal reads as it always did.
	places int
	// limit names the SKU's limit a limit_exceeded refusal is by (empty:
	// its campaign's max_per_order), left then being what it allows;
	// held and window are a max_per_customer refusal's customer's units
	// and the window they were counted over (seconds, 0: ever).
	limit        string
	held, window int64
}

// decideHolds decides a batch's holds against its stock rows as locked, in
// arrival order, each as it would have been decided alone after the ones
// before it. A line that names a location is taken from that location's
// row; any other is allocated: among the rows of its (sku, pool) at the
// locations the hold may use (active, sales not stopped there, the key's
// locations if it is bound to some), in the order of its strategy
// (strategy.go: lowest priority first, most left first, or nearest to its
// ship_to first, ties by priority), the first on sale that can fill the
// whole line, or, with split, as much as each has in that order (lines that name their location are taken first, so that
// allocation fills around them). A hold all of whose lines fit what is
// left of their rows is granted and takes its units from what is left; any
// other is refused on its first line (in that order) that does not fit,
// and takes nothing,
// so a multi-line hold is all or nothing. A campaign's cap per order
// refuses a hold before its stock is looked at. On a pool of units with an
// identity a line takes the units it names, if each is available and not
// taken by an earlier hold of the batch (a line naming one that is not is
// refused unit_unavailable, naming them, whatever the counters say), and
// picks the rest in seat order (adjacent: the first run of consecutive
// positions in one group that has room). It returns a verdict per hold,
// and the units granted per row,
// which the write takes from each row at once. It touches no database: the
// write's conditional UPDATEs check it there.
func decideHolds(st stockRows, holds []hold) ([]verdict, map[string]int64) {
	verdicts := make([]verdict, len(holds))
	taken := make(map[string]int64, len(st.rows))
	unitsTaken := map[string]bool{} // rowKey + "\x00" + unit id
	for i, h := range holds {
		verdicts[i] = decideHold(st, taken, unitsTaken, h)
		if !verdicts[i].granted {
			continue
		}
		st.tookForCustomer(h, verdicts[i].lines)
		for _, l := range verdicts[i].lines {
			k := rowKey(l.SKU, l.Location, l.Pool)
			taken[k] += l.Quantity - l.Backordered
			if l.Backordered > 0 {
				st.promised[k] += l.Backordered
			}
			for _, id := range verdicts[i].picked[k] {
				unitsTaken[k+"\x00"+id] = true
			}
		}
	}
	return verdicts, taken
}

// decideHold decides one hold against the rows less what earlier holds of
// the batch took (taken), and less what its own earlier lines take.
func decideHold(st stockRows, taken map[string]int64, unitsTaken map[string]bool, h hold) verdict {
	if w, over := overCap(h); over {
		return verdict{line: w, why: domain.CodeLimitExceeded, left: *h.maxPerOrder}
	}
	if v, over := overLimits(st, h); over {
		return v
	}
	d := &holdDecision{st: st, taken: taken, unitsTaken: unitsTaken, h: h, mine: map[string]int64{}}
	var together map[*BundleLine]bool // bundle lines taken from one location
	for _, w := range namedFirst(h.wants) {
		var (
			v  verdict
			ok bool
		)
		d.cur = w.bundle
		if w.bundle != nil && !w.Split && w.Location == "" {
			if together[w.bundle] {
				continue
			}
			if together == nil {
				together = map[*BundleLine]bool{}
			}
			together[w.bundle] = true
			if v, ok = d.together(w.bundle, h.wants); !ok {
				return v
			}
			continue
		}
		if w.Partial {
			w = d.partial(w)
		}
		if w.Location != "" {
			v, ok = d.takeNamed(w)
		} else {
			v, ok = d.allocate(w)
		}
		if !ok {
			return v
		}
	}
	slices.SortFunc(d.lines, compareLines)
	return verdict{granted: true, lines: d.lines, picked: d.picked}
}

// holdDecision is one hold being decided (decideHold) against a batch's
// rows as locked, after what the batch's earlier holds took (taken,
// unitsTaken), with what its own earlier lines take.
type holdDecision struct {
	st         stockRows
	taken      map[string]int64
	unitsTaken map[string]bool
	h          hold
	// mine is what the hold's earlier lines take, by rowKey; mineUnits the
	// units they took (rowKey + "\x00" + unit id): two lines of one SKU on
	// one pool of units (one naming the location, one allocated) never
	// pick the same unit.
	mine      map[string]int64
	mineUnits map[string]bool
	// minePromised is what the hold's earlier lines promised beyond the
	// rows' stock, by rowKey (backorders.go).
	minePromised map[string]int64
	// lines and picked are what the hold takes so far.
	lines  []Line
	picked map[string][]string
	// cur is the bundle line of the want being taken (nil: none).
	cur *BundleLine
}

// namedFirst is wants with the lines that name their location first:
// allocation fills around them.
func namedFirst(wants []want) []want {
	ordered := make([]want, 0, len(wants))
	for _, w := range wants {
		if w.Location != "" {
			ordered = append(ordered, w)
		}
	}
	for _, w := range wants {
		if w.Location == "" {
			ordered = append(ordered, w)
		}
	}
	return ordered
}

// left is what row k has left for the hold.
func (d *holdDecision) left(k string) int64 {
	return d.st.rows[k].available - d.taken[k] - d.mine[k]
}

// take takes q units of row k for the hold, and the units named.
func (d *holdDecision) take(k string, q int64, units []string) {
	r := d.st.rows[k]
	d.mine[k] += q
	// Two lines of one SKU may land on one row (one naming the location,
	// one allocated there or split over it): they are one line of the
	// hold, of both quantities.
	merged := false
	for i, l := range d.lines {
		if l.SKU == r.sku && l.Location == r.location && l.Pool == r.pool {
			d.lines[i].Quantity += q
			merged = true
			break
		}
	}
	if !merged {
		d.lines = append(d.lines, Line{SKU: r.sku, Location: r.location, Pool: r.pool, Quantity: q, Bundle: d.cur})
	}
	if len(units) == 0 {
		return
	}
	if d.picked == nil {
		d.picked = map[string][]string{}
	}
	if d.mineUnits == nil {
		d.mineUnits = map[string]bool{}
	}
	d.picked[k] = append(d.picked[k], units...)
	for _, id := range units {
		d.mineUnits[k+"\x00"+id] = true
	}
}

// takeNamed takes line w, which names its location, from that location's
// row, or returns its refusal.
func (d *holdDecision) takeNamed(w want) (verdict, bool) {
	ask, asked := d.h.asks[poolKey(w.SKU, w.Pool)]
	k := rowKey(w.SKU, w.Location, w.Pool)
	r, ok := d.st.rows[k]
	switch {
	case !ok:
		return verdict{line: w, why: domain.CodeUnknownSKU}, false
	case !r.active:
		return verdict{line: w, why: domain.CodeLocationInactive}, false
	case r.stopped != "":
		return verdict{line: w, why: domain.CodeStopSale, reason: r.stopped}, false
	}
	units, v := fits(r, k, w, ask, asked, d.left(k), d.unitsTaken, d.mineUnits)
	if !v.granted && !(v.why == domain.CodeOutOfStock && d.promise(w, []string{k})) {
		return v, false
	}
	if v.granted {
		d.take(k, w.Quantity, units)
	}
	return verdict{}, true
}

// allocate takes line w, which names no location, from the rows of its
// pool at the locations the hold may use, in the order of the hold's
// strategy (split, or whole from the first that has it all), or returns
// its refusal.
func (d *holdDecision) allocate(w want) (verdict, bool) {
	eligible, v, ok := d.eligible(w)
	if !ok {
		return v, false
	}
	if w.Split && !anySerialized(d.st, eligible) {
		return d.split(w, eligible)
	}
	return d.whole(w, eligible)
}

// eligible is the rows of line w's pool, which names no location, at the
// locations the hold may use (active, sales not stopped there, the key's
// locations if it is bound to some), in the order of the hold's strategy;
// or the refusal when there are none, or all are paused.
func (d *holdDecision) eligible(w want) ([]string, verdict, bool) {
	places := d.st.places[poolKey(w.SKU, w.Pool)]
	if len(places) == 0 {
		return nil, verdict{line: w, why: domain.CodeUnknownSKU}, false
	}
	var (
		eligible []string
		paused   int
	)
	for _, k := range places {
		r := d.st.rows[k]
		if !r.active || r.stopped != "" || !d.h.mayUse(r.location) {
			continue
		}
		eligible = append(eligible, k)
		if r.status != stock.StockOnSale {
			paused++
		}
	}
	switch {
	case len(eligible) == 0:
		return nil, noneEligible(d.st, places, d.h, w), false
	case paused == len(eligible):
		return nil, verdict{line: w, why: domain.CodeSKUPaused}, false
	}
	return d.order(eligible), verdict{}, true
}

// split takes line w from the eligible rows on sale in their order, as
// much as each has left, or refuses it out_of_stock with what they had.
func (d *holdDecision) split(w want, eligible []string) (verdict, bool) {
	type part struct {
		k string
		q int64
	}
	need, have := w.Quantity, int64(0)
	var parts []part
	for _, k := range eligible {
		if d.st.rows[k].status != stock.StockOnSale || d.left(k) <= 0 {
			continue
		}
		q := min(need, d.left(k))
		parts = append(parts, part{k, q})
		need -= q
		have += q
		if need == 0 {
			break
		}
	}
	if need > 0 && d.promise(w, eligible) {
		return verdict{}, true
	}
	if need > 0 {
		return verdict{line: w, why: domain.CodeOutOfStock, left: have, places: len(eligible)}, false
	}
	for _, p := range parts {
		d.take(p.k, p.q, nil)
	}
	return verdict{}, true
}

// whole takes line w whole from the first eligible row on sale it fits,
// or returns the refusal of the rows: unit_unavailable when one said so,
// out_of_stock with the most any had left.
func (d *holdDecision) whole(w want, eligible []string) (verdict, bool) {
	ask, asked := d.h.asks[poolKey(w.SKU, w.Pool)]
	var refusal verdict
	best := int64(0)
	for _, k := range eligible {
		r := d.st.rows[k]
		if r.status != stock.StockOnSale {
			continue
		}
		units, v := fits(r, k, w, ask, asked, d.left(k), d.unitsTaken, d.mineUnits)
		if v.granted {
			d.take(k, w.Quantity, units)
			return verdict{}, true
		}
		best = max(best, d.left(k))
		if refusal.why == "" || v.why == domain.CodeUnitUnavailable {
			refusal = v
		}
	}
	if refusal.why == domain.CodeOutOfStock && refusal.left >= 0 {
		if d.promise(w, eligible) {
			return verdict{}, true
		}
		refusal.left, refusal.places = best, len(eligible)
	}
	return refusal, false
}

// anySerialized reports whether one of the rows keys is a pool of units
// with an identity: such a pool lives at one location, so a line on it is
// never split.
func anySerialized(st stockRows, keys []string) bool {
	for _, k := range keys {
		if st.rows[k].serialized {
			return true
		}
	}
	return false
}

// fits decides whether want w can be taken whole from row r (key k), which
// has left available for it: a paused row, a row short of stock, or units
// asked of a pool without them (or taken) refuse it. On a serialized row
// it picks w's units and returns them.
func fits(r lockedRow, k string, w want, ask unitAsk, asked bool, left int64, unitsTaken, mineUnits map[string]bool) ([]string, verdict) {
	switch {
	case r.status != stock.StockOnSale:
		return nil, verdict{line: w, why: domain.CodeSKUPaused}
	case !r.serialized && asked && len(ask.named) > 0:
		return nil, verdict{line: w, why: domain.CodeUnitUnavailable, units: ask.named}
	case !r.serialized && asked && ask.adjacent:
		return nil, verdict{line: w, why: domain.CodeUnitUnavailable}
	case r.serialized && len(namedTaken(r, k, w, ask.named, unitsTaken)) > 0:
		return nil, verdict{line: w, why: domain.CodeUnitUnavailable, units: namedTaken(r, k, w, ask.named, unitsTaken)}
	case left < w.Quantity:
		return nil, verdict{line: w, why: domain.CodeOutOfStock, left: left}
	case !r.serialized:
		return nil, verdict{granted: true}
	}
	if !asked {
		ask = unitAsk{pick: w.Quantity}
	}
	return pickUnits(r, k, w, ask, unitsTaken, mineUnits)
}

// compareLines orders lines as stock rows are locked: (sku, location,
// pool), byte by byte.
func compareLines(a, b Line) int {
	if d := strings.Compare(a.SKU, b.SKU); d != 0 {
		return d
	}
	if d := strings.Compare(a.Location, b.Location); d != 0 {
		return d
	}
	return strings.Compare(a.Pool, b.Pool)
}

// namedTaken returns the units of named (line l's, on row r, key k) that
// the row's units (as read) do not have available, or that earlier holds
// of the batch took.
func namedTaken(r lockedRow, k string, l want, named []string, unitsTaken map[string]bool) []string {
	pool := r.units
	if pool == nil {
		pool = &poolUnits{}
	}
	var bad []string
	for _, id := range named {
		u, ok := pool.named[id]
		if !ok || u.pool != l.Pool || u.location != r.location || u.status != stock.UnitAvailable || unitsTaken[k+"\x00"+id] {
			bad = append(bad, id)
		}
	}
	return bad
}

// pickUnits chooses line l's units from row r's units (as read) less the
// units earlier holds of the batch took (unitsTaken) and those the hold's
// own earlier lines took (mineUnits): the units ask names (each
// available, see namedTaken), then ask.pick more in seat order. It returns
// them in byte order, or the refusal.
func pickUnits(r lockedRow, k string, l want, ask unitAsk, unitsTaken, mineUnits map[string]bool) ([]string, verdict) {
	pool := r.units
	if pool == nil {
		pool = &poolUnits{}
	}
	free := func(id string) bool { return !unitsTaken[k+"\x00"+id] && !mineUnits[k+"\x00"+id] }
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
func capError(campaign string, l want, maxPerOrder int64) error {
	return &domain.Error{Code: domain.CodeLimitExceeded, SKU: l.SKU, Pool: l.Pool,
		Detail: fmt.Sprintf("campaign %q allows at most %d of SKU %q in one hold, %d requested", campaign, maxPerOrder, l.SKU, l.Quantity)}
}

// overCap reports whether hold h asks for more units of one SKU than its
// campaign's cap per order, counting the SKU's lines at every location
// together, and returns the SKU's first line with the SKU's total.
func overCap(h hold) (want, bool) {
	if h.maxPerOrder == nil {
		return want{}, false
	}
	if len(h.wants) == 1 {
		return h.wants[0], h.wants[0].Quantity > *h.maxPerOrder
	}
	for _, w := range h.wants { // the first of a SKU's lines over the cap is its first line
		total := int64(0)
		for _, o := range h.wants {
			if o.SKU == w.SKU {
				total += o.Quantity
			}
		}
		if total > *h.maxPerOrder {
			w.Quantity = total
			return w, true
		}
	}
	return want{}, false
}

// noneEligible is the refusal of line w of hold h, allocated among the
// rows places of its pool, when none of them may take it: stop_sale when
// a location the hold may use is active with its sales stopped (the first
// in allocation order: stock is there, an operator keeps it from sale),
// else out_of_stock with nothing left (inactive locations, or none the
// key may use).
func noneEligible(st stockRows, places []string, h hold, w want) verdict {
	for _, k := range places {
		if r := st.rows[k]; r.active && r.stopped != "" && h.mayUse(r.location) {
			return verdict{line: w, why: domain.CodeStopSale, reason: r.stopped, at: r.location}
		}
	}
	return verdict{line: w, why: domain.CodeOutOfStock, left: 0}
}
