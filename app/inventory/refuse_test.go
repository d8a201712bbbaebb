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
	"github.com/stockhold/stockhold/app/idempotency"
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

// TestTheDatabaseRefusesAWrongSeatGrant writes, with a hold batch's own
// grant statement, grants of seats that are not available (held by
// another hold, sold, retired) from a row that has the units to give:
// the statement's own re-check of each seat's status refuses them with
// SH001, naming the seats, whether the units' state machine trigger is
// there behind it or not (session_replication_role = replica: no
// trigger). The trigger, in turn, refuses the same grants written as
// the statement would write them without its re-check, the counters moved
// to match so that nothing else objects. Each guard alone, the other
// satisfied.
func TestTheDatabaseRefusesAWrongSeatGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	addUnits(t, svc, "OPERA", venue(1, 6))
	held, _, err := svc.Hold(ctx, holdReq("held", seats("OPERA", "A-1")))
	require.NoError(t, err)
	sold, _, err := svc.Hold(ctx, holdReq("sold", seats("OPERA", "A-2")))
	require.NoError(t, err)
	_, err = svc.Confirm(ctx, sold.ID, shop)
	require.NoError(t, err)
	_, _, err = svc.RetireUnitsOnce(ctx, idempotency.NewKey("ops", "r"), inventory.UnitsChange{SKU: "OPERA", Reason: "broken", Actor: "ops",
		Units: []inventory.UnitSpec{{ID: "A-3"}}})
	require.NoError(t, err)
	before := ledgerRows(t, b)

	// grant writes, in a transaction it rolls back, a new hold of seat
	// unit through StockHoldsApply, after the statements given, and
	// returns the statement's error.
	grant := func(unit string, statements ...string) error {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // the point is that it fails
		for _, sql := range statements {
			_, err := tx.Exec(ctx, sql)
			require.NoError(t, err)
		}
		id := uuid.New()
		_, err = tx.Exec(ctx, `INSERT INTO reservations (id, client, idempotency_key, request_hash, expires_at)
			VALUES ($1, 'shop-a', 'wrong', 'h', now() + interval '1 hour')`, id)
		require.NoError(t, err)
		var werr error
		db.New(tx).StockHoldsApply(ctx, []db.StockHoldsApplyParams{{
			RowSkus: []string{"OPERA"}, RowLocations: []string{"default"}, RowPools: []string{"main"}, RowQuantities: []int64{1},
			LineIds: []uuid.UUID{id}, LineSkus: []string{"OPERA"}, LineLocations: []string{"default"}, LinePools: []string{"main"},
			LineQuantities: []int64{1}, LineActors: []string{"test"}, LineActorKeys: []string{""},
			UnitReservationIds: []uuid.UUID{id}, UnitSkus: []string{"OPERA"}, UnitLocations: []string{"default"}, UnitPools: []string{"main"},
			UnitIds: []string{unit},
		}}).Exec(func(_ int, e error) { werr = e })
		return werr
	}
	for _, unit := range []string{"A-1", "A-2", "A-3"} {
		for name, statements := range map[string][]string{
			"with the trigger":    nil,
			"without the trigger": {`SET LOCAL session_replication_role = replica`},
		} {
			err := grant(unit, statements...)
			require.Equal(t, "SH001", sqlstate(err), "%s %s: %v", unit, name, err)
			require.ErrorContains(t, err, "units not available: OPERA/"+unit, "%s %s", unit, name)
		}
	}

	// The trigger alone: the grants as the statement would write them
	// without its re-check, the counters moved as the units move.
	refusedBy := func(name, why string, statements ...string) {
		t.Helper()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // the point is that it fails
		for _, sql := range statements {
			if _, err = tx.Exec(ctx, sql); err != nil {
				break
			}
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		require.ErrorContains(t, err, why, name)
	}
	newHold := `INSERT INTO reservations (id, client, idempotency_key, request_hash, expires_at)
		VALUES ('00000000-0000-0000-0000-0000000000aa', 'shop-a', 'wrong', 'h', now() + interval '1 hour')`
	take := func(id string) string {
		return `UPDATE units SET status = 'held', reservation_id = '00000000-0000-0000-0000-0000000000aa' WHERE sku = 'OPERA' AND id = '` + id + `'`
	}
	counters := func(set string) string { return `UPDATE stock SET ` + set + ` WHERE sku = 'OPERA' AND pool = 'main'` }
	refusedBy("a held seat to another hold", "cannot go from held to held", newHold, take("A-1"))
	refusedBy("a sold seat held again, counters too", "cannot go from sold to held",
		newHold, take("A-2"), counters(`sold = sold - 1, reserved = reserved + 1`))
	refusedBy("a retired seat held, counters too", "cannot go from retired to held",
		newHold, take("A-3"), counters(`total = total + 1, reserved = reserved + 1`))

	require.Equal(t, before, ledgerRows(t, b), "nothing written")
	status, holder := unitsByStatus(t, b.pool, "OPERA")
	require.Equal(t, map[string]string{"A-1": "held", "A-2": "sold", "A-3": "retired", "A-4": "available", "A-5": "available", "A-6": "available"}, status)
	require.Equal(t, held.ID, holder["A-1"])
	// What the statement re-checks, it still grants: an available seat.
	r, _, err := svc.Hold(ctx, holdReq("fine", seats("OPERA", "A-4")))
	require.NoError(t, err)
	require.Equal(t, []string{"A-4"}, r.Items[0].Units)
}
