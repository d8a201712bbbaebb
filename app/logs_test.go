package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/logging"
)

// syncBuffer is a log sink written by many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines so far.
func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if l != "" && json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestLogsCarryRequestHoldSKUAndJob checks the structured logs: JSON lines,
// a request id on every request line (the caller's, echoed back, or a new
// one), the hold and SKU a request concerns, and the job id and kind on
// what a job logs.
func TestLogsCarryRequestHoldSKUAndJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.New(t)
	cfg, err := config.Load(func(k string) string { return map[string]string{"DATABASE_URL": "postgres://unused"}[k] })
	require.NoError(t, err)
	var sink syncBuffer
	log, err := logging.New("json", "debug", &sink)
	require.NoError(t, err)
	a, err := app.New(cfg, pool, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
	})
	base := "http://" + ln.Addr().String()
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)

	post := func(path, requestID, body string) (*http.Response, map[string]any) {
		req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+ops)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", requestID+"-key")
		if requestID != "" {
			req.Header.Set("X-Request-Id", requestID)
		}
		res, err := (&http.Client{Transport: apitest.Transport(t, nil)}).Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res, out
	}
	res, _ := post("/v1/skus/A1/adjustments", "restock-1", `{"delta": 10, "reason": "restock"}`)
	require.Equal(t, "restock-1", res.Header.Get("X-Request-Id"))
	res, hold := post("/v1/reservations", "hold-1", `{"order_ref": "o-1", "items": [{"sku": "A1", "quantity": 1}]}`)
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Equal(t, "hold-1", res.Header.Get("X-Request-Id"))
	res, _ = post("/v1/reservations", "hold-2", `{"items": [{"sku": "A1", "quantity": 100}]}`)
	require.Equal(t, http.StatusConflict, res.StatusCode)
	res, _ = post("/v1/reconciliations", "bad id with spaces", "")
	generated := res.Header.Get("X-Request-Id")
	require.Len(t, generated, 24, "an unusable caller id is replaced")

	request := func(id string) map[string]any {
		for _, l := range sink.lines() {
			if l["msg"] == "request" && l["request_id"] == id {
				return l
			}
		}
		return nil
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		line := request("hold-1")
		if assert.NotNil(c, line) {
			// A request that touches a hold: at info, with the hold, its
			// order reference and its Idempotency-Key.
			assert.Equal(c, "INFO", line["level"])
			assert.Equal(c, hold["id"], line["hold_id"])
			assert.Equal(c, "o-1", line["order_ref"])
			assert.Equal(c, "hold-1-key", line["idempotency_key"])
			assert.Equal(c, "A1", line["sku"])
			assert.Equal(c, "/v1/reservations", line["route"])
		}
		// A refusal is told on its request's line (at debug), not on a
		// line of its own.
		refused := request("hold-2")
		if assert.NotNil(c, refused) {
			assert.Equal(c, "out_of_stock", refused["code"])
			assert.Equal(c, "A1", refused["refused_sku"])
			assert.EqualValues(c, 409, refused["status"])
		}
		assert.Equal(c, "A1", request("restock-1")["sku"])
		assert.Equal(c, "DEBUG", request("restock-1")["level"], "a request that touches no hold stays at debug")
		assert.NotNil(c, request(generated))
	}, 5*time.Second, 20*time.Millisecond)

	for _, l := range sink.lines() {
		if l["request_id"] == "hold-2" {
			require.Equal(t, "request", l["msg"], "an ordinary refusal gets no line of its own: %v", l)
		}
	}

	// The reconciliation job logs its result with its job's id and kind.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, l := range sink.lines() {
			// The adjustment's own reconciliation ran in its request;
			// the job's is the one with a job.
			if l["msg"] == "reconciliation finished" && l["job_kind"] != nil {
				assert.Equal(c, "reconcile", l["job_kind"])
				assert.NotNil(c, l["job_id"])
				return
			}
		}
		assert.Fail(c, "no reconciliation line yet")
	}, 20*time.Second, 50*time.Millisecond)
}
