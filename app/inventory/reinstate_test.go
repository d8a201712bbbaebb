package inventory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// expireLate lets hold id run out and confirms it late, as a payment that
// arrived after its expiry: 409, and the hold expired.
func expireLate(t *testing.T, svc *inventory.Service, b *bundle, id uuid.UUID) {
	t.Helper()
	pastExpiry(t, b.pool, id)
	_, err := svc.Confirm(context.Background(), id, shop)
	require.Equal(t, domain.CodeNotHeld, code(err), "a late confirm")
}

// TestReinstateHoldsTheSameSeats: reinstating a hold of seats holds the
// same seats again, or refuses naming the seats taken since; never other
// seats of the venue.
func TestReinstateHoldsTheSameSeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	addUnits(t, svc, "SHOW", venue(2, 6))

	// Named seats in the middle of a row, with the front seats free.
	named, _, err := svc.Hold(ctx, holdReq("named", seats("SHOW", "A-3", "A-4")))
	require.NoError(t, err)
	expireLate(t, svc, b, named.ID)
	again, err := svc.Reinstate(ctx, named.ID, shop)
	require.NoError(t, err)
	require.Equal(t, []inventory.HeldItem{{SKU: "SHOW", Pool: "main", Quantity: 2, Location: "default", Units: []string{"A-3", "A-4"}}}, again.Items,
		"the same seats, although A-1 and A-2 are free")
	status, holder := unitsByStatus(t, b.pool, "SHOW")
	require.Equal(t, "available", status["A-1"])
	require.Equal(t, again.ID, holder["A-3"])
	require.Equal(t, again.ID, holder["A-4"])

	// Seats picked together: the same pair again.
	together, _, err := svc.Hold(ctx, holdReq("together", inventory.Item{SKU: "SHOW", Quantity: 2, Adjacent: true}))
	require.NoError(t, err)
	require.Equal(t, []string{"A-1", "A-2"}, together.Items[0].Units)
	expireLate(t, svc, b, together.ID)
	// A seat of the pair sold to someone else meanwhile: refused, naming
	// it, although are free together.
	other, _, err := svc.Hold(ctx, holdReq("other", seats("SHOW", "A-1")))
	require.NoError(t, err)
	_, err = svc.Confirm(ctx, other.ID, shop)
	require.NoError(t, err)
	before := pool(t, svc, "SHOW", "main")
	_, err = svc.Reinstate(ctx, together.ID, shop)
	require.Equal(t, domain.CodeUnitUnavailable, code(err))
	require.Equal(t, []string{"A-1"}, unitsOf(err))
	require.Equal(t, before, pool(t, svc, "SHOW", "main"), "nothing held")
	status, _ = unitsByStatus(t, b.pool, "SHOW")
	require.Equal(t, "available", status["A-2"])
	require.Equal(t, "available", status["A-5"])

	// A hold that gave a seat back holds the seats it kept.
	kept, _, err := svc.Hold(ctx, holdReq("kept", seats("SHOW", "B-1", "B-2", "B-3")))
	require.NoError(t, err)
	_, err = svc.ReleaseItems(ctx, kept.ID, shop, "one less", []inventory.Item{seats("SHOW", "B-2")})
	require.NoError(t, err)
	expireLate(t, svc, b, kept.ID)
	back, err := svc.Reinstate(ctx, kept.ID, shop)
	require.NoError(t, err)
	require.Equal(t, []string{"B-1", "B-3"}, back.Items[0].Units)
	// A seat retired meanwhile is not held again either.
	_, err = svc.Release(ctx, back.ID, shop, "")
	require.NoError(t, err)
	_, _, err = svc.RetireUnitsOnce(ctx, idempotency.NewKey("ops", "retire-b3"),
		stock.UnitsChange{SKU: "SHOW", Reason: "broken", Actor: "ops", Units: []stock.UnitSpec{{ID: "B-3"}}})
	require.NoError(t, err)
	_, err = svc.Reinstate(ctx, back.ID, shop)
	require.Equal(t, domain.CodeUnitUnavailable, code(err))
	require.Equal(t, []string{"B-3"}, unitsOf(err))
}
