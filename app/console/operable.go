package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/stock"
)

// shortIDs gives each id the shortest prefix of at least eight characters
// that no other id of the list shares: UUIDv7s made within the same minute
// or so share their first eight, so a fixed length would show two holds
// as one.
func shortIDs(ids []uuid.UUID) map[string]string {
	out := make(map[string]string, len(ids))
	full := make([]string, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		s := id.String()
		if !seen[s] {
			seen[s] = true
			full = append(full, s)
		}
	}
	n := 8
	for ; n < 36; n++ {
		if n == 8 || n == 13 || n == 18 || n == 23 {
			continue // a prefix ending in a dash says no more than one without it
		}
		prefixes := map[string]bool{}
		unique := true
		for _, s := range full {
			if prefixes[s[:n]] {
				unique = false
				break
			}
			prefixes[s[:n]] = true
		}
		if unique {
			break
		}
	}
	for _, s := range full {
		out[s] = s[:min(n, len(s))]
	}
	return out
}

// sid shows an id by its prefix in m (see shortIDs), or whole when m does
// not have it.
func sid(m map[string]string, id any) string {
	s := str(id)
	if v, ok := id.(fmt.Stringer); ok {
		s = v.String()
	}
	if p, ok := m[s]; ok {
		return p
	}
	return s
}

// poolRow is one (sku, pool) in a list: pools are never summed, since a
// campaign's units are not main's.
type poolRow struct {
	Sku, Location, Pool              string
	Total, Available, Reserved, Sold int64
	Status                           string
	LowThreshold                     *int64
	// Low is at or below the low-stock threshold.
	Low bool
	// Serialized is a pool of units with an identity (seats).
	Serialized bool
}

func newPoolRow(sku, location, pool string, total, available, reserved, sold int64, status string, threshold *int64, serialized bool) poolRow {
	return poolRow{Sku: sku, Location: location, Pool: pool, Total: total, Available: available, Reserved: reserved, Sold: sold, Status: status,
		LowThreshold: threshold, Low: threshold != nil && available <= *threshold, Serialized: serialized}
}

// takeAlert makes the signed-in operator the owner of an alert.
func (c *Console) takeAlert(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Missing("alert")
	}
	back := safeBack(r.PostForm.Get("back"), "/ops/alerts")
	a, err := c.Alerts.Take(r.Context(), id, op.Key.Name)
	if err != nil {
		return c.refused(w, r, back, err)
	}
	return c.done(w, r, back, false, "Alert #%d (%s) is %s's.", a.ID, a.Kind, domain.Value(a.Owner))
}

// safeBack is a form's back address when it is a console page, else def.
func safeBack(back, def string) string {
	if strings.HasPrefix(back, "/ops/") && !strings.HasPrefix(back, "//") && !strings.ContainsAny(back, "\\\r\n") {
		return back
	}
	return def
}

// stopSale turns the switch for everything, or one client's, on or off,
// with a reason; lifting one says what it lifted.
func (c *Console) stopSale(w http.ResponseWriter, r *http.Request, op who) error {
	active := r.PostForm.Get("active") == "true"
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	client := strings.TrimSpace(r.PostForm.Get("client"))
	st, err := c.Inventory.SetStopSale(r.Context(), stock.StopSaleChange{Client: client, Active: active, Reason: reason, Actor: op.Key.Name})
	if err != nil {
		return c.refused(w, r, "/ops/", err)
	}
	what, whose := "Sales", "New holds are"
	if client != "" {
		what, whose = "Sales to "+client, "New holds by its keys are"
	}
	if st.Active {
		return c.done(w, r, "/ops/", false, "%s stopped by %s: %s. %s refused; confirms and releases go on.", what, op.Key.Name, reason, whose)
	}
	msg := fmt.Sprintf("%s restarted by %s: %s.", what, op.Key.Name, reason)
	if l := st.Lifted; l != nil {
		msg += fmt.Sprintf(" Lifted what %s had stopped %s: %s.", by(l.Actor, l.ActorKey), ago(l.ChangedAt), str(l.Reason))
		if l.Rule != nil {
			msg += fmt.Sprintf(" (Rule %s tripped it.)", *l.Rule)
		}
	}
	return c.done(w, r, "/ops/", false, "%s", msg)
}

// repair previews (dry run) or applies a repair of a pool's books; the
// preview's answer is shown on the SKU's page with the button that applies
// it.
func (c *Console) repair(w http.ResponseWriter, r *http.Request, op who) error {
	sku := r.PathValue("sku")
	logging.Add(r.Context(), slog.String("sku", sku))
	back := "/ops/skus/" + url.PathEscape(sku)
	req := stock.RepairRequest{
		SKU: sku, Location: r.PostForm.Get("location"), Pool: r.PostForm.Get("pool"), To: r.PostForm.Get("to"), Actor: op.Key.Name,
		Reason: strings.TrimSpace(r.PostForm.Get("reason")), DryRun: r.PostForm.Get("apply") != "true",
		Refs: formRefs(r.PostForm.Get("refs")),
	}
	if !req.DryRun {
		// Apply writes exactly what the preview showed, or nothing.
		if req.ExpectedDifference = parseDifference(r.PostForm.Get("expected")); req.ExpectedDifference == nil {
			return c.refused(w, r, back, domain.Invalid("apply a repair from its preview: preview it again"))
		}
	}
	out, run, err := c.Reconcile.Repair(r.Context(), req)
	if err != nil {
		return c.refused(w, r, back, err)
	}
	d := out.Difference
	diff := d.String()
	if req.DryRun {
		q := url.Values{"preview": {req.To}, "pool": {out.Pool}, "location": {out.Location}, "reason": {req.Reason},
			"refs": {strings.Join(req.Refs, ", ")}, "difference": {formatDifference(d)}}
		return c.done(w, r, back+"?"+q.Encode(), false, "Preview, nothing changed: repairing %s (pool %s) to the %s would write %s.", sku, out.Pool, req.To, diff)
	}
	msg := fmt.Sprintf("Repaired %s (pool %s) to the %s: %s.", sku, out.Pool, req.To, diff)
	if !out.Applied {
		msg = fmt.Sprintf("Nothing to repair: the counters of %s (pool %s) agree with its ledger.", sku, out.Pool)
	}
	if run != nil {
		msg += fmt.Sprintf(" Reconciliation #%d afterwards: %d high-risk %s.", run.ID, run.HighRisk, noun(run.HighRisk, "finding", "findings"))
	}
	return c.done(w, r, back, false, "%s", msg)
}

// formatDifference writes a repair's difference for a form: its counters,
// comma separated (total, available, reserved, sold, quality_control,
// damaged, safety_stock, incoming, short, backordered).
func formatDifference(d stock.Counters) string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d,%d,%d,%d,%d", d.Total, d.Available, d.Reserved, d.Sold,
		d.QualityControl, d.Damaged, d.SafetyStock, d.Incoming, d.Short, d.Backordered)
}

// parseDifference reads what formatDifference wrote (or, from a page
// served before short or backordered existed, the first eight or nine);
// nil when it is not.
func parseDifference(s string) *stock.Counters {
	parts := strings.Split(s, ",")
	if len(parts) < 8 || len(parts) > 10 {
		return nil
	}
	var n [10]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil
		}
		n[i] = v
	}
	return &stock.Counters{Total: n[0], Available: n[1], Reserved: n[2], Sold: n[3],
		QualityControl: n[4], Damaged: n[5], SafetyStock: n[6], Incoming: n[7], Short: n[8], Backordered: n[9]}
}

// reinstate holds a released or expired hold's lines again (a late
// payment), as the API's reinstate does.
func (c *Console) reinstate(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return domain.Missing("hold")
	}
	logging.Add(r.Context(), slog.String("hold_id", id.String()))
	back := "/ops/holds/" + id.String()
	h, err := c.Inventory.Reinstate(r.Context(), id, inventory.Caller{Name: op.Key.Name, Ops: true})
	if err != nil {
		return c.refused(w, r, back, err)
	}
	return c.done(w, r, "/ops/holds/"+h.ID.String(), false, "Hold %s holds the lines of %s again, until %s: confirm it once the payment is checked.",
		h.ID, id, when(h.ExpiresAt))
}

// recentPools is the pools that changed last, for /ops/skus before a
// search.
func recentPools(rows []db.StockRecentRow) []poolRow {
	out := make([]poolRow, len(rows))
	for i, s := range rows {
		out[i] = newPoolRow(s.Sku, s.Location, s.Pool, s.Total, s.Available, s.Reserved, s.Sold, s.Status, s.LowThreshold, s.Serialized)
	}
	return out
}

// formRefs reads a form's references (order refs, hold ids, ledger ids, a
// ticket), separated by commas or new lines; blanks are dropped.
func formRefs(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
