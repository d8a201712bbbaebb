package metrics

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// StockStatements observes how long the statements that lock stock rows
// take. Such a statement does little work once it has its row, so under
// contention its time is the time spent waiting for the row lock: this is
// the lock-wait metric, measured on every statement rather than sampled.
var StockStatements = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "stockhold_stock_statement_seconds",
	Help:    "Duration of statements on stock rows (sqlc queries named Stock*), by query; under contention, the wait for the row lock.",
	Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
}, []string{"query"})

// Tracer is a pgx tracer that times the statements on stock rows: sqlc
// queries whose name starts with "Stock" (sqlc puts "-- name: X" at the
// head of each). Other statements, River's included, pass through with a
// prefix check. In a pipelined batch, a statement's time is from the
// previous result to its own, which is its share of the round trip.
type Tracer struct{}

type traceKey struct{}

type traceStart struct {
	query string
	at    time.Time
}

type batchTrace struct {
	mu   sync.Mutex
	last time.Time
}

// TraceQueryStart notes the start of a stock statement.
func (Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if q := stockQuery(data.SQL); q != "" {
		return context.WithValue(ctx, traceKey{}, traceStart{query: q, at: time.Now()})
	}
	return ctx
}

// TraceQueryEnd observes a stock statement's duration.
func (Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if s, ok := ctx.Value(traceKey{}).(traceStart); ok {
		StockStatements.WithLabelValues(s.query).Observe(time.Since(s.at).Seconds())
	}
}

// TraceBatchStart notes the start of a batch.
func (Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, &batchTrace{last: time.Now()})
}

// TraceBatchQuery observes a stock statement's share of a batch.
func (Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	b, ok := ctx.Value(traceKey{}).(*batchTrace)
	if !ok {
		return
	}
	b.mu.Lock()
	now := time.Now()
	took := now.Sub(b.last)
	b.last = now
	b.mu.Unlock()
	if q := stockQuery(data.SQL); q != "" {
		StockStatements.WithLabelValues(q).Observe(took.Seconds())
	}
}

// TraceBatchEnd does nothing: each statement was observed as it came back.
func (Tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// stockQuery returns the sqlc name of sql when it is a Stock* query.
func stockQuery(sql string) string {
	const prefix = "-- name: Stock"
	if !strings.HasPrefix(sql, prefix) {
		return ""
	}
	name, _, _ := strings.Cut(sql[len("-- name: "):], " ")
	if len(name) > 64 {
		return ""
	}
	return name
}
