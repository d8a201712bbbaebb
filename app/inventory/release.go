package inventory

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
)

// Confirm turns a held reservation into a sale. Confirming a confirmed hold
// again succeeds with the same answer; a hold that was released or expired
// (including one found past its expiry now, which this expires) is refused
// with its status, so a late payment never resurrects stock that was handed
// back. Confirms are group-committed with other confirms and releases.
//
// A confirm refused because the hold was released or expired is a late
// payment: it also raises a late_confirmation alert (see lateConfirmation),
// and Reinstate can hold the same lines again.
func (s *Service) Confirm(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	start := time.Now()
	r, err := s.changeBatched(ctx, &changeCall{id: id, by: by, confirm: true})
	c := holdstats.ConfirmTime{Took: time.Since(start)}
	for _, l := range r.Lines() {
		c.Pools = append(c.Pools, holdstats.PoolKey{SKU: l.SKU, Location: l.Location, Pool: l.Pool})
	}
	s.confirmTimes.Add(c)
	var de *domain.Error
	if errors.As(err, &de) && de.Code == domain.CodeNotHeld && (HoldStatus(de.Status) == StatusReleased || HoldStatus(de.Status) == StatusExpired) {
		s.lateConfirmation(ctx, id, by)
	}
	return r, err
}

// Release releases a held reservation at the shop's request. Releasing it
// again answers the same; a confirmed hold is refused with its status; one
// that expired meanwhile is answered as it is, since its stock is back, and
// one found past its expiry is expired rather than released (a change to
// an overdue hold expires it, whatever was asked).
func (s *Service) Release(ctx context.Context, id uuid.UUID, by Caller, reason string) (Reservation, error) {
	if err := domain.ValidText("reason", reason, domain.MaxTextLength); err != nil {
		return Reservation{}, err
	}
	if reason == "" {
		reason = "cancelled"
	}
	return s.changeBatched(ctx, &changeCall{id: id, by: by, reason: reason})
}
