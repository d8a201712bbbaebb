package retention_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/retention"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/jobs"
)

type bundle struct {
	pool *pgxpool.Pool
	deps *app.Services
}

func setup(t *testing.T) bundle {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.NewServices(config.Defaults(), pool, inserter, nil)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return bundle{pool: pool, deps: deps}
}

// hold makes a hold of two lines and ends it as status says.
func (b bundle) hold(t *testing.T, key, status string) uuid.UUID {
	t.Helper()
	ctx := t.Context()
	inv := b.deps.Inventory
	r, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: key,
		Items: []inventory.Item{{SKU: "A1", Quantity: 2}, {SKU: "B2", Quantity: 1}}})
	require.NoError(t, err)
	switch inventory.HoldStatus(status) {
	case inventory.StatusConfirmed:
		_, err = inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
	case inventory.StatusReleased:
		_, err = inv.Release(ctx, r.ID, inventory.Caller{Name: "shop"}, "cancelled")
	case inventory.StatusExpired:
		_, err = b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, r.ID)
		require.NoError(t, err)
		err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			ended, err := inv.ReleaseTx(ctx, tx, []uuid.UUID{r.ID}, inventory.Outcome{
				Status: inventory.StatusExpired, Kind: "expire", Actor: "test", Reason: "expired", DueOnly: true})
			if err == nil && len(ended) != 1 {
				err = fmt.Errorf("expired %d holds", len(ended))
			}
			return err
		})
	}
	require.NoError(t, err)
	return r.ID
}

// age moves a hold's times back by d, as if it were made d ago.
func (b bundle) age(t *testing.T, id uuid.UUID, d time.Duration) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), `
		UPDATE reservations SET created_at = created_at - $2::interval, updated_at = updated_at - $2::interval,
		       expires_at = expires_at - $2::interval, released_at = released_at - $2::interval,
		       confirmed_at = confirmed_at - $2::interval
		WHERE id = $1`, id, d)
	require.NoError(t, err)
}

func (b bundle) exists(t *testing.T, id uuid.UUID) (hold bool, lines, ledger int) {
	t.Helper()
	require.NoError(t, b.pool.QueryRow(t.Context(), `
		SELECT EXISTS (SELECT 1 FROM reservations WHERE id = $1),
		       (SELECT count(*) FROM reservation_lines WHERE reservation_id = $1),
		       (SELECT count(*) FROM ledger WHERE reservation_id = $1)`, id).Scan(&hold, &lines, &ledger))
	return hold, lines, ledger
}

// TestRetentionDeletesOnlyWhatIsOld runs retention over holds of every
// status, old and recent, and idempotency records: it deletes the old
// ended holds (in batches, lines included) and the old records, keeps the
// rest and the whole ledger, and a reconciliation afterwards finds the
// books in balance (no false alarm), as do the invariants.
func TestRetentionDeletesOnlyWhatIsOld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.deps.Inventory.AdjustMany(ctx, stock.BulkAdjustment{Actor: "seed", Lines: []stock.BulkLine{
		{SKU: "A1", Delta: 100}, {SKU: "B2", Delta: 100}}})
	require.NoError(t, err)
	const month = 31 * 24 * time.Hour

	var gone, kept []uuid.UUID
	for i := range 5 {
		for _, st := range []string{string(inventory.StatusReleased), string(inventory.StatusExpired)} {
			id := b.hold(t, fmt.Sprintf("old-%s-%d", st, i), st)
			b.age(t, id, month)
			gone = append(gone, id)
		}
	}
	for _, c := range []struct {
		status string
		age    time.Duration
	}{
		{string(inventory.StatusConfirmed), month}, {string(inventory.StatusHeld), month}, // kept whatever their age
		{string(inventory.StatusReleased), time.Hour}, {string(inventory.StatusExpired), 0}, {string(inventory.StatusConfirmed), 0}, {string(inventory.StatusHeld), 0},
	} {
		id := b.hold(t, fmt.Sprintf("keep-%s-%s", c.status, c.age), c.status)
		b.age(t, id, c.age)
		kept = append(kept, id)
	}
	// Released within the period, but its expiry is still to come (a
	// hold released early): kept until both are old.
	early := b.hold(t, "early", string(inventory.StatusReleased))
	_, err = b.pool.Exec(ctx, `UPDATE reservations SET released_at = released_at - $2::interval, expires_at = now() + interval '1 day' WHERE id = $1`, early, month)
	require.NoError(t, err)
	kept = append(kept, early)

	for i := range 4 {
		key := idempotency.Key{Client: "alice", Key: fmt.Sprint("k", i), Hash: "h"}
		_, _, err := idempotency.Do(ctx, b.pool, key, func(pgx.Tx) (struct{}, error) { return struct{}{}, nil })
		require.NoError(t, err)
	}
	_, err = b.pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = created_at - $1::interval WHERE key IN ('k0', 'k1', 'k2')`, month)
	require.NoError(t, err)

	svc := retention.New(b.pool, retention.Config{After: 30 * 24 * time.Hour, Batch: 3})
	res, err := svc.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, retention.Result{Holds: 10, Lines: 20, IdempotencyKeys: 3, Done: true}, res)
	for _, id := range gone {
		hold, lines, ledger := b.exists(t, id)
		require.False(t, hold)
		require.Zero(t, lines)
		require.Equal(t, 4, ledger, "its ledger rows (reserve and release of two lines) are kept")
	}
	for _, id := range kept {
		hold, lines, _ := b.exists(t, id)
		require.True(t, hold)
		require.Equal(t, 2, lines)
	}
	var keys []string
	rows, err := b.pool.Query(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	require.NoError(t, err)
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"k3"}, keys)

	res, err = svc.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, retention.Result{Done: true}, res, "nothing more to delete")

	// No false alarm: the books still balance for reconciliation...
	run, err := b.deps.Reconcile.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, "succeeded", run.Status)
	require.Zero(t, run.HighRisk, "%+v", run.Findings.HighRisk)
	for _, sku := range []string{"A1", "B2"} {
		st, err := b.deps.Inventory.GetStock(ctx, sku)
		require.NoError(t, err)
		require.Equal(t, stock.StockOnSale, st.Pools[0].Status, "%s not paused", sku)
	}
	// ...and for the invariant check (at cleanup). Deleting a confirmed
	// hold, which retention never does, would break them: the check can
	// tell (shown in a transaction rolled back).
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.WithoutCancel(ctx))
	_, err = tx.Exec(ctx, `DELETE FROM reservation_lines WHERE reservation_id = $1`, kept[0])
	require.NoError(t, err)
	broken, err := db.New(tx).InvariantViolations(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, broken)
}

// TestRetentionBudgetAndLocks stops a run at its budget with rows left for
// the next, and leaves a hold that someone holds locked to a later run.
func TestRetentionBudgetAndLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.deps.Inventory.AdjustMany(ctx, stock.BulkAdjustment{Actor: "seed", Lines: []stock.BulkLine{
		{SKU: "A1", Delta: 100}, {SKU: "B2", Delta: 100}}})
	require.NoError(t, err)
	var ids []uuid.UUID
	for i := range 4 {
		id := b.hold(t, fmt.Sprint("h", i), string(inventory.StatusReleased))
		b.age(t, id, 48*time.Hour)
		ids = append(ids, id)
	}

	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM reservations WHERE id = $1 FOR UPDATE`, ids[0])
	require.NoError(t, err)

	spent := retention.New(b.pool, retention.Config{After: 24 * time.Hour, Batch: 1, Budget: time.Nanosecond})
	res, err := spent.Run(ctx)
	require.NoError(t, err)
	require.False(t, res.Done, "stopped at its budget")

	svc := retention.New(b.pool, retention.Config{After: 24 * time.Hour, Batch: 1})
	res, err = svc.Run(ctx)
	require.NoError(t, err)
	require.True(t, res.Done)
	hold, _, _ := b.exists(t, ids[0])
	require.True(t, hold, "a locked hold is skipped, not waited for")
	require.NoError(t, tx.Rollback(ctx))
	res, err = svc.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, retention.Result{Holds: 1, Lines: 2, Done: true}, res)
	for _, id := range ids {
		hold, _, _ := b.exists(t, id)
		require.False(t, hold)
	}
}
