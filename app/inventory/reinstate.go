package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// reinstatePrefix starts the idempotency key of a hold made by Reinstate:
// the key is the prefix and the original hold's id, under the original's
// client. No caller's key can start with it (keys from the API are
// printable ASCII), so the unique (client, idempotency_key) index is what
// makes a hold reinstated at most once, and the key is the link between
// the two holds in both directions.
const reinstatePrefix = "↻"

func reinstateKey(id uuid.UUID) string { return reinstatePrefix + id.String() }

// reinstatedFrom is the original hold a reinstating hold's key names, or
// nil for any other hold.
func reinstatedFrom(key string) *uuid.UUID {
	rest, ok := strings.CutPrefix(key, reinstatePrefix)
	if !ok {
		return nil
	}
	id, err := uuid.Parse(rest)
	if err != nil {
		return nil
	}
	return &id
}

// Reinstate holds again, from available stock, the lines of hold id that
// was released or expired: a late payment whose order can still be filled.
// A released hold never returns to held (invariant 4), so this makes a new
// hold of the same lines, order reference and campaign, for the original's
// client, with the original's time to live counted from now (a campaign's
// own TTL wins, as for any hold). It goes through the hold batch like any
// hold, so it is all or nothing (409 out_of_stock naming the line) and
// refused while sales are stopped. Being a new hold, it is bound like any:
// a caller whose key is bound to locations (Caller.Locations) reinstates
// only a hold whose every line is at one of them, or is refused with 403
// location_not_allowed naming the first line elsewhere. Its ledger rows
// name who reinstated it (the caller) and the key that authenticated
// them, as an operator's other acts do. A line of units with an identity
// holds the same units again (the same seats, so the same adjacency), or
// the hold is refused with 409 unit_unavailable naming the units taken
// since. A component line of a bundle is held again as the same
// component line, recording the same bundle line and definition version
// (bundles.go), whatever the bundle's definition is now. Reinstating a hold again answers the hold the first call made,
// as it is now (a read, which a binding does not limit). A hold still
// held or confirmed is 409 reservation_not_ended.
func (s *Service) Reinstate(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	q := db.New(s.pool)
	orig, err := q.ReservationGet(ctx, id)
	if err != nil {
		return Reservation{}, dberr.NotFound(err, "reservation")
	}
	if !by.maySee(orig.Client) {
		return Reservation{}, domain.Missing("reservation")
	}
	if HoldStatus(orig.Status) != StatusReleased && HoldStatus(orig.Status) != StatusExpired {
		return Reservation{}, &domain.Error{Code: domain.CodeNotEnded, Status: orig.Status,
			Detail: fmt.Sprintf("reservation %s is %s: only a released or expired hold can be reinstated", id, orig.Status)}
	}
	if again, err := q.ReservationGetByKey(ctx, orig.Client, reinstateKey(id)); err == nil {
		return s.Get(ctx, again.ID, by) // reinstated before: that hold, as it is now
	}
	lines, err := linesOf(ctx, q, id)
	if err != nil {
		return Reservation{}, err
	}
	req := HoldRequest{
		Client: orig.Client, IdempotencyKey: reinstateKey(id), OrderRef: domain.Value(orig.OrderRef),
		Campaign: domain.Value(orig.Campaign), CustomerRef: domain.Value(orig.CustomerRef),
		TTLSeconds: min(max(int64(orig.ExpiresAt.Sub(orig.CreatedAt)/time.Second), 1), MaxTTLSeconds),
		// Who reinstated it, and with which key: an operator acting on a
		// shop's late payment is recorded as such, not as the shop.
		Actor: by.Name, ActorKey: domain.Value(domain.KeyName(ctx)),
		// A new hold, so the caller's key binding applies as to any: a
		// line at a location the key may not use is 403
		// location_not_allowed (Validate), whatever key made the original.
		Locations: by.Locations,
	}
	bundles := map[string]*BundleLine{} // one per bundle line of the original
	for _, l := range lines {
		// At the location each line was taken from, which a key bound to
		// locations must be allowed to use, as for any new hold.
		if by.Locations != nil && !slices.Contains(by.Locations, l.Location) {
			return Reservation{}, &domain.Error{Code: domain.CodeLocationNotAllowed, SKU: l.SKU, Location: l.Location,
				Detail: fmt.Sprintf("reservation %s holds SKU %q at %q: this API key's holds take stock only at %s",
					id, l.SKU, l.Location, strings.Join(by.Locations, ", "))}
		}
		// A component line of a bundle records the same bundle line, the
		// definition version it used included.
		var b *BundleLine
		if l.Bundle != nil {
			if b = bundles[l.Bundle.SKU]; b == nil {
				b = l.Bundle
				bundles[b.SKU] = b
			}
		}
		if len(l.Units) > 0 {
			// The same units, so the same seats (and their adjacency), or a
			// refusal naming the ones taken: never other units of the pool.
			req.Items = append(req.Items, Item{SKU: l.SKU, Units: l.Units, Location: l.Location, bundle: b})
			continue
		}
		req.Items = append(req.Items, Item{SKU: l.SKU, Quantity: l.Quantity, Location: l.Location, bundle: b})
	}
	if len(req.Items) == 0 {
		// A hold whose lines retention or a partial release emptied has
		// nothing to hold again.
		return Reservation{}, domain.Invalid("reservation %s has no lines to hold again", id)
	}
	r, replayed, err := s.Hold(ctx, req)
	if err != nil {
		return Reservation{}, err
	}
	if replayed {
		return s.Get(ctx, r.ID, by) // a concurrent reinstatement made it
	}
	return r, nil
}

// lateConfirmation records a confirm that found its hold released or
// expired: a payment that arrived after its stock was handed back. It
// raises a late_confirmation alert (warning) naming the hold, its order
// reference and its lines, for a person to decide: reinstate it if the
// stock is there, or refund. The confirm is answered 409 whatever happens
// here.
func (s *Service) lateConfirmation(ctx context.Context, id uuid.UUID, by Caller) {
	if s.cfg.Alert == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	r, err := s.Get(ctx, id, Caller{Name: by.Name, Ops: true})
	if err != nil {
		s.log.ErrorContext(ctx, "late confirmation: read the hold", "hold_id", id, "err", err)
		return
	}
	ref := domain.Value(r.OrderRef)
	details := map[string]any{
		"reservation_id": r.ID, "order_ref": r.OrderRef, "status": r.Status, "client": r.client,
		"confirmed_by": by.Name, "items": r.Items, "expires_at": r.ExpiresAt, "released_at": r.ReleasedAt,
		"release_reason": r.ReleaseReason,
	}
	s.cfg.Alert(ctx, stock.Alert{
		Level:   "warning",
		Kind:    "late_confirmation",
		Subject: "hold:" + id.String(),
		Summary: fmt.Sprintf("A payment for order %q was confirmed after its hold %s was %s, and the confirm was refused (409): "+
			"the order is paid but holds no stock. Reinstate the hold (POST /v1/reservations/%s/reinstate, or the console's hold page) "+
			"to hold the same lines again if the stock is there, then confirm the new hold; otherwise refund the order.",
			ref, id, r.Status, id),
		Details: details,
	})
}
