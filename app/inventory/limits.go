package inventory

import (
	"fmt"
	"strconv"
	"time"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// The limits a hold is held to, per SKU's pool, at every location
// together: at most max_per_order and at least min_per_order units of
// the SKU in one hold, in multiples of step (a pack size), and at most
// max_per_customer units held or bought by the hold's customer over a
// window. A pool's limits (sku_limits) are read with its stock rows'
// lock, so a hold batch decides on the limits as they are when it
// decides; a campaign's max_per_customer comes with its terms
// (campaignTerms), and a SKU's own on the campaign's pool wins over it.
//
// What a customer holds is read in the batch's first round trip, after
// the lock: a hold that carries customer_ref locks its pools' rows at
// every location (lockKeys), so two holds of one customer on one pool,
// in two batches or on two instances, take the same locks, and the later
// one counts what the earlier one committed; within a batch, decideHolds
// adds what each grant took.

// Names of the limits, as a limit_exceeded refusal names them.
const (
	LimitMaxPerOrder    = "max_per_order"
	LimitMinPerOrder    = "min_per_order"
	LimitStep           = "step"
	LimitMaxPerCustomer = "max_per_customer"
)

// skuLimits are a pool's limits as a hold batch read them (nil: not set).
type skuLimits struct {
	maxPerOrder, minPerOrder, step, maxPerCustomer *int64
	// window is max_per_customer's window in seconds (nil: every hold).
	window *int64
}

// limitsOf is a locked row's pool's limits, or nil when it has none.
func limitsOf(r db.StockLockManyRow) *skuLimits {
	if r.MaxPerOrder == nil && r.MinPerOrder == nil && r.Step == nil && r.MaxPerCustomer == nil {
		return nil
	}
	return &skuLimits{maxPerOrder: r.MaxPerOrder, minPerOrder: r.MinPerOrder, step: r.Step,
		maxPerCustomer: r.MaxPerCustomer, window: r.CustomerWindowSeconds}
}

// customerKey identifies what one customer holds of one SKU's pool.
func customerKey(customer, sku, pool string) string {
	return customer + "\x00" + sku + "\x00" + pool
}

// perCustomer is the cap per customer on pool pk for hold h, and its
// window: the pool's own, else its campaign's.
func (st stockRows) perCustomer(h hold, pk string) (*int64, *int64) {
	if l, ok := st.limits[pk]; ok && l.maxPerCustomer != nil {
		return l.maxPerCustomer, l.window
	}
	return h.maxPerCustomer, h.customerWindow
}

// overLimits returns the refusal of hold h by a limit of one of its SKUs'
// pools, counting each SKU's lines at every location together (its first
// line with the SKU's total), or false when every limit lets it through.
func overLimits(st stockRows, h hold) (verdict, bool) {
	if len(st.limits) == 0 && (h.maxPerCustomer == nil || h.req.CustomerRef == "") {
		return verdict{}, false
	}
	for i := 0; i < len(h.wants); {
		w := h.wants[i]
		total := int64(0)
		for ; i < len(h.wants) && h.wants[i].SKU == w.SKU; i++ { // wants are sorted by SKU
			total += h.wants[i].Quantity
		}
		w.Quantity = total
		if v, over := st.overPoolLimits(h, w); over {
			return v, true
		}
	}
	return verdict{}, false
}

// overPoolLimits checks w, one SKU's lines of hold h summed, against its
// pool's limits.
func (st stockRows) overPoolLimits(h hold, w want) (verdict, bool) {
	pk := poolKey(w.SKU, w.Pool)
	l := st.limits[pk]
	refuse := func(limit string, allowed int64) (verdict, bool) {
		return verdict{line: w, why: domain.CodeLimitExceeded, limit: limit, left: allowed}, true
	}
	switch {
	case l.maxPerOrder != nil && w.Quantity > *l.maxPerOrder:
		return refuse(LimitMaxPerOrder, *l.maxPerOrder)
	case l.minPerOrder != nil && w.Quantity < *l.minPerOrder:
		return refuse(LimitMinPerOrder, *l.minPerOrder)
	case l.step != nil && w.Quantity%*l.step != 0:
		return refuse(LimitStep, *l.step)
	}
	limit, window := st.perCustomer(h, pk)
	if limit == nil || h.req.CustomerRef == "" {
		return verdict{}, false
	}
	held := st.customers[customerKey(h.req.CustomerRef, w.SKU, w.Pool)]
	if held+w.Quantity > *limit {
		v, _ := refuse(LimitMaxPerCustomer, *limit)
		v.held = held
		if window != nil {
			v.window = *window
		}
		return v, true
	}
	return verdict{}, false
}

// tookForCustomer adds what granted hold h took (lines) to what its
// customer holds, for the batch's later holds.
func (st stockRows) tookForCustomer(h hold, lines []Line) {
	if h.req.CustomerRef == "" || st.customers == nil {
		return
	}
	for _, l := range lines {
		st.customers[customerKey(h.req.CustomerRef, l.SKU, l.Pool)] += l.Quantity
	}
}

// customerCounts is what a hold batch asks CustomerUnitsHeld: per hold
// with a customer, each of its SKUs' pools, with the window of the
// campaign's cap (-1: none); nil when no hold of the batch has a customer.
func customerCounts(leaders []*holdCall) *db.CustomerUnitsHeldParams {
	var p *db.CustomerUnitsHeldParams
	seen := map[string]bool{}
	for _, c := range leaders {
		if c.joined != nil || c.h.req.CustomerRef == "" {
			continue
		}
		if p == nil {
			p = &db.CustomerUnitsHeldParams{}
		}
		window := int64(-1)
		if c.h.customerWindow != nil {
			window = *c.h.customerWindow
		}
		for _, w := range c.h.wants {
			k := customerKey(c.h.req.CustomerRef, w.SKU, w.Pool)
			if seen[k] {
				continue
			}
			seen[k] = true
			p.Customers = append(p.Customers, c.h.req.CustomerRef)
			p.Skus, p.Pools = append(p.Skus, w.SKU), append(p.Pools, w.Pool)
			p.WindowSeconds = append(p.WindowSeconds, window)
		}
	}
	return p
}

// limitError is the refusal of a hold by its SKU's limit (v.limit); a
// campaign's cap per order is capError.
func limitError(h hold, v verdict) error {
	l := v.line
	e := &domain.Error{Code: domain.CodeLimitExceeded, SKU: l.SKU, Pool: l.Pool,
		Extra: map[string]any{"limit": v.limit, "allowed": v.left}}
	switch v.limit {
	case LimitMaxPerOrder:
		e.Detail = fmt.Sprintf("SKU %q (pool %s) allows at most %d in one hold, %d requested", l.SKU, l.Pool, v.left, l.Quantity)
	case LimitMinPerOrder:
		e.Detail = fmt.Sprintf("SKU %q (pool %s) takes at least %d in one hold, %d requested", l.SKU, l.Pool, v.left, l.Quantity)
	case LimitStep:
		e.Detail = fmt.Sprintf("SKU %q (pool %s) is sold in multiples of %d, %d requested", l.SKU, l.Pool, v.left, l.Quantity)
	default:
		e.Extra["held"] = v.held
		window := ""
		if v.window > 0 {
			window = " in " + (time.Duration(v.window) * time.Second).String()
		}
		e.Detail = fmt.Sprintf("SKU %q (pool %s) allows at most %d per customer%s; customer %s holds or bought %d, %d requested",
			l.SKU, l.Pool, v.left, window, strconv.Quote(h.req.CustomerRef), v.held, l.Quantity)
	}
	return e
}
