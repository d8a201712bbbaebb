package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/stock"
)

// listExpiring is List with ExpiresBefore: the holds whose expiry is before
// it, soonest first (then by id), a page at a time; the cursor is the last
// hold of the previous page. With status held it is what is about to
// expire, read through the partial index on held holds' expiry.
func (s *Service) listExpiring(ctx context.Context, q *db.Queries, lq ListQuery, p db.ReservationsListParams) (ListPage, error) {
	if lq.Before != nil {
		// The cursor places the page by its hold's expiry: it must be a
		// hold the caller may see, or the answer would tell a shop where
		// another shop's hold expires.
		after, err := q.ReservationGet(ctx, *lq.Before)
		switch {
		case errors.Is(err, pgx.ErrNoRows), err == nil && p.Client != nil && after.Client != *p.Client:
			return ListPage{}, stock.ErrCursor
		case err != nil:
			return ListPage{}, fmt.Errorf("read the cursor's hold: %w", err)
		}
	}
	rows, err := q.ReservationsExpiring(ctx, db.ReservationsExpiringParams{
		ExpiresBefore: *lq.ExpiresBefore, AfterID: lq.Before, Client: p.Client, OrderRef: p.OrderRef,
		Status: p.Status, Sku: p.Sku, Lim: p.Lim,
	})
	if err != nil {
		return ListPage{}, fmt.Errorf("list holds by expiry: %w", err)
	}
	return pageOf(ctx, q, rows, lq.Limit)
}
