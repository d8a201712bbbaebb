package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkHoldAsked is what each hold request pays to be counted in the
// hot SKUs (two goroutines, 1,000 SKUs).
func BenchmarkHoldAsked(b *testing.B) {
	h := newHot(time.Now)
	skus := make([]string, 1000)
	for i := range skus {
		skus[i] = fmt.Sprint("S", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h.add(skus[i%len(skus)])
			i++
		}
	})
}

// BenchmarkTracerBatchQuery is what each statement of a batch pays to be
// timed (stockhold_query_seconds and the console's slowest statements).
func BenchmarkTracerBatchQuery(b *testing.B) {
	ctx := Tracer{}.TraceBatchStart(context.Background(), nil, pgx.TraceBatchStartData{})
	d := pgx.TraceBatchQueryData{SQL: "-- name: ReservationsInsertMany :batchmany\nINSERT INTO reservations"}
	for b.Loop() {
		Tracer{}.TraceBatchQuery(ctx, nil, d)
	}
}
