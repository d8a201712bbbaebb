package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// commandsOn returns how a test runs commands on pool's database, as the
// operating system user carol: cmd runs one and returns its exit code,
// stdout and stderr; ok runs one that must succeed and returns its stdout.
func commandsOn(t *testing.T, pool *pgxpool.Pool) (cmd func(args ...string) (int, string, string), ok func(args ...string) string) {
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "USER": "carol"}
	getenv := func(k string) string { return env[k] }
	cmd = func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	ok = func(args ...string) string {
		t.Helper()
		code, out, errs := cmd(args...)
		require.Equal(t, 0, code, "%v: %s", args, errs)
		return out
	}
	return cmd, ok
}

// refusedBy is a check that cmd, run with args, exits code with want in
// its stderr.
func refusedBy(t *testing.T, cmd func(args ...string) (int, string, string)) func(code int, want string, args ...string) {
	return func(code int, want string, args ...string) {
		t.Helper()
		got, _, errs := cmd(args...)
		require.Equal(t, code, got, "%v", args)
		require.Contains(t, errs, want, "%v", args)
	}
}
