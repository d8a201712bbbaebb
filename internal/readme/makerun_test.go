package readme

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
)

// TestMakeRunWithThePortTaken: a make run whose address another process
// serves on (an instance already running) fails before it rotates the dev
// keys, so the running instance still answers to its own; before, it
// rotated dev-shop and dev-ops and only then failed to bind.
func TestMakeRunWithThePortTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	shop, err := auth.Create(ctx, pool, "dev-shop", auth.RoleShop)
	require.NoError(t, err)
	ops, err := auth.Create(ctx, pool, "dev-ops", auth.RoleOps)
	require.NoError(t, err)
	running, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer running.Close()

	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-s", "--no-print-directory", "-C", root, "run",
		"STOCKHOLD_BIN="+filepath.Join(t.TempDir(), "stockhold"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.URL(t, pool), "STOCKHOLD_ADDR="+running.Addr().String())
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "make run cannot serve:\n%s", out)
	require.Contains(t, string(out), "cannot serve on "+running.Addr().String())
	require.NotContains(t, string(out), "shop key:", "no keys were printed")

	a := auth.NewAuthenticator(pool, 0)
	for _, token := range []string{shop, ops} {
		_, err := a.Authenticate(ctx, token)
		require.NoError(t, err, "the running instance's dev keys still work")
	}
	require.Equal(t, 2, dbtest.Count(t, pool, `SELECT count(*) FROM api_keys`), "no key was made")
}
