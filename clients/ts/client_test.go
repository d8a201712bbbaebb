// Package ts holds stockhold's TypeScript client (package.json, src/) and
// this test, which drives it against a real server when Node is installed.
package ts

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// minNode is the oldest Node the client supports (package.json's engines).
const minNode = 20

// TestTypeScriptClient installs the client's dependencies from the
// committed lockfile (npm ci, into a copy of the package, so no
// node_modules lands in the checkout), checks that the committed types are
// what openapi-typescript generates from openapi.json today, compiles the
// client, its flow and its example with tsc --strict, and runs the flow
// and the example (examples/checkout.ts, which the clients guide shows)
// against a real server, every exchange checked against the document on
// its way through: stock in, a hold confirmed, a hold released, a 409 read
// as a typed problem, a catalogue batch. The flow runs without RUN, as a
// reader runs it. Without Node 20 and npm it is skipped, saying so.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode != nil || errNPM != nil {
		t.Skip("node and npm are not installed: the TypeScript client (clients/ts) is not tested; install Node 20 or later to test it")
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if major < minNode {
		t.Skipf("node is %s, the client needs %d or later: the TypeScript client is not tested", strings.TrimSpace(string(out)), minNode)
	}

	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "tsconfig.json", "src", "test", "examples"} {
		copyTree(t, name, filepath.Join(dir, name))
	}
	sh := func(timeout time.Duration, env []string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		require.NoError(t, cmd.Run(), "%s %s:\n%s", name, strings.Join(args, " "), b.String())
		return b.String()
	}
	sh(5*time.Minute, nil, npm, "ci", "--no-audit", "--no-fund")

	doc, err := filepath.Abs(filepath.Join("..", "..", "app", "api", "openapi.json"))
	require.NoError(t, err)
	sh(2*time.Minute, nil, filepath.Join(dir, "node_modules", ".bin", "openapi-typescript"), doc, "--default-non-nullable=false", "-o", "fresh.d.ts")
	fresh, err := os.ReadFile(filepath.Join(dir, "fresh.d.ts"))
	require.NoError(t, err)
	committed, err := os.ReadFile(filepath.Join("src", "schema.d.ts"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(fresh, committed), "clients/ts/src/schema.d.ts is stale: run make generate (or npm run generate in clients/ts) and commit it")

	sh(2*time.Minute, nil, filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", ".")

	base, ops, shop := serve(t)
	got := sh(2*time.Minute, []string{"BASE=" + base, "OPS=" + ops, "SHOP=" + shop, "RUN="},
		node, filepath.Join("dist", "test", "flow.js"))
	require.Equal(t, "stock TS-1 main available 3\n"+
		"hold held TS-1x2\n"+
		"confirm confirmed\n"+
		"release released cancelled\n"+
		"refused 409 out_of_stock TS-1 /problems/out_of_stock\n"+
		"catalogue TS-1 missing TS-NONE\n", got)

	example := sh(2*time.Minute, []string{"BASE=" + base, "OPS=" + ops, "SHOP=" + shop, "RUN=" + strconv.FormatInt(time.Now().UnixNano(), 36)},
		node, filepath.Join("dist", "examples", "checkout.js"))
	require.Equal(t, "held held TS-MUGx2\nconfirmed confirmed\nrefused 409 out_of_stock TS-MUG\n", example,
		"what docs/guides/clients.md says it prints")
}

// serve starts a fully wired stockhold on a fresh database behind a proxy
// that checks every exchange against openapi.json, and returns the proxy's
// base URL and an ops and a shop key.
func serve(t *testing.T) (base, ops, shop string) {
	t.Helper()
	env := map[string]string{"DATABASE_URL": "postgres://unused", "STOCKHOLD_DRAIN_DELAY": "0s",
		"STOCKHOLD_SHUTDOWN_TIMEOUT": "5s", "STOCKHOLD_JOB_STOP_TIMEOUT": "5s"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	pool := dbtest.New(t)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: ln.Addr().String()})
	proxy.Transport = apitest.Transport(t, nil)
	front, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(front) }()
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
		dbtest.RequireInvariants(t, pool)
	})
	ops, err = auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err = auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)
	return "http://" + front.Addr().String(), ops, shop
}

// copyTree copies a file or a directory.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	require.NoError(t, err, "copy %s", from)
}
