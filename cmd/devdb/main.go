// Command devdb brings up a private PostgreSQL cluster for one checkout of
// stockhold and prints its connection string. `make run` and `make test` use
// it when DATABASE_URL is not set, so a fresh machine needs nothing but the
// two commands of the README's quick start.
//
// The cluster lives under /var/tmp (not inside the checkout: the postgres
// user may not be able to enter the checkout's parent directories), in a
// directory named after the checkout's path, and listens on a port derived
// from that path, so two checkouts on one machine never share a cluster. A
// second run reuses the running cluster.
//
//	devdb up      start (initialising and installing as needed), print DATABASE_URL
//	devdb stop    stop the cluster
//	devdb status  say where the cluster is and whether it runs
//
// DEVDB_SHARED_BUFFERS sets the server's shared_buffers when up starts it
// (256MB when unset): a bench over a large catalogue wants its hot pages
// in PostgreSQL's buffers (docs/SCALING.md), `make db-stop` then
// `DEVDB_SHARED_BUFFERS=6GB make bench ...`.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const dbName = "stockhold"

func main() {
	closeInheritedOnExec()
	cmd := "up"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	c, err := newCluster()
	if err == nil {
		switch cmd {
		case "up":
			err = c.up()
		case "stop":
			err = c.stop()
		case "status":
			err = c.status()
		default:
			err = fmt.Errorf("unknown command %q (want up, stop or status)", cmd)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devdb:", err)
		os.Exit(1)
	}
}

// closeInheritedOnExec keeps every descriptor devdb inherited, past stdin,
// stdout and stderr, from the programs it starts: the server outlives
// devdb, and would hold them as long as it runs. A lock taken with flock(1)
// around a command that brings the cluster up (as `flock some.lock make
// test` does) would otherwise stay taken until the cluster stops.
func closeInheritedOnExec() {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return // not Linux: nothing to do the same way
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// cluster is the private PostgreSQL cluster of one checkout.
type cluster struct {
	dir    string // /var/tmp/stockhold-<name>-<hash>
	data   string // dir/data
	socket string // dir (the unix socket lives here)
	port   int
	owner  string // the OS user that runs postgres; "" means the current user
}

func newCluster() (*cluster, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(wd))
	name := fmt.Sprintf("stockhold-%s-%s", sanitize(filepath.Base(wd)), hex.EncodeToString(sum[:4]))
	dir := filepath.Join("/var/tmp", name)
	port := 20000 + int(sum[4])<<8%10000 + int(sum[5])%250
	c := &cluster{dir: dir, data: filepath.Join(dir, "data"), socket: dir, port: port}
	if os.Geteuid() == 0 {
		c.owner = "postgres" // initdb and postgres refuse to run as root
	}
	return c, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// url is the connection string of the cluster's stockhold database, over the
// unix socket with trust authentication.
func (c *cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", db, c.socket, c.port)
}

func (c *cluster) up() error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()

	bin, err := pgBinDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.data, "PG_VERSION")); err != nil {
		if err := c.initdb(bin); err != nil {
			return err
		}
	}
	if !c.running() {
		if err := c.start(bin); err != nil {
			return err
		}
	}
	if err := c.createDatabase(); err != nil {
		return err
	}
	fmt.Println(c.url(dbName))
	return nil
}

// lock serialises concurrent `devdb up` runs of one checkout.
func (c *cluster) lock() (func(), error) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(c.dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// pgBinDir finds the newest installed PostgreSQL server binaries, installing
// Debian's postgresql package when there are none.
func pgBinDir() (string, error) {
	find := func() string {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
		sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
		if len(dirs) == 0 {
			return ""
		}
		return filepath.Dir(dirs[len(dirs)-1])
	}
	if dir := find(); dir != "" {
		return dir, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("no PostgreSQL server binaries found; install the postgresql package (apt-get install -y postgresql) or set DATABASE_URL")
	}
	fmt.Fprintln(os.Stderr, "devdb: installing PostgreSQL with apt-get")
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "postgresql"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	if dir := find(); dir != "" {
		return dir, nil
	}
	return "", errors.New("postgresql installed, but no server binaries under /usr/lib/postgresql")
}

func pgMajor(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func (c *cluster) initdb(bin string) error {
	fmt.Fprintln(os.Stderr, "devdb: creating a PostgreSQL cluster in", c.data)
	if err := os.RemoveAll(c.data); err != nil {
		return err
	}
	if err := c.chown(c.dir); err != nil {
		return err
	}
	return c.run(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
}

func (c *cluster) start(bin string) error {
	opts := strings.Join([]string{
		"-p", strconv.Itoa(c.port),
		"-k", c.socket,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300",
		"-c", "shared_buffers=" + sharedBuffers(),
	}, " ")
	logFile := filepath.Join(c.dir, "postgres.log")
	if err := c.run(filepath.Join(bin, "pg_ctl"), "-D", c.data, "-l", logFile, "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("start postgres (log: %s): %w", logFile, err)
	}
	return nil
}

// sharedBuffers is the server's shared_buffers: DEVDB_SHARED_BUFFERS, or
// 256MB. Only a size (digits and a unit) is taken, as it goes into the
// server's command line.
func sharedBuffers() string {
	v := strings.TrimSpace(os.Getenv("DEVDB_SHARED_BUFFERS"))
	if v == "" {
		return "256MB"
	}
	digits := strings.TrimRight(v, "kMGTB")
	unit := v[len(digits):]
	if _, err := strconv.Atoi(digits); err != nil || (unit != "" && unit != "kB" && unit != "MB" && unit != "GB" && unit != "TB") {
		fmt.Fprintf(os.Stderr, "devdb: DEVDB_SHARED_BUFFERS=%q is not a size (as 6GB or 512MB); using 256MB\n", v)
		return "256MB"
	}
	return v
}

func (c *cluster) stop() error {
	if !c.running() {
		fmt.Fprintln(os.Stderr, "devdb: not running")
		return nil
	}
	bin, err := pgBinDir()
	if err != nil {
		return err
	}
	return c.run(filepath.Join(bin, "pg_ctl"), "-D", c.data, "-m", "fast", "-w", "stop")
}

func (c *cluster) status() error {
	state := "stopped"
	if c.running() {
		state = "running"
	}
	fmt.Printf("data:   %s\nstate:  %s\nurl:    %s\n", c.data, state, c.url(dbName))
	return nil
}

// running reports whether a server answers on the cluster's socket.
func (c *cluster) running() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

func (c *cluster) createDatabase() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", dbName).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+dbName)
	return err
}

// run runs a PostgreSQL binary as the cluster's owner, its output on stderr.
func (c *cluster) run(name string, args ...string) error {
	if c.owner != "" {
		args = append([]string{"-u", c.owner, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// chown hands the cluster directory to the OS user that runs postgres.
func (c *cluster) chown(dir string) error {
	if c.owner == "" {
		return nil
	}
	u, err := user.Lookup(c.owner)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", c.owner, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}
