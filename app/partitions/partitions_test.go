package partitions_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/partitions"
)

// TestMakeAheadRemakesWhatIsMissingOnce: a database keeps monthly
// partitions from this month through Ahead months ahead, each covering
// one month (UTC) after the other; with the newest one gone, two runs at
// once make it again once between them, and a run with nothing missing
// makes nothing.
func TestMakeAheadRemakesWhatIsMissingOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	svc := partitions.New(pool, nil)
	want, err := svc.List(ctx)
	require.NoError(t, err)
	month := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	require.Len(t, want, 1+1+partitions.Ahead, "the first partition, this month's and Ahead more")
	require.True(t, want[0].From.IsZero(), "the first covers everything before")
	for i, p := range want[1:] {
		require.Equal(t, month.AddDate(0, i, 0), p.From, p.Name)
		require.Equal(t, month.AddDate(0, i+1, 0), p.To, p.Name)
		require.Equal(t, want[i].To, p.From, "no gap before %s", p.Name)
	}

	newest := want[len(want)-1].Name
	_, err = pool.Exec(ctx, `ALTER TABLE ledger DETACH PARTITION `+newest)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DROP TABLE `+newest)
	require.NoError(t, err)

	var wg sync.WaitGroup
	made := make([]int, 2)
	errs := make([]error, 2)
	for i := range made {
		wg.Add(1)
		go func() {
			defer wg.Done()
			made[i], errs[i] = svc.MakeAhead(ctx)
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, 1, made[0]+made[1], "made once")
	got, err := svc.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)

	n, err := svc.MakeAhead(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// A row of that month goes to its partition.
	_, err = pool.Exec(ctx, `INSERT INTO ledger (at, sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
		VALUES ($1, 'X', 'main', 'adjust', 0, 0, 0, 0, 1, 'test')`, want[len(want)-1].From.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM `+newest))
}
