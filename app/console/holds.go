package console

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/stock"
)

type holdsData struct {
	OrderRef string
	ID       string
	Searched bool
	Holds    []holdRow
	// Short is each hold's id as shown (see shortIDs).
	Short map[string]string
}

// holdRow is a hold in a list: the row and its lines.
type holdRow struct {
	db.Reservation
	Lines []db.ReservationLine
}

// holds finds holds by the shop's order reference, or goes to one by id.
func (c *Console) holds(w http.ResponseWriter, r *http.Request, op who) error {
	ref := strings.TrimSpace(r.URL.Query().Get("order_ref"))
	idText := strings.TrimSpace(r.URL.Query().Get("id"))
	d := holdsData{OrderRef: ref, ID: idText}
	if idText != "" {
		id, err := uuid.Parse(idText)
		if err != nil {
			return c.done(w, r, "/ops/holds", true, "%q is not a hold id (a UUID)", idText)
		}
		http.Redirect(w, r, "/ops/holds/"+id.String(), http.StatusSeeOther)
		return nil
	}
	q := db.New(c.Pool)
	var rows []db.Reservation
	if ref != "" {
		if err := domain.ValidRef("order_ref", ref, inventory.MaxOrderRefSize); err != nil {
			return err
		}
		d.Searched = true
		var err error
		if rows, err = q.ReservationsByOrderRef(r.Context(), &ref, searchLimit); err != nil {
			return err
		}
	} else {
		// Before any search: the latest holds, newest first.
		var err error
		if rows, err = q.ReservationsList(r.Context(), db.ReservationsListParams{Lim: searchLimit}); err != nil {
			return err
		}
	}
	ids := make([]uuid.UUID, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	lines, err := q.ReservationLinesGet(r.Context(), ids)
	if err != nil {
		return err
	}
	byID := map[uuid.UUID][]db.ReservationLine{}
	for _, l := range lines {
		byID[l.ReservationID] = append(byID[l.ReservationID], l)
	}
	for _, row := range rows {
		d.Holds = append(d.Holds, holdRow{Reservation: row, Lines: byID[row.ID]})
	}
	d.Short = shortIDs(ids)
	return c.render(w, r, op, "holds", view{Title: "Holds", Nav: "holds", Data: d})
}

type holdData struct {
	Hold    inventory.Reservation
	Client  string
	History []stock.Movement
	// Promised says the history moved units promised past what was on
	// hand: it shows how (backordered).
	Promised bool
	// Deleted is a hold the retention job deleted (it ended longer ago than
	// STOCKHOLD_RETENTION): only its history in the ledger is left.
	Deleted bool
	ID      uuid.UUID
	// Lines are the hold's lines, each still promised units with the day
	// they were expected as the hold was made (expectedOn).
	Lines []inventory.Line
}

// hold shows one hold: its lines, its history from the ledger, and the
// release form while it is held.
func (c *Console) hold(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return domain.Missing("hold")
	}
	logging.Add(r.Context(), slog.String("hold_id", id.String()))
	q := db.New(c.Pool)
	ledger, err := q.LedgerListByReservation(r.Context(), &id)
	if err != nil {
		return err
	}
	history, err := stock.MovementsOf(r.Context(), q, ledger)
	if err != nil {
		return err
	}
	d := holdData{ID: id, History: history}
	for _, m := range d.History {
		d.Promised = d.Promised || m.DeltaBackordered != 0
	}
	h, err := c.Inventory.Get(r.Context(), id, inventory.Caller{Name: op.Key.Name, Ops: true})
	var de *domain.Error
	switch {
	case errors.As(err, &de) && de.Code == domain.CodeNotFound && len(ledger) > 0:
		// Deleted by retention: the ledger still tells its story.
		d.Deleted, d.Client = true, ledger[0].Actor
	case err != nil:
		return err
	default:
		row, err := q.ReservationGet(r.Context(), id)
		if err != nil {
			return err
		}
		d.Hold, d.Client = h, row.Client
		d.Lines = expectedOn(d.Hold.Lines(), ledger)
	}
	return c.render(w, r, op, "hold", view{Title: "Hold " + id.String()[:8], Nav: "holds", Data: d})
}

// expectedOn sets, on each line still promised units, the day its hold's
// reserve row said they were expected (none: a transfer in transit, or
// promised below zero).
func expectedOn(held []inventory.Line, ledger []db.Ledger) []inventory.Line {
	lines := slices.Clone(held)
	for i, l := range lines {
		if l.Backordered == 0 {
			continue
		}
		for _, r := range ledger {
			if r.Kind == string(stock.LedgerReserve) && r.Sku == l.SKU && r.Location == l.Location && r.Pool == l.Pool && r.ExpectedOn.Valid {
				lines[i].ExpectedOn = r.ExpectedOn.Time.Format(time.DateOnly)
			}
		}
	}
	return lines
}

// release hands a held hold's stock back, as the operator, with a reason.
func (c *Console) release(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return domain.Missing("hold")
	}
	logging.Add(r.Context(), slog.String("hold_id", id.String()))
	back := "/ops/holds/" + id.String()
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		return c.done(w, r, back, true, "Say why the hold is released.")
	}
	h, err := c.Inventory.Release(r.Context(), id, inventory.Caller{Name: op.Key.Name, Ops: true}, reason)
	metrics.CountTransition("release", err)
	if err != nil {
		return c.refused(w, r, back, err)
	}
	return c.done(w, r, back, false, "Hold %s is %s.", id, h.Status)
}
