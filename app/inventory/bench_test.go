package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
)

// BenchmarkHotSKU measures single-unit holds on one hot SKU from 64
// concurrent clients, on the plain path (one transaction per hold) and
// through the per-row combiner, in the same run on the same database, and
// reports both rates and their ratio. Timings on a shared machine are noisy;
// the ratio is the number to compare. Run it with `make bench`.
func BenchmarkHotSKU(b *testing.B) {
	const clients = 64
	const holdsPerRound = 2000
	ctx := context.Background()
	pool := dbtest.NewWithConfig(b, func(c *pgxpool.Config) { c.MaxConns = 32 })
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(b, err)
	services := map[string]*inventory.Service{
		"plain":     inventory.New(pool, inserter, quietLog, inventory.Config{}),
		"coalesced": inventory.New(pool, inserter, quietLog, inventory.Config{Coalesce: true, CoalesceWindow: time.Millisecond, CoalesceMaxBatch: 64}),
	}
	_, err = services["plain"].Adjust(ctx, inventory.Adjustment{SKU: "HOT", Delta: inventory.MaxAdjustment, Actor: "bench"})
	require.NoError(b, err)

	elapsed := map[string]time.Duration{}
	var round atomic.Int64
	run := func(name string) {
		svc := services[name]
		r := round.Add(1)
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > holdsPerRound {
						return
					}
					_, _, err := svc.Hold(ctx, inventory.HoldRequest{
						Client: "bench", IdempotencyKey: fmt.Sprintf("%s-%d-%d", name, r, i),
						Items: []inventory.Item{{SKU: "HOT", Quantity: 1}},
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed[name] += time.Since(start)
	}
	b.ResetTimer()
	for b.Loop() {
		run("plain")
		run("coalesced")
	}
	b.StopTimer()
	holds := float64(b.N * holdsPerRound)
	plain := holds / elapsed["plain"].Seconds()
	coalesced := holds / elapsed["coalesced"].Seconds()
	b.ReportMetric(plain, "plain_holds/s")
	b.ReportMetric(coalesced, "coalesced_holds/s")
	b.ReportMetric(coalesced/plain, "speedup")
	b.ReportMetric(0, "ns/op")
}
