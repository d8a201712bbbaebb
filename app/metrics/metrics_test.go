package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// The counters are per process, so this package's tests are the only ones
// that move them in this test binary, and they run one after the other.

// scrape reads /metrics into a map from a series ("name{k="v",...}", labels
// sorted) to its value; a histogram gives its _count and _sum.
func scrape(t testing.TB, base string) map[string]float64 {
	t.Helper()
	got := scrapeFor(t, t, base)
	require.NotNil(t, got)
	return got
}

// scrapeFor is scrape reporting failures to c, which may be an Eventually
// condition's CollectT (t checks the exchange against the OpenAPI
// document); it answers nil on a failure.
func scrapeFor(c assert.TestingT, t testing.TB, base string) map[string]float64 {
	res, err := (&http.Client{Transport: apitest.Transport(t, nil)}).Get(base + "/metrics")
	if err != nil {
		assert.Fail(c, "scrape", err.Error())
		return nil
	}
	defer res.Body.Close()
	if !assert.Equal(c, http.StatusOK, res.StatusCode) {
		return nil
	}
	return parse(c, res.Body)
}

// parse answers nil on a failure, reported to t.
func parse(t assert.TestingT, r io.Reader) map[string]float64 {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		assert.Fail(t, "parse the metrics", err.Error())
		return nil
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[strings.Replace(key, name, name+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
				out[strings.Replace(key, name, name+"_sum", 1)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

type service struct {
	t    *testing.T
	base string
	app  *app.App
	shop string
}

func (s *service) post(token, path, key, body string) (int, map[string]any) {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.base+path, strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := (&http.Client{Transport: apitest.Transport(s.t, nil)}).Do(req)
	require.NoError(s.t, err)
	defer res.Body.Close()
	var out map[string]any
	require.NoError(s.t, json.NewDecoder(res.Body).Decode(&out))
	return res.StatusCode, out
}

func (s *service) hold(key string, qty, ttl int) (int, string) {
	s.t.Helper()
	status, body := s.post(s.shop, "/v1/reservations", key,
		fmt.Sprintf(`{"order_ref": %q, "items": [{"sku": "A1", "quantity": %d}], "ttl_seconds": %d}`, key, qty, ttl))
	id, _ := body["id"].(string)
	return status, id
}

// TestMetricsCountWhatHappened runs a scripted sequence against the whole
// service (HTTP API, River workers and all) and checks that /metrics
// reports exactly it: holds made and refused, confirms and releases by
// result and reason, expirations by the expiry loop, and a job that fails every
// attempt (two retries, one discard), plus the gauges read from the
// database.
func TestMetricsCountWhatHappened(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.NewWithConfig(t, app.Instrument)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{
			"DATABASE_URL": "postgres://unused", "STOCKHOLD_RETRY_BASE": "10ms", "STOCKHOLD_WATCH_INTERVAL": "100ms",
			"STOCKHOLD_COALESCE": "false",
		}[k]
	})
	require.NoError(t, err)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
		dbtest.RequireInvariants(t, pool)
	})
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err := auth.Create(ctx, pool, "shop-a", auth.RoleShop)
	require.NoError(t, err)
	s := &service{t: t, base: "http://" + ln.Addr().String(), app: a, shop: shop}
	before := scrape(t, s.base)

	status, _ := s.post(ops, "/v1/skus/A1/adjustments", "restock", `{"delta": 100, "reason": "restock"}`)
	require.Equal(t, http.StatusOK, status)

	// Six holds: two to confirm, one to release, two to expire, one left
	// open; one refused for want of stock.
	ids := make([]string, 6)
	for i := range ids {
		ttl := 900
		if i == 3 || i == 4 {
			ttl = 1
		}
		status, ids[i] = s.hold(fmt.Sprintf("o-%d", i), 2, ttl)
		require.Equal(t, http.StatusCreated, status)
	}
	status, _ = s.hold("too-many", 1000, 900)
	require.Equal(t, http.StatusConflict, status)

	for _, id := range ids[:2] {
		status, _ = s.post(shop, "/v1/reservations/"+id+"/confirm", "", "")
		require.Equal(t, http.StatusOK, status)
	}
	status, _ = s.post(shop, "/v1/reservations/"+ids[2]+"/release", "", `{"reason": "cancelled"}`)
	require.Equal(t, http.StatusOK, status)
	status, _ = s.post(shop, "/v1/reservations/"+ids[2]+"/confirm", "", "") // too late
	require.Equal(t, http.StatusConflict, status)

	// A job that fails every attempt: a batch of a rollback that does not
	// exist.
	_, err = a.Inserter.Insert(ctx, rollbacks.RollbackBatchArgs{RollbackID: 999_999}, nil)
	require.NoError(t, err)

	want := map[string]float64{
		`stockhold_holds_total{outcome="held"}`:                                                              6,
		`stockhold_holds_total{outcome="out_of_stock"}`:                                                      1,
		`stockhold_transitions_total{action="confirm",outcome="ok"}`:                                         2,
		`stockhold_transitions_total{action="confirm",outcome="reservation_not_held"}`:                       1,
		`stockhold_transitions_total{action="release",outcome="ok"}`:                                         1,
		`stockhold_releases_total{reason="cancel",status="released"}`:                                        1,
		`stockhold_releases_total{reason="expiry",status="expired"}`:                                         2,
		`stockhold_river_jobs_finished_total{kind="rollback_batch",state="retried"}`:                         2,
		`stockhold_river_jobs_finished_total{kind="rollback_batch",state="discarded"}`:                       1,
		`stockhold_river_job_run_seconds_count{kind="rollback_batch"}`:                                       3,
		`stockhold_http_request_duration_seconds_count{method="POST",route="/v1/reservations",status="201"}`: 6,
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := scrapeFor(c, t, s.base)
		for series, n := range want {
			assert.InDelta(c, n, got[series]-before[series], 1e-9, series)
		}
	}, 60*time.Second, 200*time.Millisecond)

	// Nothing else was released or expired, and nothing else failed.
	got := scrape(t, s.base)
	for series, n := range got {
		if _, ok := want[series]; ok || n == before[series] {
			continue
		}
		for _, prefix := range []string{"stockhold_releases_total", "stockhold_transitions_total", "stockhold_holds_total"} {
			assert.False(t, strings.HasPrefix(series, prefix+"{"), "unexpected %s = %v", series, n-before[series])
		}
		if strings.HasPrefix(series, "stockhold_river_jobs_finished_total{") {
			assert.NotContains(t, series, `state="discarded"`, "unexpected %s", series)
		}
	}

	// The gauges read from the database, once refreshed: one hold still
	// open, none stuck, and the discarded job's critical alert.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, a.DBMetrics.Refresh(ctx))
		got := scrapeFor(c, t, s.base)
		assert.InDelta(c, 1.0, got[`stockhold_holds_open`], 1e-9)
		assert.InDelta(c, 0.0, got[`stockhold_holds_stuck`], 1e-9)
		assert.InDelta(c, 1.0, got[`stockhold_alerts_open{kind="job_discarded",level="critical"}`], 1e-9)
	}, 20*time.Second, 100*time.Millisecond)
	got = scrape(t, s.base)
	assert.InDelta(t, float64(pool.Stat().MaxConns()), got[`stockhold_pgx_pool_max_conns`], 1e-9)
	assert.Positive(t, got[`stockhold_pgx_pool_acquires_total`])
	assert.Positive(t, got[`stockhold_stock_statement_seconds_count{query="StockLockMany"}`], "the hold batches' row locks are timed")
	stock := 0.0
	for series, n := range got {
		if strings.HasPrefix(series, "stockhold_stock_statement_seconds_count{") {
			stock += n
		}
	}
	assert.Positive(t, stock, "statements on stock rows are timed")
	assert.Positive(t, got[`stockhold_query_seconds_count{query="ReservationsInsertMany"}`], "every named statement is timed")
	assert.Positive(t, got[`stockhold_query_seconds_count{query="LedgerAppend"}`])
	assert.GreaterOrEqual(t, got[`stockhold_batch_seconds_count{kind="hold"}`]-before[`stockhold_batch_seconds_count{kind="hold"}`], 7.0,
		"each hold went in a batch of its own (STOCKHOLD_COALESCE=false)")
	assert.GreaterOrEqual(t, got[`stockhold_batch_seconds_count{kind="change"}`]-before[`stockhold_batch_seconds_count{kind="change"}`], 4.0)

	// The seven hold requests for A1, each in exactly one series of
	// stockhold_sku_holds_total (A1's once it is in the top, _other
	// before), and A1 at the top of the last minute's hot SKUs.
	asked := 0.0
	for series, n := range got {
		if strings.HasPrefix(series, "stockhold_sku_holds_total{") {
			asked += n - before[series]
		}
	}
	assert.InDelta(t, 7.0, asked, 1e-9)
	hot := metrics.HotSKUs()
	if assert.NotEmpty(t, hot) {
		assert.Equal(t, "A1", hot[0].SKU)
		assert.GreaterOrEqual(t, hot[0].Holds, int64(7))
	}
	slowest := metrics.SlowestStatements(1000)
	assert.True(t, slices.ContainsFunc(slowest, func(s metrics.Statement) bool { return s.Query == "StockLockMany" && s.Calls > 0 && s.Max >= s.Mean() }))
}

// TestDatabaseGaugesAreNotReadPerScrape checks that a scrape serves the
// last snapshot and never queries the database itself: before the first
// refresh there is no database gauge, and a change in the database shows
// only after the next refresh, however often /metrics is scraped.
func TestDatabaseGaugesAreNotReadPerScrape(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	d := metrics.NewDatabase(pool, time.Minute)
	gather := func() map[string]float64 {
		var b strings.Builder
		families, err := prometheus.DefaultGatherer.Gather()
		require.NoError(t, err)
		for _, f := range families {
			_, err := expfmt.MetricFamilyToText(&b, f)
			require.NoError(t, err)
		}
		return parse(t, strings.NewReader(b.String()))
	}
	const series = `stockhold_alerts_open{kind="test_alert",level="warning"}`
	require.NotContains(t, gather(), "stockhold_holds_open", "no gauge before the first refresh")
	require.NoError(t, d.Refresh(ctx))
	holdsOpen, ok := gather()["stockhold_holds_open"]
	require.True(t, ok, "the gauge exists after a refresh")
	require.Zero(t, holdsOpen)
	require.NotContains(t, gather(), series)

	_, err := alerts.New(pool, nil, false).Raise(ctx, alerts.Raise{Level: alerts.Warning, Kind: "test_alert", Subject: "x", Action: "none"})
	require.NoError(t, err)
	for range 3 {
		require.NotContains(t, gather(), series, "a scrape does not read the database")
	}
	require.NoError(t, d.Refresh(ctx))
	require.InDelta(t, 1.0, gather()[series], 1e-9)
}
