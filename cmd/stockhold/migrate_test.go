package main

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// dbUser is the PostgreSQL user a DATABASE_URL connects as.
func dbUser(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.User)
	return cfg.User
}
