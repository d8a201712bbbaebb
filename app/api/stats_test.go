package api_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/inventory"
)

func TestStats(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.stockIn("A1", 100)

	id := func(r resp) uuid.UUID {
		t.Helper()
		require.Equal(t, 201, r.status, "%s", r.body)
		return uuid.MustParse(r.json(t)["id"].(string))
	}
	id(e.hold("held", line("A1", 1)))
	confirmed := id(e.hold("confirmed", line("A1", 1)))
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+confirmed.String()+"/confirm", e.shop, nil).status)
	released := id(e.hold("released", line("A1", 1)))
	require.Equal(t, 200, e.do("POST", "/v1/reservations/"+released.String()+"/release", e.shop, nil).status)
	expired := id(e.hold("expired", line("A1", 1)))
	stuck := id(e.hold("stuck", line("A1", 1)))
	late := id(e.hold("late", line("A1", 1)))
	old := id(e.hold("old", line("A1", 1)))
	// Replayed and refused requests: counted by the process, not in the database.
	require.Equal(t, "true", e.hold("held", line("A1", 1)).header.Get("Idempotent-Replayed"))
	requireProblem(t, e.hold("too-many", line("A1", 1000)), 409, "out_of_stock")

	_, err := e.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '5 minutes' WHERE id = ANY($1)`,
		[]uuid.UUID{expired, stuck})
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '10 seconds' WHERE id = $1`, late)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE reservations SET created_at = now() - interval '48 hours' WHERE id = $1`, old)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		ended, err := e.inv.ReleaseTx(ctx, tx, []uuid.UUID{expired}, inventory.Outcome{
			Status: inventory.StatusExpired, Kind: "expire", Actor: "test", Reason: "expired", DueOnly: true})
		if err == nil && len(ended) != 1 {
			err = fmt.Errorf("expired %d holds", len(ended))
		}
		return err
	}))

	r := e.do("GET", "/v1/stats", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	t.Logf("GET /v1/stats: %s", r.body)
	st := r.json(t)
	requireKeys(t, st, "as_of", "window", "holds_in_window", "open_holds", "stuck_holds", "stuck_after_seconds", "hold_requests_since_start", "hot_skus")

	asOf, err := time.Parse(time.RFC3339, st["as_of"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), asOf, time.Minute)
	w := st["window"].(map[string]any)
	requireKeys(t, w, "duration", "seconds", "since")
	require.Equal(t, "24h0m0s", w["duration"], "the default window")
	require.EqualValues(t, 86400, w["seconds"])
	since, err := time.Parse(time.RFC3339, w["since"].(string))
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, asOf.Sub(since))

	// In the last 24 h: six holds made (not the old one), by status now.
	h := st["holds_in_window"].(map[string]any)
	requireKeys(t, h, "created", "held", "confirmed", "released", "expired", "confirm_rate", "release_rate", "expiry_rate")
	require.EqualValues(t, 6, h["created"])
	require.EqualValues(t, 3, h["held"], "held, stuck, late")
	require.EqualValues(t, 1, h["confirmed"])
	require.EqualValues(t, 1, h["released"])
	require.EqualValues(t, 1, h["expired"])
	require.InDelta(t, 0.1667, h["confirm_rate"], 1e-9)
	require.InDelta(t, 0.1667, h["release_rate"], 1e-9)
	require.InDelta(t, 0.1667, h["expiry_rate"], 1e-9)

	require.EqualValues(t, 4, st["open_holds"], "held, stuck, late and old: whenever made")
	require.EqualValues(t, 1, st["stuck_holds"], "late is not a minute past its expiry yet")
	require.EqualValues(t, 60, st["stuck_after_seconds"])

	// The process's counter is shared with the tests running beside this
	// one: at least what this test did, and consistent with itself.
	p := st["hold_requests_since_start"].(map[string]any)
	requireKeys(t, p, "since", "attempts", "held", "refused", "replayed", "success_rate", "outcomes")
	started, err := time.Parse(time.RFC3339, p["since"].(string))
	require.NoError(t, err)
	require.False(t, started.After(time.Now()))
	outcomes := p["outcomes"].(map[string]any)
	require.GreaterOrEqual(t, outcomes["held"], 7.0)
	require.GreaterOrEqual(t, outcomes["replayed"], 1.0)
	require.GreaterOrEqual(t, outcomes["out_of_stock"], 1.0)
	var refused float64
	for k, v := range outcomes {
		if k != "held" && k != "replayed" {
			refused += v.(float64)
		}
	}
	require.Equal(t, outcomes["held"], p["held"])
	require.Equal(t, outcomes["replayed"], p["replayed"])
	require.EqualValues(t, int64(refused), p["refused"])
	require.EqualValues(t, int64(p["held"].(float64)+refused), p["attempts"])
	require.InDelta(t, p["held"].(float64)/p["attempts"].(float64), p["success_rate"], 0.0001)

	// A longer window takes in the old hold.
	r = e.do("GET", "/v1/stats?window=72h", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	st = r.json(t)
	require.Equal(t, "72h0m0s", st["window"].(map[string]any)["duration"])
	h = st["holds_in_window"].(map[string]any)
	require.EqualValues(t, 7, h["created"])
	require.EqualValues(t, 4, h["held"])
	require.InDelta(t, math.Round(1.0/7*1e4)/1e4, h["confirm_rate"], 1e-9)
}

func TestStatsWithoutHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	r := e.do("GET", "/v1/stats?window=1h", e.ops, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	st := r.json(t)
	h := st["holds_in_window"].(map[string]any)
	require.EqualValues(t, 0, h["created"])
	for _, k := range []string{"confirm_rate", "release_rate", "expiry_rate"} {
		v, present := h[k]
		require.True(t, present, k)
		require.Nil(t, v, "%s: no holds, no rate", k)
	}
	require.EqualValues(t, 0, st["open_holds"])
	require.EqualValues(t, 0, st["stuck_holds"])
	require.Equal(t, "1h0m0s", st["window"].(map[string]any)["duration"])
}

func TestStatsBadWindow(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	// Not a duration: 400; a duration out of range: 422.
	for _, w := range []string{"abc", "24", "1h%20"} {
		p := requireProblem(t, e.do("GET", "/v1/stats?window="+w, e.ops, nil), 400, "invalid_request")
		require.Contains(t, p["detail"], "window", w)
	}
	for _, w := range []string{"0s", "-1h", "500ms", "721h"} {
		p := requireProblem(t, e.do("GET", "/v1/stats?window="+w, e.ops, nil), 422, "invalid_request")
		require.Contains(t, p["detail"], "window", w)
	}
	require.Equal(t, 200, e.do("GET", "/v1/stats?window=720h", e.ops, nil).status, "the longest window")
	require.Equal(t, 200, e.do("GET", "/v1/stats?window=1s", e.ops, nil).status, "the shortest window")
}

func TestStatsNeedsOps(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	requireProblem(t, e.do("GET", "/v1/stats", "", nil), 401, "unauthorized")
	requireProblem(t, e.do("GET", "/v1/stats", e.shop, nil), 403, "forbidden")
}

// requireKeys pins the exact members of a JSON object, so a change to the
// shape of /v1/stats is a deliberate one (OpenAPI and the README follow it).
func requireKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	got := slices.Sorted(maps.Keys(m))
	slices.Sort(keys)
	require.Equal(t, keys, got)
}
