package stock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

func adjustMany(ctx context.Context, pool *pgxpool.Pool, b stock.BulkAdjustment) (stock.BulkResult, error) {
	var res stock.BulkResult
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		res, err = stock.AdjustManyTx(ctx, tx, b)
		return err
	})
	return res, err
}

// TestBulkAdjustmentsCreatingTheSameSKUs runs bulk adjustments that all
// create the same new SKUs, lines in random order and with byte orders
// that differ from most collations' ("a" < "B" in en_US, not in C): each
// waits for the others in the global lock order instead of deadlocking,
// and every line is applied once.
func TestBulkAdjustmentsCreatingTheSameSKUs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	skus := make([]string, 40)
	for i := range skus {
		skus[i] = fmt.Sprintf("%c%02d", "aBcD"[i%4], i)
	}
	const workers, rounds = 6, 5
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				lines := make([]stock.BulkLine, len(skus))
				for i, j := range rand.Perm(len(skus)) {
					lines[i] = stock.BulkLine{SKU: skus[j], Delta: 2}
				}
				_, err := adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "t", Lines: lines})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var total, rows, ledger int
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(total), count(*), (SELECT count(*) FROM ledger) FROM stock`).Scan(&total, &rows, &ledger))
	require.Equal(t, len(skus), rows)
	require.Equal(t, workers*rounds*len(skus)*2, total)
	require.Equal(t, workers*rounds*len(skus), ledger)
}

// TestBulkAdjustmentSetTotal sets totals under holds and sales: the change
// goes to available, and a total below what is held and sold is refused.
func TestBulkAdjustmentSetTotal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	ten := int64(10)
	_, err := adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "t", Lines: []stock.BulkLine{{SKU: "A1", SetTotal: &ten}}})
	require.NoError(t, err)
	// Take 4 out of available as held, the way a hold does (lines,
	// reservation and ledger), so the pool has something not available.
	_, err = pool.Exec(ctx, `
		WITH r AS (INSERT INTO reservations (id, client, idempotency_key, request_hash, expires_at)
		           VALUES ('00000000-0000-4000-8000-000000000001', 'shop', 'k', 'h', now() + interval '1 hour') RETURNING id),
		     l AS (INSERT INTO reservation_lines SELECT id, 'A1', 'main', 4 FROM r),
		     s AS (UPDATE stock SET available = available - 4, reserved = reserved + 4, version = version + 1 WHERE sku = 'A1' RETURNING version)
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, reservation_id, actor)
		SELECT 'A1', 'main', 'reserve', 0, -4, 4, 0, s.version, '00000000-0000-4000-8000-000000000001', 'shop' FROM s`)
	require.NoError(t, err)

	three, seven := int64(3), int64(7)
	_, err = adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "t", Lines: []stock.BulkLine{{SKU: "A1", SetTotal: &three}}})
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeInsufficientAvailable, de.Code)
	require.Equal(t, 0, *de.Line)
	require.Contains(t, de.Detail, "cannot go to a total of 3: 4 of its 10 are held or sold")

	res, err := adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "t", Lines: []stock.BulkLine{{SKU: "A1", SetTotal: &seven}}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Changed)
	require.EqualValues(t, 3, res.UnitsOut)
	p := res.SKUs[0].Pools[0]
	require.Equal(t, [4]int64{7, 3, 4, 0}, [4]int64{p.Total, p.Available, p.Reserved, p.Sold})
}

// BenchmarkBulkAdjustment applies 1,000 adjustments of 1,000 SKUs as one
// bulk adjustment and, as the baseline in the same run, as 1,000
// single-line transactions, and reports lines/s of each and the ratio.
func BenchmarkBulkAdjustment(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.New(b)
	const n = 1000
	lines := make([]stock.BulkLine, n)
	for i := range lines {
		lines[i] = stock.BulkLine{SKU: fmt.Sprintf("S%04d", i), Delta: 1}
	}
	_, err := adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "bench", Lines: lines})
	require.NoError(b, err)
	var bulk, single time.Duration
	for b.Loop() {
		start := time.Now()
		_, err := adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "bench", Lines: lines})
		require.NoError(b, err)
		bulk += time.Since(start)
		start = time.Now()
		for _, l := range lines {
			_, err := adjustMany(ctx, pool, stock.BulkAdjustment{Actor: "bench", Lines: []stock.BulkLine{l}})
			require.NoError(b, err)
		}
		single += time.Since(start)
	}
	runs := float64(b.N)
	b.ReportMetric(n*runs/bulk.Seconds(), "bulk_lines/s")
	b.ReportMetric(n*runs/single.Seconds(), "single_lines/s")
	b.ReportMetric(single.Seconds()/bulk.Seconds(), "speedup")
}
