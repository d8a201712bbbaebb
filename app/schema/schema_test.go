package schema_test

import (
	"context"
	"testing"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/schema"
)

// TestMigrationsRoundTrip proves every migration, River's included, can be
// rolled back and applied again, and that the test template is current.
func TestMigrationsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	m, err := schema.New(pool, nil)
	require.NoError(t, err)
	defer m.Close()

	current, latest, err := m.Versions(ctx)
	require.NoError(t, err)
	require.Equal(t, latest, current, "the test template is migrated to the newest version")
	require.GreaterOrEqual(t, latest, int64(9))

	// Versions may have gaps (ranges are handed out to parallel work).
	applied := 0
	for v := current; v > 0; applied++ {
		res, err := m.Down(ctx)
		require.NoError(t, err, "down from %d", v)
		require.Equal(t, v, res.Source.Version)
		// Versions may have gaps: the next one down is whatever is current.
		v, _, err = m.Versions(ctx)
		require.NoError(t, err)
	}

	var tables int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version'`).Scan(&tables))
	require.Zero(t, tables, "down migrations leave no tables behind")

	res, err := m.Up(ctx)
	require.NoError(t, err)
	require.Len(t, res, applied, "up applies every migration down removed")

	// River's own bookkeeping agrees with the schema goose applied.
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	require.NoError(t, err)
	pinned := migrator.AllVersions()
	var riverVersion int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(version) FROM river_migration WHERE line = 'main'`).Scan(&riverVersion))
	require.Equal(t, pinned[len(pinned)-1].Version, riverVersion, "river_migration names the pinned River's newest version")
	res2, err := migrator.Validate(ctx, nil)
	require.NoError(t, err)
	require.True(t, res2.OK, "River's own validation agrees: %v", res2.Messages)
}

// TestUpgradeLeavesNoLegacyJobs upgrades a database that earlier versions
// left with jobs of their own: release_hold jobs still queued are gone
// (no worker takes that kind any more), rollback_batch jobs to run lose
// the not_before field their strict decoding now refuses, and finished
// jobs stay as history.
func TestUpgradeLeavesNoLegacyJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, m := before(t, 71)
	_, err := pool.Exec(ctx, `INSERT INTO river_job (kind, args, max_attempts, state, finalized_at) VALUES
		('release_hold', '{"reservation_id": "01a22fc0-0f22-7c20-8b1b-fcb0254f511a"}', 3, 'scheduled', NULL),
		('release_hold', '{"reservation_id": "01a22fc0-0f22-7c20-8b1b-fcb0254f511b"}', 3, 'completed', now()),
		('rollback_batch', '{"rollback_id": 4, "not_before": "2026-01-01T00:00:00Z"}', 3, 'available', NULL)`)
	require.NoError(t, err)

	_, err = m.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'release_hold'`), "the finished one stays")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'release_hold' AND state <> 'completed'`))
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE args ? 'not_before'`))
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'rollback_batch' AND args = '{"rollback_id": 4}'`))
}
