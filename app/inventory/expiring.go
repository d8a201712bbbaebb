package inventory

import (
	"context"
	"fmt"

	"github.com/stockhold/stockhold/app/db"
)

// listExpiring is List with ExpiresBefore: the holds whose expiry is before
// it, soonest first (then by id), a page at a time; the cursor is the last
// hold of the previous page. With status held it is what is about to
// expire, read through the partial index on held holds' expiry.
func (s *Service) listExpiring(ctx context.Context, q *db.Queries, lq ListQuery, p db.ReservationsListParams) (ListPage, error) {
	rows, err := q.ReservationsExpiring(ctx, db.ReservationsExpiringParams{
		ExpiresBefore: *lq.ExpiresBefore, AfterID: lq.Before, Client: p.Client, OrderRef: p.OrderRef,
		Status: p.Status, Sku: p.Sku, Lim: p.Lim,
	})
	if err != nil {
		return ListPage{}, fmt.Errorf("list holds by expiry: %w", err)
	}
	return pageOf(ctx, q, rows, lq.Limit)
}
