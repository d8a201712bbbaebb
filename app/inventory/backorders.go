package inventory

import (
	"time"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/stock"
)

// Backorders: a pool with a backorder policy (stock.Backorders) lets a
// line that does not fit what a row has on hand take what is there and
// promise the rest, within what the row may still promise. The decision
// stays pure: StockLockMany reads, with each policy row's lock, what it
// promised and what is on its way within its horizon; the batch's grants
// move backordered with available and reserved (StockHoldsApply), where
// the CHECK stock_backordered refuses any promise past the policy.
//
// A line is promised only when no row it may use has it whole on hand
// (named: its own row), whole at one row (the first in the hold's
// strategy's order that can), never for a partial line, nor on a pool of
// units with an identity.

// rowPromise is what a locked row with a backorder policy may promise.
type rowPromise struct {
	// before is what the row had promised when the batch locked it; room
	// what it may promise more: below_zero plus what is on its way within
	// the horizon, less before.
	before, room int64
	// soon is what is on its way within the horizon, transfers in transit
	// first, then inbound lines by expected day: receipts fill promises
	// oldest first, so the n-th unit promised is filled by the n-th to
	// arrive.
	soon []delivery
}

type delivery struct {
	on    string // expected day; empty for a transfer in transit
	units int64
}

// promiseOf is row r's promise, nil without a backorder policy.
func promiseOf(r db.StockLockManyRow) *rowPromise {
	if r.BackorderLimit == 0 && r.BackorderHorizonDays == nil {
		return nil
	}
	p := &rowPromise{before: r.Backordered}
	soon := int64(0)
	for i, u := range r.SoonUnits {
		d := delivery{units: u}
		if i < len(r.SoonOn) && r.SoonOn[i].Valid {
			d.on = r.SoonOn[i].Time.Format(time.DateOnly)
		}
		p.soon = append(p.soon, d)
		soon += u
	}
	p.room = r.BackorderLimit + soon - r.Backordered
	return p
}

// waiting is how many of row r's available units what it promised rests
// on: its promises beyond below_zero and what is on its way within the
// horizon (a receipt leaves them so when it skips a hold being changed,
// or when a delivery is cancelled after units were stocked by hand). No
// hold takes them, as the CHECK stock_backordered would refuse it.
func waiting(r db.StockLockManyRow) int64 {
	if r.Backordered == 0 {
		return 0
	}
	cover := r.BackorderLimit
	for _, u := range r.SoonUnits {
		cover += u
	}
	return min(r.Available, max(0, r.Backordered-cover))
}

// givenBack is p after a change joined to the batch gave n promised
// units back (p itself when there are none, or no policy).
func (p *rowPromise) givenBack(n int64) *rowPromise {
	if p == nil || n == 0 {
		return p
	}
	q := *p
	q.before -= n
	q.room += n
	return &q
}

// expectedOn is the day the delivery that fills the n-th unit the row has
// promised is expected: empty when a transfer in transit fills it, or
// none within the horizon does (promised below zero).
func (p *rowPromise) expectedOn(n int64) string {
	for _, d := range p.soon {
		if n <= d.units {
			return d.on
		}
		n -= d.units
	}
	return ""
}

// promising reports whether the batch has a row with a backorder policy
// on pool (sku, pool): sold-out memory never remembers such a pool.
func (st stockRows) promising(sku, pool string) bool {
	return st.promised != nil && st.promisingPools[poolKey(sku, pool)]
}

// promisedLeft is what row k may still promise for the hold: its room
// less what the batch's earlier holds and the hold's earlier lines
// promised.
func (d *holdDecision) promisedLeft(k string) int64 {
	r := d.st.rows[k]
	if r.promise == nil {
		return 0
	}
	return r.promise.room - d.st.promised[k] - d.minePromised[k]
}

// promise takes line w whole from the first of rows keys (in the order
// given) that can: what the row has left on hand, and the rest promised.
// It reports whether it did.
func (d *holdDecision) promise(w want, keys []string) bool {
	if d.st.promised == nil || w.Partial {
		return false
	}
	if _, asked := d.h.asks[poolKey(w.SKU, w.Pool)]; asked {
		return false
	}
	for _, k := range keys {
		r := d.st.rows[k]
		if r.promise == nil || r.serialized || r.status != stock.StockOnSale {
			continue
		}
		have := max(d.left(k), 0)
		b := w.Quantity - have
		if b <= 0 || b > d.promisedLeft(k) {
			continue
		}
		d.take(k, w.Quantity, nil)
		d.mine[k] -= b
		if d.minePromised == nil {
			d.minePromised = map[string]int64{}
		}
		d.minePromised[k] += b
		for i, l := range d.lines {
			if l.SKU == r.sku && l.Location == r.location && l.Pool == r.pool {
				d.lines[i].Backordered += b
				d.lines[i].ExpectedOn = r.promise.expectedOn(r.promise.before + d.st.promised[k] + d.minePromised[k])
			}
		}
		return true
	}
	return false
}
