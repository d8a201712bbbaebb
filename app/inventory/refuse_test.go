package inventory_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// sqlstate returns the SQLSTATE of err, or "".
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// ledgerRows counts the ledger's rows.
func ledgerRows(t *testing.T, b *bundle) int {
	return dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger`)
}

// TestTheDatabaseRefusesAWrongChange writes, with the service's own change
// statement, decisions that do not match what the database holds: each
// must fail with SQLSTATE SH001 and write nothing, whatever the Go code
// decided. The database re-checks every decision, not only the CHECK
// constraints (none of these would break one).
func TestTheDatabaseRefusesAWrongChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B2", 10)
	r, _, err := svc.Hold(ctx, holdReq("k", item("A1", 3), item("B2", 2)))
	require.NoError(t, err)
	done, _, err := svc.Hold(ctx, holdReq("k2", item("A1", 1)))
	require.NoError(t, err)
	_, err = svc.Confirm(ctx, done.ID, shop)
	require.NoError(t, err)

	type line struct {
		sku  string
		q    int64
		kind string
	}
	change := func(id uuid.UUID, status string, lines ...line) db.ReservationsChangeParams {
		p := db.ReservationsChangeParams{Ids: []uuid.UUID{id}, Statuses: []string{status}, Actors: []string{"test"}, Reasons: []string{""}}
		for _, l := range lines {
			p.LineIds = append(p.LineIds, id)
			p.LineSkus = append(p.LineSkus, l.sku)
			p.LineLocations = append(p.LineLocations, "default")
			p.LinePools = append(p.LinePools, "main")
			p.LineQuantities = append(p.LineQuantities, l.q)
			p.LineKinds = append(p.LineKinds, l.kind)
		}
		return p
	}
	cases := map[string]db.ReservationsChangeParams{
		"a line's quantity not as held":       change(r.ID, "released", line{"A1", 2, "release"}, line{"B2", 2, "release"}),
		"a line left out of a hold that ends": change(r.ID, "confirmed", line{"A1", 3, "confirm"}),
		"a line the hold does not have":       change(r.ID, "released", line{"A1", 3, "release"}, line{"B2", 2, "release"}, line{"C3", 1, "release"}),
		"a partial release of more than held": change(r.ID, "held", line{"B2", 3, "release_partial"}),
		"a hold that is not held":             change(done.ID, "released", line{"A1", 1, "release"}),
	}
	before := ledgerRows(t, b)
	for name, p := range cases {
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			q := db.New(tx)
			var lerr error
			q.ReservationsLockMany(ctx, [][]uuid.UUID{p.Ids}).Query(func(_ int, _ []db.ReservationsLockManyRow, e error) { lerr = e })
			if lerr != nil {
				return lerr
			}
			var werr error
			q.ReservationsChange(ctx, []db.ReservationsChangeParams{p}).Exec(func(_ int, e error) { werr = e })
			return werr
		})
		require.Equal(t, "SH001", sqlstate(err), "%s: %v", name, err)
	}

	// Counters that disagree with the lines, though balanced and not
	// negative: A1 reserved 3 less than its held lines. A whole release
	// of r must be refused, not take reserved to 0 and hand back 3.
	_, err = b.pool.Exec(ctx, `UPDATE stock SET reserved = reserved - 3, available = available + 3 WHERE sku = 'A1'`)
	require.NoError(t, err)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := svc.ReleaseTx(ctx, tx, []uuid.UUID{r.ID}, inventory.Release{Status: inventory.StatusReleased, Kind: "rollback", Actor: "test", Reason: "test"})
		return err
	})
	require.Equal(t, domain.CodeBooksUnbalanced, code(err), "%v", err)
	require.Equal(t, before, ledgerRows(t, b), "nothing written")
	_, err = svc.Get(ctx, r.ID, shop)
	require.NoError(t, err)
	require.Equal(t, inventory.StatusHeld, mustGet(t, svc, r.ID).Status)

	// The same through the confirm batch: 409 books_unbalanced, nothing
	// sold, and an alert for a person.
	var (
		mu     sync.Mutex
		alerts []inventory.Alert
	)
	alerting := b.another(inventory.Config{Alert: func(_ context.Context, a inventory.Alert) {
		mu.Lock()
		defer mu.Unlock()
		alerts = append(alerts, a)
	}})
	_, err = alerting.Confirm(ctx, r.ID, shop)
	require.Equal(t, domain.CodeBooksUnbalanced, code(err), "%v", err)
	require.Equal(t, inventory.StatusHeld, mustGet(t, svc, r.ID).Status)
	require.Equal(t, before, ledgerRows(t, b))
	mu.Lock()
	require.Len(t, alerts, 1)
	require.Equal(t, "change_refused", alerts[0].Kind)
	mu.Unlock()

	// Put the books right again for the invariant check at cleanup.
	_, err = b.pool.Exec(ctx, `UPDATE stock SET reserved = reserved + 3, available = available - 3 WHERE sku = 'A1'`)
	require.NoError(t, err)
}

// TestTheDatabaseRefusesAWrongGrant writes a hold batch's grants that the
// locked stock rows cannot give: the statement fails with SH001.
func TestTheDatabaseRefusesAWrongGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 2)
	_, err := svc.Pause(ctx, inventory.SwitchRequest{SKU: "A1", Pool: "main", Reason: "test", Actor: "test"})
	require.NoError(t, err)
	dbtest.StockIn(t, b.pool, "B2", 2)
	before := ledgerRows(t, b)
	id := uuid.New()
	for name, sku := range map[string]string{"more than available": "B2", "a paused row": "A1"} {
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO reservations (id, client, idempotency_key, request_hash, expires_at)
				VALUES ($1, 'shop-a', $2, 'h', now() + interval '1 hour')`, id, name)
			if err != nil {
				return err
			}
			q := db.New(tx)
			quantity := int64(3)
			if sku == "A1" {
				quantity = 1
			}
			var werr error
			q.StockHoldsApply(ctx, []db.StockHoldsApplyParams{{
				RowSkus: []string{sku}, RowLocations: []string{"default"}, RowPools: []string{"main"}, RowQuantities: []int64{quantity},
				LineIds: []uuid.UUID{id}, LineSkus: []string{sku}, LineLocations: []string{"default"}, LinePools: []string{"main"},
				LineQuantities: []int64{quantity}, LineActors: []string{"test"},
			}}).Exec(func(_ int, e error) { werr = e })
			return werr
		})
		require.Equal(t, "SH001", sqlstate(err), "%s: %v", name, err)
	}
	require.Equal(t, before, ledgerRows(t, b))
	_, err = svc.Lift(ctx, inventory.Lift{SwitchRequest: inventory.SwitchRequest{SKU: "A1", Pool: "main", Reason: "test", Actor: "test"}})
	require.NoError(t, err)
}

func mustGet(t *testing.T, svc *inventory.Service, id uuid.UUID) inventory.Reservation {
	t.Helper()
	r, err := svc.Get(context.Background(), id, shop)
	require.NoError(t, err)
	return r
}
