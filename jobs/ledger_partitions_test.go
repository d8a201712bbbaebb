package jobs_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/jobs"
)

// TestPeriodicArchiveTakesWhatIsDue runs the ledger_partitions job as the
// service runs it (River, at start) with STOCKHOLD_LEDGER_ARCHIVE_AFTER=2
// over a ledger with four months of history, the time of each month's
// rows moved back in SQL: it archives the months that ended two months
// ago or more (the first partition and the month three months back) and
// nothing else. The younger months keep every row, only the two archives
// are written, the books still close, and a second run archives nothing
// more.
func TestPeriodicArchiveTakesWhatIsDue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, &setupOpts{stopped: true, reconcile: true, reconcileInterval: time.Hour, archiveAfter: 2, archiveDir: dir})
	ctx := context.Background()
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	first := monthsBack(t, b, month.AddDate(0, -3, 0), month)

	// A month of traffic at a time, each hold confirmed or released in
	// the month after it was made (some holds span two partitions), its
	// rows then moved back as far as that month is.
	shop := inventory.Caller{Name: "shop"}
	var open []inventory.Reservation
	for back := 3; back >= 0; back-- {
		var last int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM ledger`).Scan(&last))
		dbtest.StockIn(t, b.pool, fmt.Sprintf("M%d", back), 20)
		for i, h := range open {
			var err error
			if i%2 == 0 {
				_, err = b.inv.Confirm(ctx, h.ID, shop)
			} else {
				_, err = b.inv.Release(ctx, h.ID, shop, "")
			}
			require.NoError(t, err)
		}
		open = open[:0]
		for i := range 4 {
			h, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("m%d-%d", back, i),
				Items: []inventory.Item{{SKU: fmt.Sprintf("M%d", back), Quantity: 2}}})
			require.NoError(t, err)
			open = append(open, h)
		}
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		// The ledger refuses updates (a trigger): this moves its time.
		_, err = tx.Exec(ctx, `SET LOCAL session_replication_role = replica`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `UPDATE ledger SET at = at - make_interval(months => $2) WHERE id > $1`, last, back)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	before := rowsByPartition(t, b)
	require.Equal(t, 0, before[first], "the first partition holds nothing yet")
	for back := 3; back >= 0; back-- {
		require.Positive(t, before[monthName(month.AddDate(0, -back, 0))], "%d months back", back)
	}
	sums := stockSums(t, b)

	b.start(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, completedRuns(c, b))
	}, 30*time.Second, 20*time.Millisecond, "the job ran at start")

	due := monthName(month.AddDate(0, -3, 0))
	type archived struct {
		Partition, By string
		Rows          int64
	}
	rows, err := b.pool.Query(ctx, `SELECT partition, archived_by, rows FROM ledger_archives WHERE dropped_at IS NOT NULL ORDER BY to_at`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[archived])
	require.NoError(t, err)
	require.Equal(t, []archived{{first, "system:ledger_partitions", 0}, {due, "system:ledger_partitions", int64(before[due])}}, got)
	after := rowsByPartition(t, b)
	for back := 2; back >= 0; back-- {
		name := monthName(month.AddDate(0, -back, 0))
		require.Equal(t, before[name], after[name], "%s, %d months back, is not due: every row stays", name, back)
	}
	require.NotContains(t, after, due, "archived and dropped")
	require.Positive(t, after[due+"_carried"], "its balances carried and its open holds' rows kept")
	var files []string
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		files = append(files, e.Name())
	}
	slices.Sort(files)
	want := []string{first + ".csv.gz", first + ".manifest.json", due + ".csv.gz", due + ".manifest.json"}
	slices.Sort(want)
	require.Equal(t, want, files, "only what was due is written")
	require.Equal(t, sums, stockSums(t, b), "every stock row's ledger sums to what it did")
	run, err := b.reconcile.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, Scope: reconcile.ScopeDeep})
	require.NoError(t, err)
	require.Empty(t, run.Findings.All())

	// The next run finds nothing more due.
	_, err = b.inserter.Insert(ctx, jobs.LedgerPartitionsArgs{}, nil)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 2, completedRuns(c, b))
	}, 30*time.Second, 20*time.Millisecond, "the second run")
	require.Equal(t, 2, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger_archives`))
	require.Equal(t, after, rowsByPartition(t, b))
}

// monthsBack makes the ledger's first partition end at from, and a
// monthly partition for each month from then to this one, as a ledger
// partitioned that long ago would have. It returns the first's name.
func monthsBack(t *testing.T, b *bundle, from, month time.Time) string {
	t.Helper()
	ctx := context.Background()
	var first string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger'::regclass AND pg_get_expr(c.relpartbound, c.oid) LIKE '%MINVALUE%'`).Scan(&first))
	sql := fmt.Sprintf(`ALTER TABLE ledger DETACH PARTITION %[1]s;
		ALTER TABLE ledger ATTACH PARTITION %[1]s FOR VALUES FROM (MINVALUE) TO ('%[2]s');`, first, from.Format(time.RFC3339))
	for m := from; m.Before(month); m = m.AddDate(0, 1, 0) {
		sql += fmt.Sprintf(`CREATE TABLE %[1]s (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
			ALTER TABLE ledger ATTACH PARTITION %[1]s FOR VALUES FROM ('%[2]s') TO ('%[3]s');`,
			monthName(m), m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339))
	}
	_, err := b.pool.Exec(ctx, sql)
	require.NoError(t, err)
	return first
}

func monthName(m time.Time) string { return "ledger_" + m.Format("2006_01") }

func rowsByPartition(t *testing.T, b *bundle) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT c.relname, (SELECT count(*) FROM ledger g WHERE g.tableoid = c.oid)::int
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'ledger'::regclass`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func stockSums(t *testing.T, b *bundle) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT string_agg(x, '; ' ORDER BY x) FROM (
		SELECT format('%s/%s/%s %s %s %s %s', sku, location, pool, sum(delta_total), sum(delta_available), sum(delta_reserved),
		              sum(delta_sold)) AS x FROM ledger GROUP BY sku, location, pool) s`).Scan(&s))
	return s
}

// completedRuns counts the ledger_partitions runs completed (off the test
// goroutine: no require).
func completedRuns(c *assert.CollectT, b *bundle) int {
	var n int
	assert.NoError(c, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'ledger_partitions' AND state = 'completed'`).Scan(&n))
	return n
}
