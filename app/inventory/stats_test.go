package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
)

func TestNewHoldRequests(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))

	h := holdstats.NewHoldRequests(map[string]int64{
		"held": 6, "replayed": 5, "out_of_stock": 1, "sku_paused": 1, "invalid_request": 1,
	}, since)
	require.EqualValues(t, 6, h.Held)
	require.EqualValues(t, 3, h.Refused)
	require.EqualValues(t, 5, h.Replayed, "replays are not attempts")
	require.EqualValues(t, 9, h.Attempts)
	require.NotNil(t, h.SuccessRate)
	require.InDelta(t, 0.6667, *h.SuccessRate, 1e-9)
	require.Equal(t, time.UTC, h.Since.Location())

	h = holdstats.NewHoldRequests(nil, since)
	require.Nil(t, h.SuccessRate, "no requests, no rate")
	require.NotNil(t, h.Outcomes, "an empty object, not null")

	h = holdstats.NewHoldRequests(map[string]int64{"replayed": 3}, since)
	require.Nil(t, h.SuccessRate, "only replays: no attempts")
}

func TestStatsWindowBounds(t *testing.T) {
	t.Parallel()
	inv, _ := setup(t, nil)
	for _, w := range []time.Duration{0, -time.Hour, time.Millisecond, holdstats.MaxStatsWindow + time.Second} {
		_, err := inv.Stats(context.Background(), w)
		var de *domain.Error
		require.ErrorAs(t, err, &de, "%s", w)
		require.Equal(t, domain.CodeInvalid, de.Code)
	}
	st, err := inv.Stats(context.Background(), holdstats.MaxStatsWindow)
	require.NoError(t, err)
	require.Equal(t, int64(720*3600), st.Window.Seconds)
}
