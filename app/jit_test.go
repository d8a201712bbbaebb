package app_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// TestJITOff: stockhold's sessions run without PostgreSQL's JIT
// compilation (over the partitioned ledger its statements' cost
// estimates passed the thresholds and an incremental reconciliation
// spent seconds compiling), in the pools Connect opens (the CLI's and
// River's) and in the HTTP requests' pool, unless DATABASE_URL sets jit.
func TestJITOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := dbtest.New(t)
	dbURL := dbtest.URL(t, base)
	jit := func(p *pgxpool.Pool) string {
		t.Helper()
		var v string
		require.NoError(t, p.QueryRow(ctx, "SHOW jit").Scan(&v))
		return v
	}
	var server string
	require.NoError(t, base.QueryRow(ctx, "SELECT current_setting('jit')").Scan(&server))
	require.Equal(t, "on", server, "the test server compiles by default (PostgreSQL's default), so off is stockhold's doing")

	pool, err := app.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	require.Equal(t, "off", jit(pool), "a pool Connect opens")

	cfg, err := config.Load(func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] })
	require.NoError(t, err)
	a, err := app.New(cfg, base, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	require.Equal(t, "off", jit(a.RequestPool), "the requests' pool, made from a pool that does not set jit")

	on, err := app.Connect(ctx, withParam(t, dbURL, "jit", "on"))
	require.NoError(t, err)
	defer on.Close()
	require.Equal(t, "on", jit(on), "a DATABASE_URL that sets jit keeps it")
}

// withParam adds the setting key=value to a PostgreSQL URL or keyword/value
// string.
func withParam(t *testing.T, s, key, value string) string {
	t.Helper()
	if !strings.Contains(s, "://") {
		return s + " " + key + "=" + value
	}
	u, err := url.Parse(s)
	require.NoError(t, err)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
