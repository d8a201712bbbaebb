package inventory

import (
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Partial lines. A hold line with partial takes what is available of it,
// up to its quantity and at least its min_quantity (one when not given),
// rather than being refused whole: the hold's other lines stay all or
// nothing, and the answer, the events and the ledger carry the quantity
// each line got. What is available is what its batch's rows have left for
// it: at the location it names, else the most at one location it may
// use, or, with split, the sum over them; a pool's step takes it down to
// a multiple. A line that cannot get its minimum is refused as a whole
// line would be, so a sold-out pool refuses a partial line as any other
// (the memory of sold-out pools stays the batch's answer).

// validatePartial checks item i's partial and min_quantity: a partial
// line is one line of its SKU in the request, and its minimum is from 1
// to its quantity.
func (r HoldRequest) validatePartial(i int) error {
	it := r.Items[i]
	switch {
	case !it.Partial:
		return domain.Invalid("items[%d].min_quantity goes with partial: true", i)
	case it.MinQuantity < 0 || it.MinQuantity > it.Quantity:
		return domain.Invalid("items[%d].min_quantity must be from 1 to the line's quantity (%d)", i, it.Quantity)
	}
	for j, o := range r.Items {
		if j != i && o.SKU == it.SKU {
			return domain.Invalid("items ask for SKU %q partially: give that SKU in one line", it.SKU)
		}
	}
	return nil
}

// partial is w, a partial line, with the quantity it takes: what its rows
// have left for it, up to w.Quantity, in multiples of its pool's step;
// w as asked when that is below its minimum (or its pool's
// min_per_order), which the batch then refuses as it refuses a whole
// line.
func (d *holdDecision) partial(w want) want {
	have := d.partialLeft(w)
	lim := d.st.limits[poolKey(w.SKU, w.Pool)]
	if lim.step != nil {
		have -= have % *lim.step
	}
	least := max(w.Min, 1)
	if lim.minPerOrder != nil {
		least = max(least, *lim.minPerOrder)
	}
	if have < least || have >= w.Quantity {
		return w
	}
	w.Quantity = have
	return w
}

// partialLeft is what the rows line w may draw on have left for it: its
// named location's row, else the most any eligible row on sale has, or
// with split their sum.
func (d *holdDecision) partialLeft(w want) int64 {
	if w.Location != "" {
		k := rowKey(w.SKU, w.Location, w.Pool)
		if r, ok := d.st.rows[k]; ok && r.active && r.stopped == "" && r.status == stock.StockOnSale {
			return max(d.left(k), 0)
		}
		return 0
	}
	var most, sum int64
	for _, k := range d.st.places[poolKey(w.SKU, w.Pool)] {
		r := d.st.rows[k]
		if !r.active || r.stopped != "" || r.status != stock.StockOnSale || !d.h.mayUse(r.location) {
			continue
		}
		left := max(d.left(k), 0)
		most, sum = max(most, left), sum+left
	}
	if w.Split && !anySerialized(d.st, d.st.places[poolKey(w.SKU, w.Pool)]) {
		return sum
	}
	return most
}
