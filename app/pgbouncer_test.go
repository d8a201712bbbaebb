package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/internal/debian"
)

// TestThroughPgBouncer: stockhold connects through PgBouncer in session
// mode, as docs/SCALING.md advises in front of many instances. PgBouncer
// refuses a startup parameter it does not track ("unsupported startup
// parameter: jit"), so stockhold's session settings are SET statements
// when a connection opens: the pools Connect opens have JIT off, and the
// requests' pool also its lock and statement timeouts.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	path, err := debian.Ensure("pgbouncer", "pgbouncer")
	if errors.Is(err, debian.ErrNotRoot) {
		t.Skip(err)
	}
	require.NoError(t, err, "install pgbouncer")
	ctx := context.Background()
	base := dbtest.New(t)
	bouncer := startPgBouncer(t, path, base.Config().ConnConfig)
	dbURL := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", base.Config().ConnConfig.User, bouncer, base.Config().ConnConfig.Database)

	setting := func(p *pgxpool.Pool, name string) string {
		t.Helper()
		var v string
		require.NoError(t, p.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v))
		return v
	}
	pool, err := app.Connect(ctx, dbURL)
	require.NoError(t, err, "connect through PgBouncer")
	defer pool.Close()
	require.Equal(t, "off", setting(pool, "jit"), "a pool Connect opens")

	cfg, err := config.Load(func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] })
	require.NoError(t, err)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	require.Equal(t, "off", setting(a.RequestPool, "jit"), "the requests' pool")
	for name, want := range map[string]time.Duration{"lock_timeout": cfg.LockTimeout, "statement_timeout": cfg.StatementTimeout} {
		require.Positive(t, want, name)
		var same bool
		require.NoError(t, a.RequestPool.QueryRow(ctx, "SELECT current_setting($1)::interval = make_interval(secs => $2)",
			name, want.Seconds()).Scan(&same))
		require.True(t, same, "%s of the requests' sessions is %s, not %s", name, setting(a.RequestPool, name), want)
	}
}

// startPgBouncer runs PgBouncer in session mode on a free loopback port in
// front of server's PostgreSQL (as the postgres user when this is root:
// PgBouncer refuses to run as root) until the test ends, and answers its
// address once it accepts connections.
func startPgBouncer(t *testing.T, path string, server *pgx.ConnConfig) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	dir, err := os.MkdirTemp("", "pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ini := filepath.Join(dir, "pgbouncer.ini")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.txt"), fmt.Appendf(nil, "%q \"\"\n", server.User), 0o644))
	require.NoError(t, os.WriteFile(ini, fmt.Appendf(nil, `[databases]
* = host=%s port=%d
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = session
logfile = %s
`, server.Host, server.Port, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log")), 0o644))
	name, args := path, []string{ini}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "PgBouncer does not run as root: it needs the postgres user")
		uid, _ := strconv.Atoi(u.Uid)
		require.NoError(t, os.Chown(dir, uid, -1))
		name, args = "runuser", append([]string{"-u", "postgres", "--", path}, args...)
	}
	cmd := exec.Command(name, args...)
	// Its own process group, killed whole at the end: killing runuser
	// alone left PgBouncer running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true // said below
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, 30*time.Second, 10*time.Millisecond, "pgbouncer does not listen on %s", addr)
	select {
	case <-exited:
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		require.FailNow(t, "pgbouncer exited", "%v\n%s", waitErr, log)
	default:
	}
	return addr
}
