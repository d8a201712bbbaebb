// Package formation runs a pg_auto_failover formation on this machine: a
// monitor and two PostgreSQL 15 data nodes with synchronous replication, set
// up the way Debian's postgresql-15-auto-failover package documents, for
// the failover drill (`make drill-failover`) and its test.
//
// Everything lives in one directory under /var/tmp named after the
// checkout (data directories, pg_autoctl's configuration and state, logs),
// owned by the postgres user when run as root (PostgreSQL refuses to run as
// root), and every server listens on 127.0.0.1 only, on ports derived from
// the checkout's path so two checkouts never collide. Down removes it all.
package formation

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/internal/debian"
)

// Package is the Debian package that brings pg_autoctl and the monitor's
// extension for PostgreSQL 15.
const Package = "postgresql-15-auto-failover"

const (
	pgBin     = "/usr/lib/postgresql/15/bin"
	extension = "/usr/lib/postgresql/15/lib/pgautofailover.so"
	autoctl   = "/usr/bin/pg_autoctl"
)

// Install installs Package with apt-get when pg_autoctl or the extension
// is missing (as root; otherwise it fails with debian.ErrNotRoot).
func Install() error {
	return debian.EnsureFiles(Package, autoctl, extension, pgBin+"/pg_ctl")
}

// Options say where a formation lives.
type Options struct {
	// Name tells formations of one checkout apart (the drill's and its
	// test's): the directory is /var/tmp/stockhold-<Name>-<checkout>-<hash>.
	Name string
	// Checkout is the checkout's directory; the formation's directory and
	// ports derive from it.
	Checkout string
	// Database is the database pg_autoctl creates on the data nodes.
	Database string
	// Log gets a line per step; nil discards them.
	Log io.Writer
}

// Node is one PostgreSQL server of the formation.
type Node struct {
	Name string
	Port int
	Data string
}

// Formation is a running monitor and two data nodes.
type Formation struct {
	Dir     string
	Monitor Node
	Nodes   [2]Node
	db      string
	log     io.Writer
	cred    *syscall.Credential
	env     []string
	procs   []*exec.Cmd
}

// For returns the formation opts describe, without starting anything.
func For(opts Options) *Formation {
	sum := sha256.Sum256([]byte(opts.Checkout))
	dir := filepath.Join("/var/tmp", fmt.Sprintf("stockhold-%s-%s-%x", opts.Name, sanitize(filepath.Base(opts.Checkout)), sum[:4]))
	// Three ports in 31000-36999, away from cmd/devdb's 20000-30249, and
	// apart for each name.
	nameSum := sha256.Sum256([]byte(opts.Name))
	base := 31000 + int((binary.BigEndian.Uint32(sum[4:8])+uint32(nameSum[0]))%2000)*3
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	f := &Formation{
		Dir:     dir,
		Monitor: Node{Name: "monitor", Port: base, Data: filepath.Join(dir, "monitor")},
		db:      opts.Database,
		log:     log,
		env: []string{
			"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"XDG_DATA_HOME=" + filepath.Join(dir, "share"),
			"XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"),
			"PATH=" + pgBin + ":/usr/bin:/bin",
			"HOME=" + dir,
			"LANG=C", "LC_ALL=C",
		},
	}
	for i := range f.Nodes {
		name := fmt.Sprintf("node%d", i+1)
		f.Nodes[i] = Node{Name: name, Port: base + 1 + i, Data: filepath.Join(dir, name)}
	}
	return f
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// Up installs the package when missing, removes what a previous run left
// in the directory, and brings up the monitor, then the first node (the
// primary), then the second (a synchronous standby made with
// pg_basebackup), and returns once the monitor reports one primary and
// one secondary.
func Up(ctx context.Context, opts Options) (*Formation, error) {
	if err := Install(); err != nil {
		return nil, err
	}
	f := For(opts)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("look up the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		f.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	f.cleanUp()
	for _, d := range []string{f.Dir, filepath.Join(f.Dir, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if f.cred != nil {
			if err := os.Chown(d, int(f.cred.Uid), int(f.cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	ok := false
	defer func() {
		if !ok {
			f.Down()
		}
	}()

	f.logf("creating the monitor on port %d in %s", f.Monitor.Port, f.Dir)
	if err := f.autoctl(ctx, "monitor-create", "create", "monitor", "--pgdata", f.Monitor.Data,
		"--pgport", strconv.Itoa(f.Monitor.Port), "--hostname", "127.0.0.1",
		"--auth", "trust", "--no-ssl", "--pgctl", pgBin+"/pg_ctl"); err != nil {
		return nil, err
	}
	// pg_autoctl makes the monitor listen on every address; loopback is enough.
	if err := f.autoctl(ctx, "monitor-config", "config", "set", "--pgdata", f.Monitor.Data,
		"postgresql.listen_addresses", "127.0.0.1"); err != nil {
		return nil, err
	}
	if err := f.start("monitor", "run", "--pgdata", f.Monitor.Data); err != nil {
		return nil, err
	}
	if err := f.waitFor(ctx, time.Minute, "the monitor to answer", func(ctx context.Context) (bool, error) {
		conn, err := pgx.Connect(ctx, f.monitorURL())
		if err != nil {
			return false, nil
		}
		conn.Close(ctx)
		return true, nil
	}); err != nil {
		return nil, err
	}

	for i, n := range f.Nodes {
		f.logf("creating %s on port %d", n.Name, n.Port)
		if err := f.start(n.Name, "create", "postgres", "--pgdata", n.Data, "--pgport", strconv.Itoa(n.Port),
			"--listen", "127.0.0.1", "--hostname", "127.0.0.1", "--name", n.Name, "--dbname", f.db,
			"--monitor", f.monitorURL(), "--auth", "trust", "--no-ssl", "--pgctl", pgBin+"/pg_ctl", "--run"); err != nil {
			return nil, err
		}
		if i == 0 {
			if err := f.waitFor(ctx, 2*time.Minute, n.Name+" to run as a single primary", func(ctx context.Context) (bool, error) {
				st, err := f.States(ctx)
				if err != nil {
					return false, nil
				}
				s, ok := st[n.Name]
				return ok && s.Reported == "single" && s.Assigned == "single", nil
			}); err != nil {
				return nil, err
			}
		}
	}
	// The standby's pg_basebackup asks the primary for a checkpoint spread
	// over checkpoint_completion_target (minutes); a CHECKPOINT on the
	// primary makes the one in progress finish at once.
	if _, err := f.WaitStable(ctx, 3*time.Minute, func(ctx context.Context, st map[string]State) {
		if s := st[f.Nodes[1].Name]; s.Reported == "wait_standby" || s.Reported == "catchingup" || s.Reported == "" {
			f.checkpoint(ctx, f.Nodes[0])
		}
	}); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

// URL is the formation's connection string for its database: both nodes,
// with target_session_attrs=read-write, so a client connects to whichever
// is the primary. extra is appended to the query (pool_max_conns=10, say).
func (f *Formation) URL(extra string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?target_session_attrs=read-write&sslmode=disable",
		f.Nodes[0].Port, f.Nodes[1].Port, f.db)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// NodeURL is node's own connection string for its database.
func (f *Formation) NodeURL(n Node) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.Port, f.db)
}

func (f *Formation) monitorURL() string {
	return fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", f.Monitor.Port)
}

// State is what the monitor knows of a node.
type State struct {
	Reported, Assigned string
}

// States reads each data node's reported and assigned state from the
// monitor, by node name.
func (f *Formation) States(ctx context.Context) (map[string]State, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.monitorURL())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node`)
	if err != nil {
		return nil, err
	}
	out := map[string]State{}
	var name string
	var s State
	_, err = pgx.ForEachRow(rows, []any{&name, &s.Reported, &s.Assigned}, func() error {
		out[name] = s
		return nil
	})
	return out, err
}

// Primary returns the node the monitor reports as primary (or
// wait_primary: a primary whose standby is not back yet).
func (f *Formation) Primary(ctx context.Context) (Node, bool, error) {
	st, err := f.States(ctx)
	if err != nil {
		return Node{}, false, err
	}
	for _, n := range f.Nodes {
		if s := st[n.Name]; s.Reported == s.Assigned && (s.Reported == "primary" || s.Reported == "wait_primary") {
			return n, true, nil
		}
	}
	return Node{}, false, nil
}

// WaitStable waits until one node is primary and the other secondary, as
// both reported and assigned, and returns the primary. each, when not nil,
// is called with the states on every poll.
func (f *Formation) WaitStable(ctx context.Context, timeout time.Duration, each func(context.Context, map[string]State)) (Node, error) {
	var primary Node
	err := f.waitFor(ctx, timeout, "one primary and one secondary", func(ctx context.Context) (bool, error) {
		st, err := f.States(ctx)
		if err != nil {
			return false, nil
		}
		if each != nil {
			each(ctx, st)
		}
		roles := map[string]int{}
		for _, n := range f.Nodes {
			s := st[n.Name]
			if s.Reported != s.Assigned {
				return false, nil
			}
			roles[s.Reported]++
			if s.Reported == "primary" {
				primary = n
			}
		}
		return roles["primary"] == 1 && roles["secondary"] == 1, nil
	})
	return primary, err
}

// KillPostmaster sends SIGKILL to n's postmaster: the crash of a primary,
// which pg_autoctl notices (and restarts, demoted, once the monitor has
// promoted the standby).
func (f *Formation) KillPostmaster(n Node) error {
	pid, err := postmasterPID(n.Data)
	if err != nil {
		return err
	}
	f.logf("kill -9 %d (the postmaster of %s)", pid, n.Name)
	return syscall.Kill(pid, syscall.SIGKILL)
}

// Switchover asks the monitor for a planned failover of the formation's
// group: the primary drains and is demoted, the standby promoted. It
// returns at once; WaitStable tells when it is done.
func (f *Formation) Switchover(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, f.monitorURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	f.logf("switchover (pgautofailover.perform_failover)")
	_, err = conn.Exec(ctx, `SELECT pgautofailover.perform_failover('default', 0)`)
	return err
}

// Events returns the monitor's event log, oldest first, one line each.
func (f *Formation) Events(ctx context.Context) ([]string, error) {
	conn, err := pgx.Connect(ctx, f.monitorURL())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT to_char(eventtime, 'HH24:MI:SS.MS') || ' ' || description
		FROM pgautofailover.event ORDER BY eventid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Down stops every pg_autoctl process of the formation (and so its
// servers, at once: SIGQUIT is pg_autoctl's immediate stop, nothing is
// kept) and removes its directory.
func (f *Formation) Down() {
	f.logf("stopping the formation and removing %s", f.Dir)
	for i := len(f.procs) - 1; i >= 0; i-- {
		_ = syscall.Kill(-f.procs[i].Process.Pid, syscall.SIGQUIT)
	}
	for _, p := range f.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	f.procs = nil
	f.cleanUp()
}

// cleanUp stops any server still running from the directory (a previous
// run killed before its Down) and removes the directory.
func (f *Formation) cleanUp() {
	for _, n := range append([]Node{f.Monitor}, f.Nodes[:]...) {
		pid, err := postmasterPID(n.Data)
		if err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			// The pg_autoctl supervising it, if any, is in the same
			// process group, started by a run that is gone.
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(f.Dir)
	// pg_autoctl keeps its runtime files under /tmp/pg_autoctl/<pgdata>
	// when XDG_RUNTIME_DIR is unusable.
	_ = os.RemoveAll(filepath.Join(os.TempDir(), "pg_autoctl", f.Dir))
}

func postmasterPID(data string) (int, error) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("postmaster.pid of %s: %q", data, line)
	}
	return pid, nil
}

// checkpoint runs CHECKPOINT on n, ignoring failures (n may be starting).
func (f *Formation) checkpoint(ctx context.Context, n Node) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.NodeURL(n))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "CHECKPOINT")
}

// autoctl runs one pg_autoctl command to its end, its output in
// Dir/<name>.log.
func (f *Formation) autoctl(ctx context.Context, name string, args ...string) error {
	cmd, logFile, err := f.command(name, args...)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("pg_autoctl %s (log: %s): %w", strings.Join(args[:2], " "), logFile.Name(), err)
	}
	return nil
}

// start starts a long-running pg_autoctl command (a node's supervisor) in a
// process group of its own, its output in Dir/<name>.log.
func (f *Formation) start(name string, args ...string) error {
	cmd, logFile, err := f.command(name, args...)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if err := cmd.Start(); err != nil {
		return err
	}
	f.procs = append(f.procs, cmd)
	return nil
}

func (f *Formation) command(name string, args ...string) (*exec.Cmd, *os.File, error) {
	logFile, err := os.OpenFile(filepath.Join(f.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(autoctl, args...)
	cmd.Dir = f.Dir
	cmd.Env = f.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: f.cred}
	return cmd, logFile, nil
}

// waitFor polls done every 200 ms until it reports true, fails, or timeout
// passes.
func (f *Formation) waitFor(ctx context.Context, timeout time.Duration, what string, done func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s (logs in %s)", timeout, what, f.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (f *Formation) logf(format string, args ...any) {
	fmt.Fprintf(f.log, "%s formation: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// ErrNotRoot is debian.ErrNotRoot: the package is missing and this process
// cannot install it.
var ErrNotRoot = debian.ErrNotRoot
