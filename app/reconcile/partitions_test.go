package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/reports"
)

// TestReadersAcrossLedgerPartitions: a SKU whose ledger lies in two
// partitions (a movement written before this month, in the first
// partition, and this month's, in the month's partition) reads the same
// as one table would: the event feed a row at a time from the start,
// the SKU's ledger a row at a time newest first, the daily report of
// either day, and reconciliation (full, incremental, deep) proving the
// counters from both.
func TestReadersAcrossLedgerPartitions(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	q := db.New(b.pool)
	var before time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `
		WITH s AS (INSERT INTO stock (sku, pool, total, available, version) VALUES ('P1', 'main', 5, 5, 1) RETURNING 1)
		INSERT INTO ledger (at, sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor,
		                    total_after, available_after, reserved_after, sold_after)
		SELECT (date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') - interval '1 hour', 'P1', 'main', 'stock_in',
		       5, 5, 0, 0, 1, 'seed', 5, 5, 0, 0 FROM s
		RETURNING at`).Scan(&before))
	dbtest.StockIn(t, b.pool, "P1", 3)
	b.hold(t, "h", "P1", 2)

	var parts []string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(DISTINCT tableoid::regclass::text ORDER BY tableoid::regclass::text)
		FROM ledger WHERE sku = 'P1'`).Scan(&parts))
	require.Len(t, parts, 2, "P1's ledger is in two partitions")

	// The feed, a row at a time.
	settle(t, b)
	var feed []string
	var xid uint64
	var id int64
	for {
		rows, err := q.EventRowsAfter(ctx, xid, id+1, 1)
		require.NoError(t, err)
		if len(rows) == 0 {
			break
		}
		feed = append(feed, rows[0].Kind)
		xid, id = *rows[0].FeedXid, rows[0].ID
	}
	require.Equal(t, []string{"stock_in", "stock_in", "reserve"}, feed)

	// The SKU's ledger, a row at a time.
	var page []int64
	var beforeID *int64
	for {
		rows, err := q.LedgerPageBySKU(ctx, "P1", beforeID, 1)
		require.NoError(t, err)
		if len(rows) == 0 {
			break
		}
		page = append(page, rows[0].StockVersion)
		beforeID = &rows[0].ID
	}
	require.Equal(t, []int64{3, 2, 1}, page, "newest first, across the boundary")

	// The daily report of each day.
	rep := reports.New(b.pool)
	d, err := rep.Daily(ctx, reports.DailyQuery{Date: before.UTC().Format(time.DateOnly), TimeZone: "UTC"})
	require.NoError(t, err)
	require.EqualValues(t, 5, d.Totals.Change.Total, "the day before the month's start")
	d, err = rep.Daily(ctx, reports.DailyQuery{Date: time.Now().UTC().Format(time.DateOnly), TimeZone: "UTC"})
	require.NoError(t, err)
	require.EqualValues(t, 3, d.Totals.Change.Total, "today")

	// Reconciliation proves the counters from both partitions.
	for _, scope := range []string{reconcile.ScopeIncremental, reconcile.ScopeFull, reconcile.ScopeDeep} {
		r := runScope(t, svc, scope)
		require.Empty(t, r.Findings.All(), scope)
		require.EqualValues(t, 1, r.RowsChecked, scope)
	}
	cp, err := q.LedgerCheckpointGet(ctx, "P1", "default", "main")
	require.NoError(t, err)
	require.EqualValues(t, 8, cp.Total)
	dbtest.RequireInvariants(t, b.pool)
}
