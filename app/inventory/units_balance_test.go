package inventory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestUnitsBalanceFromWhatMoved: the database checks at commit that a
// transaction moved a serialized pool's counters as it moved its units
// (from what moved, not by counting the pool), so plain SQL is
// held to the same rule in one statement or several: moved together it
// commits, moved apart it is refused at commit naming what the units are,
// a savepoint rolled back takes its moves back with it, and a transaction
// that asks for its constraints at once has them checked statement by
// statement.
func TestUnitsBalanceFromWhatMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	addUnits(t, svc, "HALL", venue(2, 3))
	h, _, err := svc.Hold(ctx, holdReq("h", seats("HALL", "A-1")))
	require.NoError(t, err)

	run := func(statements ...string) error {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // committed below, or refused
		for _, sql := range statements {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	}
	unit := func(id, set string) string {
		return `UPDATE units SET ` + set + ` WHERE sku = 'HALL' AND id = '` + id + `'`
	}
	held := fmt.Sprintf(`status = 'held', reservation_id = '%s'`, h.ID)
	free := `status = 'available', reservation_id = NULL`
	counters := func(set string) string { return `UPDATE stock SET ` + set + ` WHERE sku = 'HALL' AND pool = 'main'` }

	// Together, in two statements either way round: it commits.
	require.NoError(t, run(unit("A-2", held), counters(`available = available - 1, reserved = reserved + 1`)))
	require.NoError(t, run(counters(`available = available + 1, reserved = reserved - 1`), unit("A-2", free)))

	// Apart, across statements: refused at commit, with what the units are.
	err = run(unit("A-2", held), unit("A-3", held), counters(`available = available - 1, reserved = reserved + 1`))
	require.ErrorContains(t, err, "counts available 4, reserved 2, sold 0, but its units are 3 available, 3 held, 0 sold")
	err = run(counters(`available = available - 1, sold = sold + 1`))
	require.ErrorContains(t, err, "but its units are 5 available, 1 held, 0 sold")

	// A savepoint rolled back takes its moves back: nothing left to
	// balance; and a balancing move rolled back leaves the units alone.
	require.NoError(t, run(`SAVEPOINT s`, unit("A-2", held), `ROLLBACK TO SAVEPOINT s`))
	err = run(unit("A-2", held), `SAVEPOINT s`, counters(`available = available - 1, reserved = reserved + 1`), `ROLLBACK TO SAVEPOINT s`)
	require.ErrorContains(t, err, "but its units are")

	// Constraints asked for at once: the units alone are refused at their
	// statement, before the counters could follow.
	err = run(`SET CONSTRAINTS ALL IMMEDIATE`, unit("A-2", held), counters(`available = available - 1, reserved = reserved + 1`))
	require.ErrorContains(t, err, "but its units are")

	// Nothing of the above stayed: the service's own moves go on.
	status, _ := unitsByStatus(t, b.pool, "HALL")
	require.Equal(t, map[string]string{"A-1": "held", "A-2": "available", "A-3": "available", "B-1": "available", "B-2": "available", "B-3": "available"}, status)
	_, err = svc.Confirm(ctx, h.ID, shop)
	require.NoError(t, err)
	p := pool(t, svc, "HALL", "main")
	require.Equal(t, [3]int64{5, 0, 1}, [3]int64{p.Available, p.Reserved, p.Sold})
	dbtest.RequireInvariants(t, b.pool)
}
