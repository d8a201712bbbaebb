package api_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/metrics"
)

// answer is a ResponseWriter that keeps the status and the body.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header         { return a.header }
func (a *answer) WriteHeader(status int)      { a.status = status }
func (a *answer) Write(p []byte) (int, error) { return a.body.Write(p) }

// refusedInMemory is how many holds this process refused from memory.
func refusedInMemory(t testing.TB) float64 {
	var m dto.Metric
	require.NoError(t, metrics.SoldOutInMemory.Write(&m))
	return m.GetCounter().GetValue()
}

// BenchmarkSoldOutRefusal measures the server's own work for a hold of a
// SKU known sold out, refused from memory: the handler with
// every middleware, as net/http calls it, without the network. It reports
// the share of the holds memory answered (the others went to a batch).
//
//	go test ./app/api/ -run '^$' -bench SoldOutRefusal -benchmem
func BenchmarkSoldOutRefusal(b *testing.B) {
	e := setup(b, nil)
	e.stockIn("SOLDOUT", 1)
	require.Equal(b, http.StatusCreated, e.hold("first", line("SOLDOUT", 1)).status)
	body := []byte(`{"items":[{"sku":"SOLDOUT","quantity":1}]}`)
	ask := func(key string) *answer {
		req, err := http.NewRequest("POST", "/v1/reservations", bytes.NewReader(body))
		require.NoError(b, err)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Authorization", "Bearer "+e.shop)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		a := &answer{header: http.Header{}}
		e.handler.ServeHTTP(a, req)
		return a
	}
	n := 0
	require.Eventually(b, func() bool {
		before := refusedInMemory(b)
		n++
		a := ask("warm-" + strconv.Itoa(n))
		require.Equal(b, http.StatusConflict, a.status, "%s", a.body.String())
		return refusedInMemory(b) > before
	}, 10*time.Second, time.Millisecond)

	before := refusedInMemory(b)
	b.ReportAllocs()
	for b.Loop() {
		n++
		if a := ask("k-" + strconv.Itoa(n)); a.status != http.StatusConflict {
			b.Fatalf("HTTP %d: %s", a.status, a.body.String())
		}
	}
	b.ReportMetric((refusedInMemory(b)-before)/float64(b.N), "in-memory/op")
}
