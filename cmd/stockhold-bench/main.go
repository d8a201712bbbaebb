// Command stockhold-bench measures stockhold over HTTP: it creates a fresh
// database on the server DATABASE_URL names (the dev database with `make
// bench`), starts a real `stockhold serve` on it as a child process, drives
// it with concurrent clients through a series of scenarios, and prints one
// table. For the hot and spread scenarios it also runs, in the same run and
// at the same concurrency, the bare transaction a naive implementation
// would run per hold (BEGIN; UPDATE stock ... WHERE available >= 1; INSERT
// reservation; COMMIT) straight through pgx, and reports the ratio.
// The locations scenario (1,000 SKUs at three warehouses, the first often
// short, allocated by priority, most_stock and nearest) runs in turns with
// spread's holds: spread, priority, most_stock, nearest, spread, ...
// -turns times (5 by default, -duration split among them), and gives each
// strategy's rate against spread's as the median of its turns' ratios to
// the spread turns on either side, with their range (spreadturns.go);
// preorder does the same with its holds. Timings on a shared machine are
// noisy; the ratios are the numbers to compare.
//
//	stockhold-bench [-server bin/stockhold] [-duration 5s] [-clients 64]
//	                [-scenarios hot,spread,...] [-catalogue 1000] [-json] [-keep]
//	                [-seats 2000,50000] [-turns 5] [-profile DIR]
//
// -catalogue sets how many SKUs the spread scenarios hold from; the
// reconcile scenario (only when named) times reconciliation runs over that
// catalogue, full and incremental. The seats scenario (only when named)
// runs an on-sale rush on a venue of each size -seats names, beside the
// plain table a developer would write by hand and a hot SKU, in turns;
// soldout (only when named) hammers a SKU whose last unit is gone, then
// sends the same requests to its floor (floor.go). -profile writes each
// timed phase's profiles (server CPU, PostgreSQL wait events and
// statements) into a directory. -report FILE (make bench gives
// docs/internals/PERFORMANCE.md) rewrites that report: every goal of
// goals.go with the figure the last run that measured it gave, and the
// command that measures it again.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/schema"
)

// scenarioNames are the scenarios in the order they run by default.
var scenarioNames = []string{"hot", "spread", "locations", "half", "multi", "flash", "mixed", "expiry", "campaign-end"}

// extraScenarios run only when named: reconcile times reconciliation runs
// over the catalogue (-catalogue) rather than holds; seats is an on-sale
// rush on venues of each size -seats names, seats held by name and
// together; soldout hammers a SKU whose last unit is gone; skus times
// catalogue reads (GET /v1/skus) over the catalogue; bundles holds
// bundles of three SKUs against the same SKUs as three-line holds;
// preorder holds past what is on hand against a supplier's delivery,
// after spread; archive measures holds' p99 while a month of the ledger is
// archived under them (archive.go); history times the reads that reach
// into a history's old months (history.go; make bench-year makes one).
var extraScenarios = []string{"reconcile", "seats", "soldout", "skus", "bundles", "preorder", "archive", "history"}

func main() {
	if addr := os.Getenv(floorEnv); addr != "" {
		fmt.Fprintln(os.Stderr, "stockhold-bench (floor server):", serveFloor(addr, os.Getenv(floorBodyEnv)))
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "stockhold-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	server    string
	duration  time.Duration
	clients   int
	scenarios []string
	json      bool
	keep      bool
	// reuse keeps a bench database left by -keep (a seeded catalogue)
	// instead of creating it afresh.
	reuse    bool
	database string
	// halfRate, when set, is the rate of the half scenario instead of
	// half of spread's.
	halfRate float64
	// catalogue is how many SKUs spread, half, multi, mixed and
	// campaign-end hold from, and reconcile checks.
	catalogue int
	// seats are the venue sizes the seats scenario compares.
	seats []int
	// turns is how many turns the scenarios that alternate their legs
	// (seats, locations, preorder) give each leg, after one to warm up.
	turns int
	// archiveRows is how many ledger rows the archive scenario writes in
	// SQL into the month it archives, beside its holds'.
	archiveRows int
	// archiveBefore, when set (a month, YYYY-MM), makes the archive
	// scenario archive the months before it as they are (a history a run
	// with -keep or make bench-year left) instead of writing one.
	archiveBefore string
	// archiveDir, when set, is where the archive scenario writes its
	// files and leaves them (for stockhold ledger restore).
	archiveDir string
	// profile, when set, is a directory each timed phase writes its
	// profiles into (see profiler).
	profile string
	// report, when set, is the report of the goals this run rewrites
	// (goals.go).
	report string
	// compare, when set, is another revision's server binary to compare
	// -server with, over rounds alternate runs each (compare.go).
	compare string
	rounds  int
	// migrateWithServer migrates the bench database with the server's
	// own `migrate up` rather than this bench's schema, so that a server
	// built from another revision runs on its own schema.
	migrateWithServer bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stockhold-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var scenarios string
	fs.StringVar(&o.server, "server", "bin/stockhold", "the stockhold binary to run")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long each timed scenario runs")
	fs.IntVar(&o.clients, "clients", 64, "concurrent clients")
	fs.StringVar(&scenarios, "scenarios", strings.Join(scenarioNames, ","), "scenarios to run, in order")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of a table")
	fs.BoolVar(&o.keep, "keep", false, "keep the bench database afterwards")
	fs.BoolVar(&o.reuse, "reuse", false, "reuse the bench database a run with -keep left (its seeded catalogue) instead of creating it afresh; implies -keep")
	fs.Float64Var(&o.halfRate, "half-rate", 0, "holds/s of the half scenario (default: half of spread's rate)")
	fs.StringVar(&o.database, "database", "stockhold_bench", "name of the database to create (dropped first if it exists)")
	fs.IntVar(&o.catalogue, "catalogue", 1000, "SKUs the spread scenarios hold from (above 10,000 they are seeded in SQL) and reconcile checks")
	fs.IntVar(&o.archiveRows, "archive-rows", 1_000_000, "ledger rows the archive scenario writes in SQL (holds made and released) into the month it archives, beside its own holds'")
	fs.StringVar(&o.archiveBefore, "archive-before", "", "a month (YYYY-MM): the archive scenario archives the ledger's months before it (oldest: the oldest month not archived, and any before it) as they are (a reused history, make bench-year) instead of writing and cutting one")
	fs.StringVar(&o.archiveDir, "archive-dir", "", "the directory the archive scenario writes its files into and leaves them in (default: a temporary one, removed)")
	fs.IntVar(&o.turns, "turns", 5, "turns each leg of seats, locations and preorder gets, after one to warm up: -duration is split among them (locations and preorder take each strategy's ratio to spread as the median of its turns')")
	seats := fs.String("seats", "2000,50000", "venue sizes the seats scenario compares, in seats (whole rows of 100), comma-separated")
	fs.StringVar(&o.report, "report", "", "the report of every goal (docs/internals/PERFORMANCE.md) to rewrite with what this run measured")
	fs.StringVar(&o.profile, "profile", "", "directory to write each timed phase's profiles into: the server's CPU profile and heap and the bench's own, PostgreSQL's wait events, and pg_stat_statements when the server preloads it")
	fs.StringVar(&o.compare, "compare", "", "another revision's stockhold binary: run the scenarios against it and -server in alternate rounds and print, per scenario, both medians, their ratio and each side's spread (make bench-compare)")
	fs.IntVar(&o.rounds, "rounds", 3, "with -compare, the runs of each side")
	fs.BoolVar(&o.migrateWithServer, "migrate-with-server", false, "migrate the bench database with the server's own `migrate up` (a server from another revision) rather than this bench's schema")
	render := fs.String("render", "", "render the report FILE again from its own data, running nothing (after a change to the goals)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *render != "" {
		d, err := readReport(*render)
		if err != nil {
			return err
		}
		b, err := renderReport(d)
		if err != nil {
			return err
		}
		return os.WriteFile(*render, b, 0o644)
	}
	var err error
	if o.seats, err = parseSeats(*seats); err != nil {
		return err
	}
	o.keep = o.keep || o.reuse
	for _, s := range strings.Split(scenarios, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !contains(scenarioNames, s) && !contains(extraScenarios, s) {
			return fmt.Errorf("unknown scenario %q (known: %s)", s, strings.Join(append(scenarioNames, extraScenarios...), ", "))
		}
		o.scenarios = append(o.scenarios, s)
	}
	if o.turns < 1 || o.turns > 100 {
		return fmt.Errorf("-turns %d: want 1 to 100", o.turns)
	}
	if o.catalogue < 10 || o.catalogue > 100_000_000 {
		return fmt.Errorf("-catalogue %d: want 10 to 100,000,000 SKUs", o.catalogue)
	}
	if o.compare != "" {
		return runCompare(ctx, o, compareArgs(fs), stdout, stderr)
	}
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		return errors.New("DATABASE_URL is not set (`make bench` starts the dev database and sets it)")
	}

	on := machine() // before the run: the checkout may change while it runs
	b, err := setUp(ctx, o, server, stderr)
	if err != nil {
		return err
	}
	defer b.tearDown()

	var results []*result
	for _, name := range o.scenarios {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(stderr, "%s:\n", name)
		r, err := b.scenario(ctx, name)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", name, err)
		}
		results = append(results, r...)
	}
	if o.report != "" {
		r := &benchRun{results: map[string]*result{}, o: o, on: on}
		for _, res := range results {
			r.results[res.Scenario] = res
		}
		ids, missed, err := writeReport(o.report, r)
		if err != nil {
			return fmt.Errorf("report %s: %w", o.report, err)
		}
		fmt.Fprintf(stderr, "%s: rewrote %d goals (%s); not met: %d %v\n", o.report, len(ids), strings.Join(ids, ", "), len(missed), missed)
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report{Command: "stockhold-bench " + strings.Join(args, " "), Clients: o.clients,
			Duration: o.duration.String(), Results: results})
	}
	printTable(stdout, results)
	return nil
}

type report struct {
	Command  string    `json:"command"`
	Clients  int       `json:"clients"`
	Duration string    `json:"duration"`
	Results  []*result `json:"results"`
}

// bench is a running server on a fresh database, and what talks to it.
type bench struct {
	o      options
	log    io.Writer
	admin  string // DATABASE_URL
	dbURL  string // the bench database
	pool   *pgxpool.Pool
	base   string // http://127.0.0.1:port
	client *client
	shop   string
	ops    string
	cmd    *exec.Cmd
	exited chan error
	rss    *rssSampler
	// spreadRate is the spread scenario's rate, which half runs at half of.
	spreadRate float64
	// pprof is the server's profiler's address (with -profile).
	pprof string
	run   string // distinguishes this run's keys and SKUs
}

func setUp(ctx context.Context, o options, server string, log io.Writer) (*bench, error) {
	b := &bench{o: o, log: log, admin: server, run: strconv.FormatInt(time.Now().Unix()%100000, 36)}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer admin.Close(ctx)
	name := pgx.Identifier{o.database}.Sanitize()
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", o.database).Scan(&exists); err != nil {
		return nil, err
	}
	if !o.reuse || !exists {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return nil, err
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return nil, err
		}
	}
	if b.dbURL, err = withDatabase(server, o.database); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(b.dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(o.clients) + 4
	if b.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	if err := b.migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if b.shop, err = b.rotateKey(ctx, "bench-shop", auth.RoleShop); err != nil {
		return nil, err
	}
	if b.ops, err = b.rotateKey(ctx, "bench-ops", auth.RoleOps); err != nil {
		return nil, err
	}
	if err := b.startServer(ctx); err != nil {
		b.tearDown()
		return nil, err
	}
	return b, nil
}

// migrate brings the bench database's schema up to date: with the server's
// own migrations when -migrate-with-server says so, otherwise this bench's.
func (b *bench) migrate(ctx context.Context) error {
	if b.o.migrateWithServer {
		cmd := exec.CommandContext(ctx, b.o.server, "migrate", "up")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+b.dbURL, "STOCKHOLD_LOG_LEVEL=warn")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s migrate up: %w: %s", b.o.server, err, bytes.TrimSpace(out))
		}
		return nil
	}
	m, err := schema.New(b.pool, nil)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx)
	m.Close()
	return err
}

// rotateKey returns a new API key of that name and role, rotated so that a
// reused database's keys from an earlier run stop. With
// -migrate-with-server the server makes it (`apikey rotate`, which prints
// the key last), as its own revision keeps its keys.
func (b *bench) rotateKey(ctx context.Context, name string, role auth.Role) (string, error) {
	if !b.o.migrateWithServer {
		k, err := auth.Rotate(ctx, b.pool, name, role, 0)
		return k.Token, err
	}
	cmd := exec.CommandContext(ctx, b.o.server, "apikey", "rotate", "--name", name, "--role", string(role))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+b.dbURL, "STOCKHOLD_LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s apikey rotate: %w", b.o.server, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// startServer runs `stockhold serve` on the bench database and waits until
// it is ready.
func (b *bench) startServer(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	b.base = "http://" + addr
	b.cmd = exec.Command(b.o.server, "serve")
	var profiler []string
	if b.o.profile != "" {
		if b.pprof, err = freeAddr(); err != nil {
			return err
		}
		profiler = append(profiler, "STOCKHOLD_PPROF_ADDR="+b.pprof)
	}
	b.cmd.Env = append(os.Environ(),
		"DATABASE_URL="+b.dbURL,
		"STOCKHOLD_ADDR="+addr,
		"STOCKHOLD_LOG_LEVEL=warn",
		// The baseline writes stock rows without ledger rows: keep
		// reconciliation from pausing them mid-run.
		"STOCKHOLD_RECONCILE_INTERVAL=24h",
	)
	b.cmd.Env = append(b.cmd.Env, profiler...)
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", b.o.server, err)
	}
	b.exited = make(chan error, 1)
	go func() { b.exited <- b.cmd.Wait() }()
	b.rss = newRSSSampler(b.cmd.Process.Pid)
	b.client = newClient(addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := b.do("GET", "/readyz", "", "", nil)
		if err == nil && a.status == http.StatusOK {
			return nil
		}
		select {
		case err := <-b.exited:
			return fmt.Errorf("the server exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the server did not become ready in 30 s")
		}
	}
}

func (b *bench) tearDown() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(20 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	}
	if b.rss != nil {
		b.rss.stop()
	}
	if b.pool != nil {
		b.pool.Close()
	}
	if b.o.keep || b.dbURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if admin, err := pgx.Connect(ctx, b.admin); err == nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{b.o.database}.Sanitize()+" WITH (FORCE)")
		admin.Close(ctx)
	}
}

// withDatabase returns url with its database replaced by name.
func withDatabase(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return server + " dbname=" + name, nil // keyword/value form: the last dbname wins
	}
	u.Path = "/" + name
	return u.String(), nil
}

// rssSampler follows a process's resident memory.
type rssSampler struct {
	mu   sync.Mutex
	peak int64 // kB since the last reset
	done chan struct{}
}

func newRSSSampler(pid int) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			if kb := readRSS(pid); kb > 0 {
				s.mu.Lock()
				s.peak = max(s.peak, kb)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// reset starts a new window and returns the peak of the previous one in MB.
func (s *rssSampler) reset() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peak
	s.peak = 0
	return float64(p) / 1024
}

func (s *rssSampler) stop() { close(s.done) }

func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// serverCPU is the CPU time the server process has used so far.
func (b *bench) serverCPU() time.Duration {
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return readCPU(b.cmd.Process.Pid)
}

// backendsCPU is the CPU time of each PostgreSQL backend connected to the
// bench database, by process id; empty when PostgreSQL runs elsewhere (its
// processes are not in this machine's /proc).
func (b *bench) backendsCPU(ctx context.Context) map[int]time.Duration {
	rows, err := b.pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if c := readCPU(int(pid)); c > 0 {
			out[int(pid)] = c
		}
	}
	return out
}

// readCPU reads a process's user and system time from /proc/PID/stat.
func readCPU(pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux
// everywhere but a few old architectures.
const clockTicks = 100

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
