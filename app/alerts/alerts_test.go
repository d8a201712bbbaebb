package alerts_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/jobs"
)

// TestRepeatRepagesAfterQuiet raises the same failure again and again: it
// pages once, repeats within the quiet interval page nobody, and the first
// repeat after the interval pages again (its webhook delivery enqueued
// anew). Time moves in SQL.
func TestRepeatRepagesAfterQuiet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	svc := alerts.New(pool, inserter, true).WithRepageAfter(time.Hour)
	raise := func() alerts.Alert {
		a, err := svc.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "job_discarded", Subject: "job:sweep_expired", Action: "look"})
		require.NoError(t, err)
		return a
	}
	pages := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'deliver_alert'`).Scan(&n))
		return n
	}

	first := raise()
	require.Equal(t, 1, pages(), "a new alert pages")
	raise()
	raise()
	require.Equal(t, 1, pages(), "repeats within the hour page nobody")

	_, err = pool.Exec(ctx, `UPDATE alerts SET paged_at = paged_at - interval '61 minutes' WHERE id = $1`, first.ID)
	require.NoError(t, err)
	again := raise()
	require.Equal(t, first.ID, again.ID, "the same open alert")
	require.EqualValues(t, 4, again.Occurrences)
	require.Equal(t, 2, pages(), "a repeat after a quiet hour pages again")
	raise()
	require.Equal(t, 2, pages(), "and then the hour starts over")

	never := alerts.New(pool, inserter, true) // no re-page interval
	_, err = pool.Exec(ctx, `UPDATE alerts SET paged_at = paged_at - interval '10 days' WHERE id = $1`, first.ID)
	require.NoError(t, err)
	_, err = never.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: "job_discarded", Subject: "job:sweep_expired", Action: "look"})
	require.NoError(t, err)
	require.Equal(t, 2, pages(), "without an interval a repeat never re-pages")
}
