package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/metrics"
)

// TestPanicIsLoggedAndCounted: a handler that panics is answered 500
// problem+json, and, as any request, gets its request log line and its
// latency observation with status 500.
func TestPanicIsLoggedAndCounted(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e := New(Deps{Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const route = "/test/panic"
	e.GET(route, func(echo.Context) error { panic("boom") })
	observed := func() uint64 {
		var m dto.Metric
		h := metrics.HTTPDuration.WithLabelValues(http.MethodGet, route, "500").(prometheus.Metric)
		require.NoError(t, h.Write(&m))
		return m.GetHistogram().GetSampleCount()
	}
	before := observed()

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, route, nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get(echo.HeaderContentType))
	require.Contains(t, rec.Body.String(), `"code":"internal_error"`)
	require.Equal(t, before+1, observed(), "the panicking request's latency is observed as a 500")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	var request, panicked map[string]any
	for _, l := range lines {
		switch l["msg"] {
		case "request":
			request = l
		case "handler panicked":
			panicked = l
		}
	}
	require.NotNil(t, request, "the request is logged: %s", logs.String())
	require.EqualValues(t, 500, request["status"])
	require.Equal(t, route, request["route"])
	require.Equal(t, "ERROR", request["level"])
	require.NotNil(t, panicked, "the panic is logged: %s", logs.String())
	require.Equal(t, "boom", panicked["panic"])
	require.Contains(t, panicked["stack"], "recover_test.go")
	require.Equal(t, request["request_id"], panicked["request_id"], "both lines carry the request's id")
}
