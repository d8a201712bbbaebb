package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/jobs"
)

// BenchmarkRollbackChain rolls back 10,000 holds (100 batches) with the
// default 100 ms pause between batches and reports batches/s, and the mean
// gap between one batch's end and the next one's start against the pause
// (gap/pause: 1 is the pause and nothing more). Each batch is a job of its
// own, due after the pause; were it left to River's scheduler, which
// promotes scheduled jobs every 5 s, the gap would average about 2.5 s
// (gap/pause near 25). Run it with
//
//	go test -run '^$' -bench RollbackChain -benchtime 1x ./jobs/
func BenchmarkRollbackChain(b *testing.B) {
	const holds, pause = 10_000, 100 * time.Millisecond
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		pool := dbtest.New(b)
		inserter, err := jobs.NewInserter(pool)
		require.NoError(b, err)
		deps := app.NewServices(config.DefaultsWith(func(c *config.Config) { c.RollbackPause = pause }), pool, inserter, quiet)
		deps.Reconcile = nil
		_, err = deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: holds, Actor: "bench"})
		require.NoError(b, err)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= holds; i = next.Add(1) {
					_, _, err := deps.Inventory.Hold(ctx, inventory.HoldRequest{
						Client: "bench", IdempotencyKey: fmt.Sprint(i), TTLSeconds: 3600,
						Items: []inventory.Item{{SKU: "A1", Quantity: 1}},
					})
					if err != nil {
						panic(err)
					}
				}
			}()
		}
		wg.Wait()
		client, err := jobs.NewClient(pool, deps.Workers(), jobs.Config{Workers: 10, Log: quiet, SweepInterval: time.Hour, WatchInterval: time.Hour})
		require.NoError(b, err)
		completed, unsubscribe := client.Subscribe(river.EventKindJobCompleted)
		require.NoError(b, client.Start(ctx))

		b.StartTimer()
		start := time.Now()
		var created rollbacks.Created
		require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			created, err = deps.Rollbacks.CreateTx(ctx, tx, rollbacks.Request{
				Operator: "bench", Reason: "bench", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{SKU: "A1"},
			})
			return err
		}))
		// The last batch marks the request succeeded in its transaction:
		// look after each job that completes.
		var r rollbacks.Rollback
		for r.Status != rollbacks.StatusSucceeded {
			select {
			case <-completed:
			case <-time.After(time.Minute):
				b.Fatalf("rollback #%d still %s: no job completed for a minute", created.RollbackID, r.Status)
			}
			r, err = deps.Rollbacks.Get(ctx, created.RollbackID)
			require.NoError(b, err)
		}
		took := time.Since(start)
		b.StopTimer()
		unsubscribe()

		require.EqualValues(b, holds, r.ReleasedCount)
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.NoError(b, client.Stop(stopCtx))
		cancel()
		var gap time.Duration
		var batches int
		require.NoError(b, pool.QueryRow(ctx, `
			SELECT coalesce(avg(j.attempted_at - prev.finalized_at), '0'), count(*)
			FROM river_job j
			JOIN LATERAL (
				SELECT p.finalized_at FROM river_job p
				WHERE p.kind = 'rollback_batch' AND p.id < j.id ORDER BY p.id DESC LIMIT 1
			) prev ON true
			WHERE j.kind = 'rollback_batch'`).Scan(&gap, &batches))
		b.ReportMetric(float64(r.Batches)/took.Seconds(), "batches/s")
		b.ReportMetric(float64(holds)/took.Seconds(), "holds/s")
		b.ReportMetric(float64(gap.Microseconds())/1000, "gap_ms")
		b.ReportMetric(float64(gap)/float64(pause), "gap/pause")
		b.ReportMetric(0, "ns/op")
	}
}
