package metrics

import (
	"cmp"
	"context"
	"slices"
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

// Queries observes every named statement: stockhold's sqlc queries and
// River's, by name.
var Queries = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "stockhold_query_seconds",
	Help:    "Duration of every named statement (sqlc's \"-- name: X\": stockhold's queries and River's), by query; in a pipelined batch, its share of the round trip.",
	Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
}, []string{"query"})

// Tracer is a pgx tracer that times every named statement (sqlc puts
// "-- name: X" at the head of each query, River's included) into Queries,
// and those named Stock* into StockStatements too. Other statements
// (transaction control) pass through with a prefix check. In a pipelined
// batch, a statement's time is from the previous result to its own, which
// is its share of the round trip.
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

// TraceQueryStart notes the start of a named statement.
func (Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if q := queryName(data.SQL); q != "" {
		return context.WithValue(ctx, traceKey{}, traceStart{query: q, at: time.Now()})
	}
	return ctx
}

// TraceQueryEnd observes a named statement's duration.
func (Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if s, ok := ctx.Value(traceKey{}).(traceStart); ok {
		observe(s.query, time.Since(s.at))
	}
}

// TraceBatchStart notes the start of a batch.
func (Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, &batchTrace{last: time.Now()})
}

// TraceBatchQuery observes a named statement's share of a batch.
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
	if q := queryName(data.SQL); q != "" {
		observe(q, took)
	}
}

// TraceBatchEnd does nothing: each statement was observed as it came back.
func (Tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func observe(query string, took time.Duration) {
	secs := took.Seconds()
	Queries.WithLabelValues(query).Observe(secs)
	if strings.HasPrefix(query, "Stock") {
		StockStatements.WithLabelValues(query).Observe(secs)
	}
	statements.add(query, took)
}

// queryName returns the sqlc name of sql ("-- name: X :kind ..."), or ""
// for a statement that has none.
func queryName(sql string) string {
	const prefix = "-- name: "
	if !strings.HasPrefix(sql, prefix) {
		return ""
	}
	rest := sql[len(prefix):]
	end := strings.IndexAny(rest, " \n\t")
	if end <= 0 || end > 64 {
		return ""
	}
	return rest[:end]
}

// Statement is what this process measured of one named statement since it
// started.
type Statement struct {
	Query string
	Calls int64
	Total time.Duration
	Max   time.Duration
}

// Mean is the statement's mean duration.
func (s Statement) Mean() time.Duration {
	if s.Calls == 0 {
		return 0
	}
	return s.Total / time.Duration(s.Calls)
}

type statementStats struct {
	mu sync.Mutex
	by map[string]*Statement
}

var statements = statementStats{by: map[string]*Statement{}}

func (s *statementStats) add(query string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.by[query]
	if st == nil {
		st = &Statement{Query: query}
		s.by[query] = st
	}
	st.Calls++
	st.Total += took
	st.Max = max(st.Max, took)
}

// SlowestStatements returns up to n named statements this process timed,
// slowest mean first (ties by name).
func SlowestStatements(n int) []Statement {
	statements.mu.Lock()
	out := make([]Statement, 0, len(statements.by))
	for _, st := range statements.by {
		out = append(out, *st)
	}
	statements.mu.Unlock()
	slices.SortFunc(out, func(a, b Statement) int {
		if c := cmp.Compare(b.Mean(), a.Mean()); c != 0 {
			return c
		}
		return cmp.Compare(a.Query, b.Query)
	})
	return out[:min(len(out), n)]
}
