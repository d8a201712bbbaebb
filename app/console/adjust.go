package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

// adjustPreview is an adjustment previewed on a SKU's page, to apply with
// one button: the form's fields as the preview read them, and the nonce
// that makes the apply idempotent.
type adjustPreview struct {
	Location, Pool, Delta, Reason, Ref, Nonce string
}

// adjust previews (dry run: the stock as the adjustment would leave it,
// or its refusal, nothing changed) or, with apply, makes an adjustment of
// one pool of a SKU, then reconciles the SKU, as the API's adjustment
// does. A reason is required; the apply is idempotent per form (its
// nonce), so a form sent twice adjusts once.
func (c *Console) adjust(w http.ResponseWriter, r *http.Request, op who) error {
	sku := r.PathValue("sku")
	logging.Add(r.Context(), slog.String("sku", sku))
	back := "/ops/skus/" + url.PathEscape(sku)
	f := r.PostForm
	delta, err := strconv.ParseInt(strings.TrimSpace(f.Get("delta")), 10, 64)
	if err != nil {
		return c.refused(w, r, back, domain.Invalid("the change must be a whole number of units, + to add, - to take away"))
	}
	a := stock.Adjustment{SKU: sku, Location: f.Get("location"), Pool: f.Get("pool"), Delta: delta, Reason: strings.TrimSpace(f.Get("reason")),
		Ref: strings.TrimSpace(f.Get("ref")), Actor: op.Key.Name}
	if f.Get("apply") != "true" {
		st, err := c.Inventory.AdjustPreview(r.Context(), a)
		if err != nil {
			return c.refused(w, r, back, err)
		}
		// The nonce rides in the preview's address, so the page it shows
		// (reloaded, or gone back to) applies this preview once.
		q := url.Values{"adjust_location": {a.Location}, "adjust_pool": {a.Pool}, "adjust_delta": {strconv.FormatInt(delta, 10)}, "adjust_reason": {a.Reason}, "adjust_ref": {a.Ref},
			"adjust_nonce": {randomToken()}}
		return c.done(w, r, back+"?"+q.Encode(), false, "Preview, nothing changed: %s %s would leave %s.",
			signed(delta), poolOf(sku, a.Location, a.Pool), counters(st, a.Location, a.Pool))
	}
	type applied struct {
		Stock stock.Stock
		Check *reconcile.Check
	}
	out, err := once(r.Context(), op, "adjust:"+f.Get("nonce"), a, func(ctx context.Context, k idempotency.Key) (applied, bool, error) {
		st, replayed, err := c.Inventory.AdjustOnce(ctx, k, a)
		if err != nil || replayed {
			return applied{Stock: st}, replayed, err
		}
		return applied{Stock: st, Check: c.Reconcile.After(ctx, reconcile.TriggerAdjustment, sku)}, false, nil
	})
	if err != nil {
		return c.refused(w, r, back, err)
	}
	msg := fmt.Sprintf("Adjusted %s by %s: now %s.", poolOf(sku, a.Location, a.Pool), signed(delta), counters(out.Stock, a.Location, a.Pool))
	if out.Check != nil {
		msg += fmt.Sprintf(" Reconciliation #%d afterwards: %d high-risk findings.", out.Check.ID, out.Check.HighRisk)
	}
	return c.done(w, r, back, false, "%s", msg)
}

func signed(n int64) string { return fmt.Sprintf("%+d", n) }

func poolOf(sku, location, pool string) string {
	if pool == "" {
		pool = stock.MainPool
	}
	return fmt.Sprintf("%s (pool %s)%s", sku, pool, stock.At(location))
}

// counters says one pool's counters at a location in words.
func counters(st stock.Stock, location, pool string) string {
	if pool == "" {
		pool = stock.MainPool
	}
	if location == "" {
		location = stock.DefaultLocation
	}
	for _, p := range st.Pools {
		if p.Pool == pool && p.Location == location {
			return fmt.Sprintf("total %d, available %d, reserved %d, sold %d", p.Total, p.Available, p.Reserved, p.Sold)
		}
	}
	return "no such pool"
}
