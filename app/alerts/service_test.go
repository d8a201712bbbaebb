package alerts_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/jobs"
)

// errInvalid matches any bad-input error (see domain.Error.Is).
var errInvalid = &domain.Error{Code: domain.CodeInvalid}

func setup(t *testing.T, deliver bool) (*alerts.Service, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return alerts.New(pool, inserter, deliver), pool
}

// TestAlertLifecycle: one open alert per kind and subject, repeats counted
// (and its level raised, never lowered); acknowledged, it stays as it is
// and a new occurrence opens a new alert; resolved, it leaves the open list.
func TestAlertLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, pool := setup(t, false)
	raise := func(level string, details map[string]any) alerts.Alert {
		t.Helper()
		a, err := svc.Raise(ctx, alerts.Raise{Level: level, Kind: "stock_low", Subject: "sku:A1/main", SKU: "A1", Pool: "main", Details: details, Action: "restock"})
		require.NoError(t, err)
		return a
	}
	first := raise(alerts.Warning, nil)
	require.Equal(t, alerts.StatusOpen, first.Status)
	require.EqualValues(t, 1, first.Occurrences)
	require.JSONEq(t, `{}`, string(first.Details))
	require.Equal(t, "A1", *first.SKU)
	again := raise(alerts.Critical, map[string]any{"available": 2})
	require.Equal(t, first.ID, again.ID)
	require.EqualValues(t, 2, again.Occurrences)
	require.Equal(t, alerts.Critical, again.Level)
	require.JSONEq(t, `{"available": 2}`, string(again.Details), "the latest details")
	lower := raise(alerts.Warning, nil)
	require.Equal(t, alerts.Critical, lower.Level, "a repeat never lowers the level")
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(pool), alerts.DeliverAlertArgs{}, nil) // no webhook: nothing to deliver

	_, err := svc.Ack(ctx, first.ID, "")
	require.ErrorIs(t, err, errInvalid)
	acked, err := svc.Ack(ctx, first.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, alerts.StatusAcked, acked.Status)
	require.Equal(t, "alice", *acked.AckedBy)
	twice, err := svc.Ack(ctx, first.ID, "bob")
	require.NoError(t, err)
	require.Equal(t, "alice", *twice.AckedBy, "acknowledging again answers it as it is")
	_, err = svc.Ack(ctx, first.ID+100, "bob")
	require.ErrorIs(t, err, domain.ErrNotFound)

	next := raise(alerts.Warning, nil)
	require.NotEqual(t, first.ID, next.ID, "after an acknowledgement a new occurrence is a new alert")
	open, err := svc.List(ctx, alerts.StatusOpen, 10)
	require.NoError(t, err)
	require.Len(t, open, 1)
	require.Equal(t, next.ID, open[0].ID)

	resolved, err := svc.Resolve(ctx, "stock_low", "sku:A1/main", "restocked")
	require.NoError(t, err)
	require.True(t, resolved)
	resolved, err = svc.Resolve(ctx, "stock_low", "sku:A1/main", "again")
	require.NoError(t, err)
	require.False(t, resolved, "nothing left to resolve")
	open, err = svc.List(ctx, alerts.StatusOpen, 10)
	require.NoError(t, err)
	require.Empty(t, open)
	all, err := svc.List(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, next.ID, all[0].ID, "newest first")
	require.Equal(t, alerts.StatusResolved, all[0].Status)
	require.Equal(t, "restocked", *all[0].Resolution, "a resolved alert says how")
	require.NotNil(t, all[0].ResolvedAt)
	require.Equal(t, alerts.StatusResolved, all[1].Status, "the acknowledged one is resolved with it")
	require.Equal(t, "restocked", *all[1].Resolution)

	for _, c := range []struct {
		status string
		limit  int
	}{{"closed", 10}, {"", 0}, {"", alerts.MaxList + 1}} {
		_, err := svc.List(ctx, c.status, c.limit)
		require.ErrorIs(t, err, errInvalid, "%+v", c)
	}
}

// TestDeliver: a new alert, with a webhook configured, is queued for
// delivery in its transaction; delivery POSTs it and records it delivered
// on a 2xx, and is an error (so the job retries) on anything else.
func TestDeliver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, pool := setup(t, true)
	var (
		mu     sync.Mutex
		bodies []alerts.Webhook
		status = http.StatusNoContent
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var got alerts.Webhook
		mu.Lock()
		defer mu.Unlock()
		if json.Unmarshal(body, &got) == nil && r.Header.Get("Content-Type") == "application/json" {
			bodies = append(bodies, got)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(hook.Close)

	// Raised in a transaction that rolls back: no alert, no delivery.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := svc.RaiseTx(ctx, tx, alerts.Raise{Level: alerts.Critical, Kind: "k", Subject: "s", Action: "a"})
		require.NoError(t, err)
		return context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM alerts`))
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(pool), alerts.DeliverAlertArgs{}, nil)

	a, err := svc.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "k", Subject: "s", Details: map[string]any{"n": 1}, Action: "a"})
	require.NoError(t, err)
	deliver := rivertest.RequireInserted(ctx, t, riverpgxv5.New(pool), alerts.DeliverAlertArgs{}, nil)
	require.Equal(t, a.ID, deliver.Args.AlertID)

	mu.Lock()
	status = http.StatusBadGateway
	mu.Unlock()
	err = svc.Deliver(ctx, hook.Client(), hook.URL, a.ID)
	require.ErrorContains(t, err, "502")
	got, err := svc.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Nil(t, got.DeliveredAt, "not delivered: the job retries")

	mu.Lock()
	status = http.StatusNoContent
	mu.Unlock()
	require.NoError(t, svc.Deliver(ctx, hook.Client(), hook.URL, a.ID))
	got, err = svc.Get(ctx, a.ID)
	require.NoError(t, err)
	require.NotNil(t, got.DeliveredAt)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2)
	require.Equal(t, "stockhold", bodies[1].Service)
	require.Equal(t, a.ID, bodies[1].Alert.ID)
	require.Equal(t, "k", bodies[1].Alert.Kind)
	require.JSONEq(t, `{"n": 1}`, string(bodies[1].Alert.Details))

	require.ErrorIs(t, svc.Deliver(ctx, hook.Client(), hook.URL, a.ID+100), domain.ErrNotFound)
}

// TestWatchDiscarded turns discarded jobs into one critical alert per job
// kind, each job seen once, however often the watch runs.
func TestWatchDiscarded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, pool := setup(t, false)
	discard := func(kind string) int64 {
		t.Helper()
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `
			INSERT INTO river_job (kind, args, state, attempt, max_attempts, attempted_at, finalized_at, queue, priority, errors)
			VALUES ($1, '{"n": 1}', 'discarded', 3, 3, now(), now(), 'default', 1,
				ARRAY['{"at": "2026-01-01T00:00:00Z", "attempt": 3, "error": "warehouse down"}'::jsonb])
			RETURNING id`, kind).Scan(&id))
		return id
	}
	a1, a2 := discard("kind_a"), discard("kind_a")
	b1 := discard("kind_b")
	_, err := pool.Exec(ctx, `INSERT INTO river_job (kind, args, state, max_attempts, queue, priority) VALUES ('kind_c', '{}', 'available', 3, 'default', 1)`)
	require.NoError(t, err)

	n, err := svc.WatchDiscarded(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	open, err := svc.List(ctx, alerts.StatusOpen, 10)
	require.NoError(t, err)
	require.Len(t, open, 2, "one alert per kind")
	bySubject := map[string]alerts.Alert{}
	for _, a := range open {
		require.Equal(t, alerts.Critical, a.Level)
		require.Equal(t, "job_discarded", a.Kind)
		bySubject[a.Subject] = a
	}
	var details struct {
		JobIDs    []int64         `json:"job_ids"`
		LastJobID int64           `json:"last_job_id"`
		LastError json.RawMessage `json:"last_error"`
	}
	require.NoError(t, json.Unmarshal(bySubject["job:kind_a"].Details, &details))
	require.ElementsMatch(t, []int64{a1, a2}, details.JobIDs)
	require.Contains(t, string(details.LastError), "warehouse down")
	require.NoError(t, json.Unmarshal(bySubject["job:kind_b"].Details, &details))
	require.Equal(t, []int64{b1}, details.JobIDs)

	n, err = svc.WatchDiscarded(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a job is seen once")
	discard("kind_a")
	n, err = svc.WatchDiscarded(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	open, err = svc.List(ctx, alerts.StatusOpen, 10)
	require.NoError(t, err)
	require.Len(t, open, 2)
	for _, a := range open {
		if a.Subject == "job:kind_a" {
			require.EqualValues(t, 2, a.Occurrences, "a repeat of the open alert")
		}
	}
}
