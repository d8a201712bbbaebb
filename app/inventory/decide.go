package inventory

import (
	"fmt"

	"github.com/stockhold/stockhold/app/domain"
)

// lockedRow is a stock row as a hold batch locked it: what its grants are
// decided on.
type lockedRow struct {
	available int64
	status    string
}

// verdict is the decision on one hold of a batch: granted, or refused on
// one of its lines.
type verdict struct {
	granted bool
	// line is the line refused, why the reason (unknown_sku, sku_paused,
	// out_of_stock or limit_exceeded), left what the row had left for it
	// (out_of_stock).
	line Line
	why  domain.Code
	left int64
}

// decideHolds decides a batch's holds against its stock rows as locked
// (keyed by rowKey; a row missing is an unknown SKU), in arrival order,
// each as it would have been decided alone after the ones before it: a
// hold all of whose lines fit what is left of their rows is granted and
// takes its units from what is left; any other is refused on its first
// line (in lock order) that does not fit, and takes nothing, so a
// multi-line hold is all or nothing. A campaign's cap per order refuses a
// hold before its stock is looked at. It returns a verdict per hold, and
// the units granted per row, which the write takes from each row at once.
// It touches no database: the write's conditional UPDATE checks it there.
func decideHolds(rows map[string]lockedRow, holds []hold) ([]verdict, map[string]int64) {
	verdicts := make([]verdict, len(holds))
	taken := make(map[string]int64, len(rows))
	for i, h := range holds {
		verdicts[i] = decideHold(rows, taken, h)
		if !verdicts[i].granted {
			continue
		}
		for _, l := range h.lines {
			taken[rowKey(l.SKU, l.Pool)] += l.Quantity
		}
	}
	return verdicts, taken
}

// decideHold decides one hold against rows less what earlier holds of the
// batch took.
func decideHold(rows map[string]lockedRow, taken map[string]int64, h hold) verdict {
	if h.maxPerOrder != nil {
		for _, l := range h.lines {
			if l.Quantity > *h.maxPerOrder {
				return verdict{line: l, why: domain.CodeLimitExceeded, left: *h.maxPerOrder}
			}
		}
	}
	for _, l := range h.lines {
		k := rowKey(l.SKU, l.Pool)
		r, ok := rows[k]
		switch left := r.available - taken[k]; {
		case !ok:
			return verdict{line: l, why: domain.CodeUnknownSKU}
		case r.status != StockOnSale:
			return verdict{line: l, why: domain.CodeSKUPaused}
		case left < l.Quantity:
			return verdict{line: l, why: domain.CodeOutOfStock, left: left}
		}
	}
	return verdict{granted: true}
}

// capError is the refusal of a hold over its campaign's cap per order.
func capError(campaign string, l Line, maxPerOrder int64) error {
	return &domain.Error{Code: domain.CodeLimitExceeded, SKU: l.SKU, Pool: l.Pool,
		Detail: fmt.Sprintf("campaign %q allows at most %d of SKU %q in one hold, %d requested", campaign, maxPerOrder, l.SKU, l.Quantity)}
}
