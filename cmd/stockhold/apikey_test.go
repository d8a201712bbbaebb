package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
)

// TestAPIKeyCommands runs what `make run` does twice (rotate the dev keys:
// the first run creates them, the second replaces them), then create,
// list and revoke, checking each token against the database.
func TestAPIKeyCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool)}
	getenv := func(k string) string { return env[k] }
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"apikey"}, args...), getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}
	works := func(token string) bool {
		_, err := auth.NewAuthenticator(pool, 0).Authenticate(ctx, token)
		return err == nil
	}

	code, out, errs := cmd("rotate", "--name", "dev-shop", "--role", "shop")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `no key was named "dev-shop": created a shop key`)
	first := lastLine(out)
	code, out, errs = cmd("rotate", "--name", "dev-shop", "--role", "shop")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `rotated shop key "dev-shop": the old token`)
	second := lastLine(out)
	require.False(t, works(first), "make run's previous key stops")
	require.True(t, works(second))

	code, out, errs = cmd("rotate", "--name", "dev-shop", "--grace", "1h")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "works until")
	third := lastLine(out)
	require.True(t, works(second), "in its grace period")
	require.True(t, works(third))

	code, _, errs = cmd("create", "--name", "dev-shop", "--role", "ops")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "a key in use already has this name: rotate it")
	code, out, errs = cmd("create", "--name", "alice", "--role", "ops")
	require.Equal(t, 0, code, errs)
	require.True(t, works(lastLine(out)))
	for _, loc := range []string{"paris", "lyon"} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(ctx, []string{"locations", "create", "--id", loc, "--operator", "alice"}, getenv, &stdout, &stderr), stderr.String())
	}
	code, _, errs = cmd("create", "--name", "shop-fr", "--role", "shop", "--locations", "paris,lyon", "--strategy", "nearest")
	require.Equal(t, 0, code, errs)
	code, _, errs = cmd("create", "--name", "shop-x", "--role", "shop", "--strategy", "cheapest")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--strategy")

	// Every key with the locations its holds are bound to and its
	// default strategy.
	code, out, errs = cmd("list")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6)
	require.Regexp(t, `^ID\s+NAME\s+ROLE\s+LOCATIONS\s+STRATEGY\s+CREATED\s+STATUS$`, lines[0])
	require.Regexp(t, `^\d+\s+alice\s+ops\s+any\s+priority\s+\S+\s+in use$`, lines[1])
	require.Regexp(t, `^\d+\s+dev-shop\s+shop\s+any\s+priority\s+\S+\s+revoked \S+$`, lines[2])
	require.Regexp(t, `^\d+\s+dev-shop\s+shop\s+any\s+priority\s+\S+\s+works until \S+ \(rotated\)$`, lines[3])
	require.Regexp(t, `^\d+\s+dev-shop\s+shop\s+any\s+priority\s+\S+\s+in use$`, lines[4])
	require.Regexp(t, `^\d+\s+shop-fr\s+shop\s+paris,lyon\s+nearest\s+\S+\s+in use$`, lines[5])

	// A rotation keeps the strategy, or takes the one it is given.
	strategyOf := func(name string) string {
		var s *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT strategy FROM api_keys WHERE name = $1 AND revoked_at IS NULL`, name).Scan(&s))
		if s == nil {
			return ""
		}
		return *s
	}
	code, _, errs = cmd("rotate", "--name", "shop-fr")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "nearest", strategyOf("shop-fr"))
	code, _, errs = cmd("rotate", "--name", "shop-fr", "--strategy", "most_stock")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "most_stock", strategyOf("shop-fr"))
	code, _, errs = cmd("rotate", "--name", "shop-fr", "--strategy", "")
	require.Equal(t, 0, code, errs)
	require.Empty(t, strategyOf("shop-fr"))
	for _, tok := range []string{first, second, third} {
		require.NotContains(t, out, tok, "list never shows a token")
	}

	code, out, errs = cmd("revoke", "--name", "dev-shop")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `revoked 2 keys named "dev-shop" (ids `)
	require.False(t, works(second), "the key in its grace period stops too")
	require.False(t, works(third))
	code, _, errs = cmd("revoke", "--name", "dev-shop")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no key in use has this name")

	for _, args := range [][]string{{}, {"delete"}, {"revoke"}, {"create", "--name", "x"}, {"rotate", "--name", "x", "--role", "admin"},
		{"rotate", "--name", "x", "--grace", "-1s"}, {"list", "extra"}} {
		code, _, _ := cmd(args...)
		require.Equal(t, 2, code, "%v", args)
	}
}
