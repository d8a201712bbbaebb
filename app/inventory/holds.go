package inventory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/stock"
)

// MaxListPage bounds one page of a hold listing.
const MaxListPage = 1000

// ListQuery filters a listing of holds; empty fields match everything.
type ListQuery struct {
	OrderRef string
	Status   HoldStatus
	SKU      string
	Limit    int
	// Before, when set, asks for the holds older than it: the previous
	// page's NextCursor (with ExpiresBefore: the holds after it, soonest
	// expiry first).
	Before *uuid.UUID
	// ExpiresBefore, when set, lists only the holds whose expiry is before
	// it, soonest first (see listExpiring).
	ExpiresBefore *time.Time
}

// ListPage is a page of holds, newest first. NextCursor, when not nil, asks
// for the next (older) page.
type ListPage struct {
	Reservations []Reservation `json:"reservations"`
	NextCursor   *string       `json:"next_cursor"`
}

// List returns the holds the caller may see that match lq, newest first, a
// page at a time: a shop sees its own, ops every client's. Pages are a
// keyset on the hold's id (a UUIDv7, so in creation order; holds made
// before ids were time-ordered sort among themselves by their random ids),
// so walking the pages sees every hold once even while new ones arrive.
func (s *Service) List(ctx context.Context, lq ListQuery, by Caller) (ListPage, error) {
	if lq.Limit < 1 || lq.Limit > MaxListPage {
		return ListPage{}, domain.Invalid("limit must be from 1 to %d", MaxListPage)
	}
	p := db.ReservationsListParams{BeforeID: lq.Before, Lim: int32(lq.Limit + 1)}
	if !by.Ops {
		p.Client = &by.Name
	}
	if lq.OrderRef != "" {
		if err := domain.ValidRef("order_ref", lq.OrderRef, MaxOrderRefSize); err != nil {
			return ListPage{}, err
		}
		p.OrderRef = &lq.OrderRef
	}
	switch lq.Status {
	case "":
	case StatusHeld, StatusConfirmed, StatusReleased, StatusExpired:
		p.Status = domain.Optional(string(lq.Status))
	default:
		return ListPage{}, domain.Invalid("status must be held, confirmed, released or expired")
	}
	if lq.SKU != "" {
		if err := domain.ValidName("sku", lq.SKU); err != nil {
			return ListPage{}, err
		}
		p.Sku = &lq.SKU
	}
	q := db.New(s.pool)
	if lq.ExpiresBefore != nil {
		return s.listExpiring(ctx, q, lq, p)
	}
	rows, err := q.ReservationsList(ctx, p)
	if err != nil {
		return ListPage{}, fmt.Errorf("list holds: %w", err)
	}
	return pageOf(ctx, q, rows, lq.Limit)
}

// pageOf makes a page of rows (one more than limit says another page
// follows), with their lines.
func pageOf(ctx context.Context, q *db.Queries, rows []db.Reservation, limit int) (ListPage, error) {
	page := ListPage{Reservations: make([]Reservation, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		next := rows[limit-1].ID.String()
		page.NextCursor = &next
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	lines, err := q.ReservationLinesGet(ctx, ids)
	if err != nil {
		return ListPage{}, fmt.Errorf("list holds' lines: %w", err)
	}
	linesOf := make(map[uuid.UUID][]Line, len(rows))
	for _, l := range lines {
		linesOf[l.ReservationID] = append(linesOf[l.ReservationID], storedLine(l))
	}
	for _, r := range rows {
		page.Reservations = append(page.Reservations, newReservation(r, linesOf[r.ID]))
	}
	return page, nil
}

// Extend moves a held hold's expiry to ttlSeconds from now. It never
// shortens a hold (an expiry already later stays), and never lets a hold
// last past its maximum TTL counted from its creation: its campaign's hold
// TTL for a campaign's hold, MaxTTLSeconds (7 days) otherwise; asking for
// more is 422. A hold that is confirmed, released or expired is 409
// reservation_not_held; one found past its expiry is expired now (as a
// late confirm does) and answered the same way.
func (s *Service) Extend(ctx context.Context, id uuid.UUID, by Caller, ttlSeconds int64) (Reservation, error) {
	if ttlSeconds < 1 || ttlSeconds > MaxTTLSeconds {
		return Reservation{}, domain.Invalid("ttl_seconds must be from 1 to %d", MaxTTLSeconds)
	}
	var (
		out     Reservation
		expired bool
	)
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// The rule of every change to a hold (see change.go): lock, read
		// the lines, decide. The only change that moves stock here is the
		// expiry of an overdue hold.
		holds, ch, err := s.changeTx(ctx, tx, []uuid.UUID{id}, func(h *lockedHold) (*holdChange, error) {
			if !by.maySee(h.row.Client) || !h.due {
				return nil, nil
			}
			return Outcome{extend: true}.decide(h)
		})
		if err != nil {
			return err
		}
		h, ok := holds[id]
		switch {
		case !ok || !by.maySee(h.row.Client):
			return domain.Missing("reservation")
		case len(ch.list) > 0:
			expired = true
			return nil // commit the expiry, then refuse
		case HoldStatus(h.row.Status) != StatusHeld:
			return errNotHeld(id, HoldStatus(h.row.Status))
		}
		q := db.New(tx)
		terms, err := q.ReservationExtendTerms(ctx, MaxTTLSeconds, id)
		if err != nil {
			return fmt.Errorf("extend hold %s: %w", id, err)
		}
		r := h.row
		want := terms.Now.Add(time.Duration(ttlSeconds) * time.Second)
		limit := r.CreatedAt.Add(time.Duration(terms.MaxTtlSeconds) * time.Second)
		if want.After(limit) {
			what := "the service's maximum of 7 days"
			if r.Campaign != nil {
				what = fmt.Sprintf("campaign %q's hold TTL of %d s", *r.Campaign, terms.MaxTtlSeconds)
			}
			return domain.Invalid("ttl_seconds %d would keep the hold until %s, past %s from its creation: it can last until %s at most (ttl_seconds %d from now)",
				ttlSeconds, stamp(want), what, stamp(limit), max(int64(limit.Sub(terms.Now)/time.Second), 0))
		}
		if !want.After(r.ExpiresAt) {
			out = newReservation(r, h.lines) // already lasts that long
			return nil
		}
		r, err = q.ReservationExtend(ctx, want, id)
		if err != nil {
			return fmt.Errorf("extend hold %s: %w", id, err)
		}
		out = newReservation(r, h.lines)
		return nil
	})
	if err == nil && expired {
		err = errNotHeld(id, StatusExpired)
	}
	return out, err
}

// stamp is t as the API writes times, to the millisecond.
func stamp(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
}

// ReleaseItems hands back some units of a held hold: for each item, that
// many units of the SKU's line (the hold's pool). The hold stays held with
// what is left; items that cover all of it release it whole, as Cancel
// does, through the one release path. Each changed line gets a
// release_partial ledger row. A confirmed hold is 409 reservation_not_held;
// a released or expired one is answered as it is (its units are back
// already), as Release answers it. An item naming a SKU the hold does not
// have, or more units than it holds, is 422 and changes nothing. An item
// naming a bundle the hold holds gives back that many of it, every
// component; a component of a bundle line is never named alone
// (bundles_release.go).
func (s *Service) ReleaseItems(ctx context.Context, id uuid.UUID, by Caller, reason string, items []Item) (Reservation, error) {
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Reservation, error) {
		return s.ReleaseItemsTx(ctx, tx, id, by, reason, items)
	})
}

// ReleaseItemsOnce is ReleaseItems at most once per key (see
// idempotency.Do): a partial release is not idempotent by nature, each one
// handing back more.
func (s *Service) ReleaseItemsOnce(ctx context.Context, key idempotency.Key, id uuid.UUID, by Caller, reason string, items []Item) (out Reservation, replayed bool, err error) {
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Reservation, error) {
		return s.ReleaseItemsTx(ctx, tx, id, by, reason, items)
	})
}

// ReleaseItemsTx is ReleaseItems inside the caller's transaction. It
// follows the rule of every change to a hold (see change.go): the hold is
// locked and its lines read before the items are checked against them; a
// hold found past its expiry is expired instead, and answered as it is.
func (s *Service) ReleaseItemsTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, by Caller, reason string, items []Item) (Reservation, error) {
	if err := domain.ValidText("reason", reason, domain.MaxTextLength); err != nil {
		return Reservation{}, err
	}
	if reason == "" {
		reason = "cancelled"
	}
	want, err := giveWants(items)
	if err != nil {
		return Reservation{}, err
	}
	// bundles is how many of each bundle line a release that leaves the
	// hold held gives back (bundles_release.go).
	var bundles map[string]int64
	holds, _, err := s.changeTx(ctx, tx, []uuid.UUID{id}, func(h *lockedHold) (*holdChange, error) {
		switch {
		case !by.maySee(h.row.Client):
			return nil, domain.Missing("reservation")
		case HoldStatus(h.row.Status) == StatusConfirmed:
			return nil, errNotHeld(id, StatusConfirmed)
		}
		give, released, err := bundleGive(h.lines, want)
		switch {
		case err != nil && HoldStatus(h.row.Status) == StatusHeld && !h.due:
			return nil, err
		case err != nil: // ended, or expires instead: answered as it is
			give = want
		}
		how := Outcome{Kind: stock.LedgerRelease, Actor: by.Name, Reason: reason, give: give}
		ch, err := how.decide(h)
		if ch != nil && ch.how.Status == StatusHeld {
			bundles = released
		}
		return ch, err
	})
	if err != nil {
		return Reservation{}, err
	}
	if _, ok := holds[id]; !ok {
		return Reservation{}, domain.Missing("reservation")
	}
	q := db.New(tx)
	for _, sku := range slices.Sorted(maps.Keys(bundles)) {
		if err := q.ReservationLinesBundleGiven(ctx, bundles[sku], id, &sku); err != nil {
			return Reservation{}, fmt.Errorf("record the bundles given back: %w", err)
		}
	}
	r, err := q.ReservationGet(ctx, id)
	if err != nil {
		return Reservation{}, err
	}
	rest, err := linesOf(ctx, q, id)
	if err != nil {
		return Reservation{}, err
	}
	return newReservation(r, rest), nil
}

// giveWants is what a partial release's items ask to give back, by
// giveKey, checked on their own (partOf and bundleGive check them against
// the hold's lines).
func giveWants(items []Item) (map[string]giveBack, error) {
	if len(items) == 0 || len(items) > MaxLines {
		return nil, domain.Invalid("items must have 1 to %d lines (leave it out to release the whole hold)", MaxLines)
	}
	want := map[string]giveBack{}
	for i, it := range items {
		if err := domain.ValidName(fmt.Sprintf("items[%d].sku", i), it.SKU); err != nil {
			return nil, err
		}
		if it.Adjacent || it.Split || it.Partial || it.MinQuantity != 0 {
			return nil, domain.Invalid("items[%d]: adjacent, split, partial and min_quantity are for holds, not releases", i)
		}
		if it.Location != "" {
			if err := domain.ValidName(fmt.Sprintf("items[%d].location", i), it.Location); err != nil {
				return nil, err
			}
		}
		k := giveKey(it.SKU, it.Location)
		w := want[k]
		if it.Units != nil {
			if err := it.validateUnits(i); err != nil {
				return nil, err
			}
			for _, u := range it.Units {
				if slices.Contains(w.units, u) {
					return nil, domain.Invalid("items name unit %q of SKU %q twice", u, it.SKU)
				}
			}
			w.units = append(w.units, it.Units...)
		} else {
			if it.Quantity < 1 || it.Quantity > MaxQuantity {
				return nil, domain.Invalid("items[%d].quantity must be a whole number from 1 to %d", i, MaxQuantity)
			}
			w.quantity += it.Quantity
		}
		if w.quantity > 0 && len(w.units) > 0 {
			return nil, domain.Invalid("items give SKU %q both as units and as a quantity: give its units", it.SKU)
		}
		want[k] = w
	}
	return want, nil
}

// giveKey is what a partial release hands back one part of: a SKU, at the
// location named (empty: wherever the hold holds it, if that is one
// location).
func giveKey(sku, location string) string { return sku + "\x00" + location }

// partOf checks want (per SKU and location) against a hold's lines and
// returns the lines to give back, in lock order, and how many units the
// hold keeps. An item that names no location gives back from the SKU's
// line wherever it is, when the hold holds it at one location; a hold that
// took it from several needs the location named. A line of units with an
// identity gives back the units named, each one the line holds; it cannot
// give back a bare quantity, which would leave the service to choose which
// seats go.
func partOf(lines []Line, want map[string]giveBack) ([]Line, int64, error) {
	var (
		give []Line
		left int64
	)
	for _, l := range lines {
		left += l.Quantity
	}
	keys := slices.Sorted(maps.Keys(want))
	seen := map[string]bool{}
	for _, k := range keys {
		sku, location, _ := strings.Cut(k, "\x00")
		var at []Line
		for _, l := range lines {
			if l.SKU == sku && (location == "" || l.Location == location) {
				at = append(at, l)
			}
		}
		w := want[k]
		switch {
		case len(at) == 0 && location != "":
			return nil, 0, domain.Invalid("items name SKU %q at %s, where this hold does not hold it", sku, location)
		case len(at) == 0:
			return nil, 0, domain.Invalid("items name SKU %q, which this hold does not hold", sku)
		case len(at) > 1:
			var where []string
			for _, l := range at {
				where = append(where, l.Location)
			}
			return nil, 0, domain.Invalid("this hold holds SKU %q at %s: give each item's location", sku, strings.Join(where, " and "))
		}
		l := at[0]
		if seen[rowKey(l.SKU, l.Location, l.Pool)] {
			return nil, 0, domain.Invalid("items give SKU %q at %s twice (with and without its location): give it once", sku, l.Location)
		}
		seen[rowKey(l.SKU, l.Location, l.Pool)] = true
		switch {
		case len(w.units) > 0 && len(l.Units) == 0:
			return nil, 0, domain.Invalid("items name units of SKU %q, whose line in this hold has none: give a quantity", sku)
		case len(w.units) == 0 && len(l.Units) > 0:
			return nil, 0, domain.Invalid("SKU %q is held as units with an identity: name the units to release (units)", sku)
		case len(w.units) > 0:
			var notHeld []string
			for _, u := range w.units {
				if !slices.Contains(l.Units, u) {
					notHeld = append(notHeld, u)
				}
			}
			if len(notHeld) > 0 {
				return nil, 0, domain.Invalid("items release units %s of SKU %q, which this hold does not hold", stock.QuoteIDs(notHeld), sku)
			}
			give = append(give, Line{SKU: sku, Location: l.Location, Pool: l.Pool, Quantity: int64(len(w.units)), Units: sortedIDs(w.units)})
			left -= int64(len(w.units))
			continue
		case w.quantity > l.Quantity:
			return nil, 0, domain.Invalid("items release %d of SKU %q, this hold holds %d at %s", w.quantity, sku, l.Quantity, l.Location)
		}
		// Backordered is the line's as read (the change gives its
		// promised units back first).
		give = append(give, Line{SKU: sku, Location: l.Location, Pool: l.Pool, Quantity: w.quantity, Backordered: l.Backordered})
		left -= w.quantity
	}
	slices.SortFunc(give, compareLines)
	return give, left, nil
}
