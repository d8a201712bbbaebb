package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/stock"
)

// Page sizes of the console's lists.
const (
	searchLimit = 50
	ledgerPage  = 50
)

type skusData struct {
	Query   string
	Results []poolRow
	More    bool
	// Bundles are the bundles whose SKU starts with the query (every
	// bundle before any search), each with its availability computed;
	// MoreBundles says more match.
	Bundles     []stock.Stock
	MoreBundles bool
}

// skus finds SKUs by the start of their name, one row per pool; before any
// search it lists the pools that changed last.
func (c *Console) skus(w http.ResponseWriter, r *http.Request, op who) error {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := skusData{Query: q}
	if len(q) > domain.MaxNameLength {
		return domain.Invalid("a SKU is at most %d bytes: search for the start of one", domain.MaxNameLength)
	}
	if q == "" {
		rows, err := db.New(c.Pool).StockRecent(r.Context(), searchLimit)
		if err != nil {
			return err
		}
		d.Results = recentPools(rows)
	} else {
		rows, err := db.New(c.Pool).StockPoolsPage(r.Context(), likePrefix(q), searchLimit+1)
		if err != nil {
			return err
		}
		d.More = len(rows) > searchLimit
		for _, s := range rows[:min(len(rows), searchLimit)] {
			d.Results = append(d.Results, newPoolRow(s.Sku, s.Location, s.Pool, s.Total, s.Available, s.Reserved, s.Sold, s.Status, s.LowThreshold, s.Serialized))
		}
	}
	if err := c.bundlesLike(r.Context(), &d); err != nil {
		return err
	}
	return c.render(w, r, op, "skus", view{Title: "SKUs", Nav: "skus", Data: d})
}

// bundlesLike fills d's bundles: those whose SKU starts with d.Query, with
// their availability as GET /v1/skus answers it.
func (c *Console) bundlesLike(ctx context.Context, d *skusData) error {
	names, err := db.New(c.Pool).ConsoleBundlesPage(ctx, likePrefix(d.Query), searchLimit+1)
	if err != nil || len(names) == 0 {
		return err
	}
	d.MoreBundles = len(names) > searchLimit
	page, err := c.Inventory.Catalogue(ctx, stock.CatalogueQuery{SKUs: names[:min(len(names), searchLimit)]})
	if err != nil {
		return err
	}
	for _, st := range page.SKUs {
		if st.Bundle != nil {
			d.Bundles = append(d.Bundles, st)
		}
	}
	return nil
}

// likePrefix escapes s for LIKE and makes it a prefix pattern.
func likePrefix(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s) + "%"
}

type skuData struct {
	Stock stock.Stock
	// UsedBy are the bundles whose current definition has the SKU as a
	// component.
	UsedBy []db.ConsoleBundlesUsingRow
	// Seats are the seat maps of the SKU's pools of units with an
	// identity, by pool; SeatsCut is set when the SKU has more units than
	// the map shows.
	Seats    map[string][]seatRow
	SeatsCut bool
	// Pauses are the latest pause of each paused pool, by location and
	// pool ("berlin/main"): who, why, when.
	Pauses map[string]*stock.Pause
	// Limits are the limits of each pool that has any, by pool (they hold
	// at every location).
	Limits map[string]stock.Limits
	// Backorders are the backorder policy of each pool that has one, and
	// what each of its rows promised, by "location/pool".
	Backorders map[string]backorderView
	// Adjust is an adjustment previewed (from the preview's redirect), to
	// apply with one button (its nonce makes that apply once).
	Adjust *adjustPreview
	// Preview is a repair previewed (to, location, pool, reason, refs and
	// the difference it showed, from the preview's redirect), to apply with
	// one button: the apply sends the difference, and is refused if the
	// books moved.
	Preview, PreviewLocation, PreviewPool, PreviewReason, PreviewRefs, PreviewDifference string
	// Located says the SKU is at more than the default location: its
	// pools say where.
	Located bool
	// OtherStates says the ledger page shows the states not for sale,
	// incoming, short and backordered: the SKU is at several locations,
	// or a movement on the page moved one of them.
	OtherStates bool
	Short       map[string]string
	// Ledger is a page of movements, newest first; Older is the id to page
	// on from (0: this is the last page).
	Ledger []stock.Movement
	Before int64
	Older  int64
	// Archived, on the ledger's last page, is where its archive ends: the
	// movements before it are in archive files (zero: none is).
	Archived time.Time
}

// sku shows a SKU's pools with their switches, and its ledger paged newest
// first (?before=ID shows the movements older than ID).
func (c *Console) sku(w http.ResponseWriter, r *http.Request, op who) error {
	sku := r.PathValue("sku")
	logging.Add(r.Context(), slog.String("sku", sku))
	st, err := c.Inventory.GetStock(r.Context(), sku)
	if err != nil {
		return err
	}
	d := skuData{Stock: st, Pauses: map[string]*stock.Pause{}}
	if q := r.URL.Query(); q.Has("adjust_delta") {
		d.Adjust = &adjustPreview{Location: q.Get("adjust_location"), Pool: q.Get("adjust_pool"), Delta: q.Get("adjust_delta"), Reason: q.Get("adjust_reason"),
			Ref: q.Get("adjust_ref"), Nonce: q.Get("adjust_nonce")}
		if d.Adjust.Pool == "" {
			d.Adjust.Pool = stock.MainPool
		}
		if d.Adjust.Location == "" {
			d.Adjust.Location = stock.DefaultLocation
		}
	}
	if err := c.seatMap(r.Context(), &d); err != nil {
		return err
	}
	if d.Limits, err = c.Inventory.LimitsOfSKU(r.Context(), sku); err != nil {
		return err
	}
	if d.UsedBy, err = db.New(c.Pool).ConsoleBundlesUsing(r.Context(), sku); err != nil {
		return err
	}
	if d.Backorders, err = c.backordersOf(r.Context(), st); err != nil {
		return err
	}
	for _, p := range st.Pools {
		if p.Status != stock.StockPaused {
			continue
		}
		last, err := db.New(c.Pool).LedgerLastPause(r.Context(), sku, p.Location, p.Pool)
		if err == nil {
			d.Pauses[p.Location+"/"+p.Pool] = &stock.Pause{Actor: last.Actor, ActorKey: last.ActorKey, Reason: last.Reason, At: last.At}
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	if p := r.URL.Query().Get("preview"); p == stock.RepairToLedger || p == stock.RepairToCounters {
		if diff := r.URL.Query().Get("difference"); parseDifference(diff) != nil {
			d.Preview, d.PreviewPool, d.PreviewReason, d.PreviewDifference = p, r.URL.Query().Get("pool"), r.URL.Query().Get("reason"), diff
			d.PreviewRefs = r.URL.Query().Get("refs")
			d.PreviewLocation = r.URL.Query().Get("location")
		}
	}
	for _, p := range st.Pools {
		d.Located = d.Located || p.Location != stock.DefaultLocation
	}
	if err := c.skuLedger(r, sku, &d); err != nil {
		return err
	}
	return c.render(w, r, op, "sku", view{Title: sku, Nav: "skus", Data: d})
}

// skuLedger reads the page of a SKU's movements its page shows (before
// the ledger id ?before= asks for), saying where the archive ends.
func (c *Console) skuLedger(r *http.Request, sku string, d *skuData) error {
	var before *int64
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return domain.Invalid("before must be a ledger id")
		}
		before, d.Before = &n, n
	}
	q := db.New(c.Pool)
	archived, err := q.LedgerArchived(r.Context())
	if err != nil {
		return err
	}
	if before != nil && *before <= archived.MaxID {
		return domain.Archived("The movements before %s were archived (ids up to %d): the page before #%d is in the archive.",
			when(archived.ToAt), archived.MaxID, *before)
	}
	rows, err := q.LedgerPageBySKU(r.Context(), sku, before, ledgerPage+1)
	if err != nil {
		return err
	}
	if len(rows) > ledgerPage {
		rows = rows[:ledgerPage]
		d.Older = rows[len(rows)-1].ID
	}
	if archived.MaxID > 0 && d.Older <= archived.MaxID {
		// The older pages are in the archive (the last rows here are the
		// balances it carried forward and the rows it kept).
		d.Older, d.Archived = 0, archived.ToAt
	}
	if d.Ledger, err = stock.MovementsOf(r.Context(), q, rows); err != nil {
		return err
	}
	d.OtherStates = d.Located
	for _, m := range d.Ledger {
		d.OtherStates = d.OtherStates || states(m) != "—"
	}
	var ids []uuid.UUID
	for _, m := range rows {
		if m.ReservationID != nil {
			ids = append(ids, *m.ReservationID)
		}
	}
	d.Short = shortIDs(ids)
	return nil
}

// maxSeatMap bounds the units a SKU's page draws.
const maxSeatMap = 5000

// seatRow is one group of a seat map (a row, a section; "" for units
// without one), its units in position order.
type seatRow struct {
	Group string
	Seats []db.UnitsMapRow
}

// seatMap fills d's seat maps for the SKU's pools of units with an
// identity: units by group and position, each coloured by its status.
func (c *Console) seatMap(ctx context.Context, d *skuData) error {
	serialized := false
	for _, p := range d.Stock.Pools {
		serialized = serialized || p.Serialized
	}
	if !serialized {
		return nil
	}
	rows, err := db.New(c.Pool).UnitsMap(ctx, d.Stock.SKU, maxSeatMap+1)
	if err != nil {
		return err
	}
	if len(rows) > maxSeatMap {
		rows, d.SeatsCut = rows[:maxSeatMap], true
	}
	d.Seats = map[string][]seatRow{}
	for _, u := range rows {
		group := domain.Value(u.GroupName)
		groups := d.Seats[u.Pool]
		if len(groups) == 0 || groups[len(groups)-1].Group != group {
			groups = append(groups, seatRow{Group: group})
		}
		groups[len(groups)-1].Seats = append(groups[len(groups)-1].Seats, u)
		d.Seats[u.Pool] = groups
	}
	return nil
}

func (c *Console) pause(w http.ResponseWriter, r *http.Request, op who) error {
	return c.flip(w, r, op, "paused", func(ctx context.Context, sw stock.SwitchRequest) (stock.Stock, string, error) {
		st, err := c.Inventory.Pause(ctx, sw)
		return st, "", err
	})
}

func (c *Console) resume(w http.ResponseWriter, r *http.Request, op who) error {
	force := r.PostForm.Get("force") != ""
	var lifted *stock.Pause
	return c.flip(w, r, op, "resumed", func(ctx context.Context, sw stock.SwitchRequest) (stock.Stock, string, error) {
		sw.Refs = formRefs(r.PostForm.Get("refs"))
		out, _, err := c.Reconcile.Resume(ctx, stock.Lift{SwitchRequest: sw, Force: force})
		if lifted = out.Paused; lifted != nil {
			return out.Stock, fmt.Sprintf(" Lifted the pause by %s %s: %s.", by(lifted.Actor, lifted.ActorKey), ago(lifted.At), str(lifted.Reason)), err
		}
		return out.Stock, "", err
	})
}

// flip pauses or resumes one pool of a SKU, with the operator's reason;
// fn's text is added to the message.
func (c *Console) flip(w http.ResponseWriter, r *http.Request, op who, done string,
	fn func(context.Context, stock.SwitchRequest) (stock.Stock, string, error)) error {
	sku := r.PathValue("sku")
	logging.Add(r.Context(), slog.String("sku", sku))
	back := "/ops/skus/" + url.PathEscape(sku)
	pool, location := r.PostForm.Get("pool"), r.PostForm.Get("location")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	_, more, err := fn(r.Context(), stock.SwitchRequest{SKU: sku, Location: location, Pool: pool, Reason: reason, Actor: op.Key.Name})
	if err != nil {
		return c.refused(w, r, back, err)
	}
	return c.done(w, r, back, false, "Pool %s of %s%s %s: %s.%s", pool, sku, stock.At(location), done, reason, more)
}

// backorderView is a row's backorder policy and what it promised under
// it: Backordered of at most Allowed (below_zero plus what is on its way
// within the horizon).
type backorderView struct {
	BelowZero            int64
	HorizonDays          *int32
	Backordered, Allowed int64
	SetBy                string
	SetAt                time.Time
}

// backordersOf reads the backorder policy of each of st's pools that has
// one, by "location/pool" of its rows.
func (c *Console) backordersOf(ctx context.Context, st stock.Stock) (map[string]backorderView, error) {
	out := map[string]backorderView{}
	seen := map[string]bool{}
	for _, p := range st.Pools {
		if seen[p.Pool] {
			continue
		}
		seen[p.Pool] = true
		b, err := c.Inventory.GetBackorders(ctx, st.SKU, p.Pool)
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, r := range b.Rows {
			out[r.Location+"/"+b.Pool] = backorderView{BelowZero: b.BelowZero, HorizonDays: b.HorizonDays,
				Backordered: r.Backordered, Allowed: r.Allowed, SetBy: b.SetBy, SetAt: b.SetAt}
		}
	}
	return out, nil
}
