// Package config reads stockhold's settings from the environment: every
// variable is declared once here, with its default and its validation, and
// an error names the variable at fault.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is every setting of a stockhold process.
type Config struct {
	// DatabaseURL is the PostgreSQL connection string (DATABASE_URL).
	DatabaseURL string
	// Addr is the HTTP listen address (STOCKHOLD_ADDR).
	Addr string
	// AlertWebhook receives every new alert as a JSON POST
	// (STOCKHOLD_ALERT_WEBHOOK); empty means alerts are only stored.
	AlertWebhook string
	// Coalesce lets one transaction carry many holds, confirms or releases
	// (STOCKHOLD_COALESCE); off, each has a transaction of its own.
	Coalesce bool
	// BatchSize bounds the requests one batch transaction carries
	// (STOCKHOLD_BATCH_SIZE).
	BatchSize int
	// BatchFlights is how many hold batches, and how many confirm/release
	// batches, run at once (STOCKHOLD_BATCH_FLIGHTS): by default one per
	// CPU, at least 2. Each flight keeps a PostgreSQL backend busy; more of
	// them than there are cores only take turns on them
	// (docs/internals/DESIGN_NOTES.md).
	BatchFlights int
	// ExpiryTick is the longest the expiry loop sleeps between passes
	// (STOCKHOLD_EXPIRY_TICK).
	ExpiryTick time.Duration
	// SoldOutRecheck is how long a hold refused for want of any stock may
	// be refused again from memory on the strength of one read
	// (STOCKHOLD_SOLDOUT_RECHECK): stock added on another instance is
	// holdable here at most this long after its commit. 0 turns the
	// memory off.
	SoldOutRecheck time.Duration
	// AllocationMemory is how old the figures may be that a line
	// allocated among several locations picks the one row it locks on
	// (STOCKHOLD_ALLOCATION_MEMORY). 0 turns the memory off.
	AllocationMemory time.Duration
	// Strategy is the shop's allocation strategy (STOCKHOLD_STRATEGY):
	// that of a hold that names none and whose key has none.
	Strategy string
	// Workers is how many River jobs run at once (STOCKHOLD_WORKERS).
	Workers int
	// SweepInterval is how often the expiry sweeper runs (STOCKHOLD_SWEEP_INTERVAL).
	SweepInterval time.Duration
	// SweepGrace is how far past expiry a hold must be before the sweeper
	// releases it; until then its own job should (STOCKHOLD_SWEEP_GRACE).
	SweepGrace time.Duration
	// ReconcileInterval is how often reconciliation runs (STOCKHOLD_RECONCILE_INTERVAL).
	ReconcileInterval time.Duration
	// ReconcileFullInterval is how often a periodic reconciliation checks
	// every stock row; the runs in between check only the rows whose
	// ledger moved since the last clean run. 0 makes every run full
	// (STOCKHOLD_RECONCILE_FULL_INTERVAL).
	ReconcileFullInterval time.Duration
	// ReconcileDeepInterval is how often a periodic reconciliation sums
	// every row's whole ledger, trusting no checkpoint; 0: only when asked
	// for (STOCKHOLD_RECONCILE_DEEP_INTERVAL).
	ReconcileDeepInterval time.Duration
	// ReconcileRepairLimit bounds the stuck holds one run releases per SKU
	// (STOCKHOLD_RECONCILE_REPAIR_LIMIT).
	ReconcileRepairLimit int
	// TripInterval, TripLockWaits, TripExpiryBacklog, TripConfirmP99,
	// TripPeriods and TripStopSale set the protection switch's rules
	// (STOCKHOLD_TRIP_*; see app/trips).
	TripInterval      time.Duration
	TripLockWaits     int
	TripExpiryBacklog int
	TripConfirmP99    time.Duration
	TripPeriods       int
	TripStopSale      bool
	// RollbackPause is the pause between rollback batches (STOCKHOLD_ROLLBACK_PAUSE).
	RollbackPause time.Duration
	// WatchInterval is how often discarded jobs are turned into alerts
	// (STOCKHOLD_WATCH_INTERVAL).
	WatchInterval time.Duration
	// RetryBase is the delay before a failed job's second attempt; the third
	// waits four times as long (STOCKHOLD_RETRY_BASE).
	RetryBase time.Duration
	// LogLevel is debug, info, warn or error (STOCKHOLD_LOG_LEVEL).
	LogLevel string

	// AlertRepageAfter is how long an open alert stays quiet before a new
	// occurrence sends it to the webhook again; 0 never re-pages
	// (STOCKHOLD_ALERT_REPAGE_AFTER).
	AlertRepageAfter time.Duration

	// RequestTimeout bounds one HTTP request's work (STOCKHOLD_REQUEST_TIMEOUT).
	RequestTimeout time.Duration
	// ReadTimeout bounds reading one request, headers and body, so a client
	// that dribbles its body is cut off (STOCKHOLD_HTTP_READ_TIMEOUT).
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from its headers to the end of its
	// answer; it must exceed RequestTimeout (STOCKHOLD_HTTP_WRITE_TIMEOUT).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long
	// (STOCKHOLD_HTTP_IDLE_TIMEOUT).
	IdleTimeout time.Duration
	// MaxConns caps the open HTTP connections; at the cap the longest-idle
	// keep-alive connection is closed to make room (STOCKHOLD_HTTP_MAX_CONNS).
	MaxConns int
	// DrainDelay is how long /readyz answers 503 on SIGTERM before the
	// listener closes, so load balancers stop sending (STOCKHOLD_DRAIN_DELAY).
	DrainDelay time.Duration
	// ReadyTimeout bounds /readyz's database check: a database slower than
	// this to answer makes the instance not ready (STOCKHOLD_READY_TIMEOUT).
	ReadyTimeout time.Duration
	// ShutdownTimeout bounds waiting for in-flight requests on SIGTERM;
	// connections still open then are closed (STOCKHOLD_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	// JobStopTimeout is the soft-stop window running jobs get on SIGTERM
	// before their contexts are cancelled (STOCKHOLD_JOB_STOP_TIMEOUT).
	JobStopTimeout time.Duration
	// AuthFailuresPerMinute is how many failed authentications one client
	// IP may make per minute (and at once) before it gets 429; 0 means no
	// limit (STOCKHOLD_AUTH_FAILURES_PER_MINUTE).
	AuthFailuresPerMinute int
	// TrustedProxies are the CIDRs whose X-Forwarded-For names the client
	// IP (STOCKHOLD_TRUSTED_PROXIES, comma-separated); otherwise the peer
	// address is the client.
	TrustedProxies []*net.IPNet

	// HTTPDBConns is the size of the pool that HTTP requests use
	// (STOCKHOLD_HTTP_DB_CONNS); River and the workers have their own.
	HTTPDBConns int
	// LockTimeout is PostgreSQL's lock_timeout on HTTP requests' sessions
	// and inside hold, confirm and release batches: a request waiting
	// longer for a row lock answers 503 busy (STOCKHOLD_DB_LOCK_TIMEOUT).
	LockTimeout time.Duration
	// StatementTimeout is PostgreSQL's statement_timeout on HTTP requests'
	// sessions (STOCKHOLD_DB_STATEMENT_TIMEOUT).
	StatementTimeout time.Duration
	// AcquireTimeout bounds an HTTP request's wait for a free connection;
	// past it the answer is 503 unavailable (STOCKHOLD_DB_ACQUIRE_TIMEOUT).
	AcquireTimeout time.Duration
	// ConnectTimeout bounds opening one database connection, unless
	// DATABASE_URL sets connect_timeout (STOCKHOLD_DB_CONNECT_TIMEOUT).
	ConnectTimeout time.Duration

	// Retention is how long ended holds (released or expired) and the
	// stored answers of creating POSTs are kept before the retention job
	// deletes them; 0 keeps them for ever (STOCKHOLD_RETENTION: a Go
	// duration or a number of days such as 30d).
	Retention time.Duration

	// LedgerArchiveAfter, when above 0, has the ledger_partitions job
	// archive every month of the ledger that ended at least that many
	// months ago into LedgerArchiveDir (STOCKHOLD_LEDGER_ARCHIVE_AFTER,
	// STOCKHOLD_LEDGER_ARCHIVE_DIR); 0, the default, archives nothing.
	LedgerArchiveAfter int
	LedgerArchiveDir   string

	// LogFormat is json (the default, for log collectors) or text (for a
	// person at a terminal; make run uses it) (STOCKHOLD_LOG_FORMAT).
	LogFormat string

	// WebhookAllowPrivate lets webhooks reach loopback and private
	// addresses (STOCKHOLD_WEBHOOK_ALLOW_PRIVATE); off, they are refused at
	// registration and when each delivery connects.
	WebhookAllowPrivate bool

	// PprofAddr, when set, serves Go's profiler (net/http/pprof) on this
	// address, apart from the API and without authentication, so bind it
	// to loopback (STOCKHOLD_PPROF_ADDR); empty, the default, serves none.
	PprofAddr string
}

// Load reads the configuration through getenv (os.Getenv in production).
// Each variable's default and meaning are its entry in Settings; an error
// names every variable at fault.
func Load(getenv func(string) string) (Config, error) {
	c, err := load(getenv)
	if c.DatabaseURL == "" {
		err = errors.Join(err, fmt.Errorf("DATABASE_URL is not set (with `make run` the Makefile starts a private PostgreSQL and sets it)"))
	}
	return c, err
}

// Defaults is every setting at its default (DATABASE_URL unset): what the
// services fill a zero field of their own configuration with, so that
// Settings is the one place a default is written, and a test that builds a
// service without saying otherwise runs the production settings.
var Defaults = sync.OnceValue(func() Config {
	c, err := load(func(string) string { return "" })
	if err != nil {
		panic("config: the defaults in Settings do not load: " + err.Error())
	}
	return c
})

// DefaultsWith is Defaults with set applied: a test's own settings, and
// production's for the rest.
func DefaultsWith(set func(*Config)) Config {
	c := Defaults()
	set(&c)
	return c
}

func load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := Config{
		DatabaseURL:           r.str("DATABASE_URL"),
		Addr:                  r.str("STOCKHOLD_ADDR"),
		AlertWebhook:          r.url("STOCKHOLD_ALERT_WEBHOOK"),
		Coalesce:              r.boolean("STOCKHOLD_COALESCE"),
		BatchSize:             r.integer("STOCKHOLD_BATCH_SIZE", 1, 10_000),
		BatchFlights:          r.integer("STOCKHOLD_BATCH_FLIGHTS", 1, 64),
		ExpiryTick:            r.positive("STOCKHOLD_EXPIRY_TICK"),
		SoldOutRecheck:        r.duration("STOCKHOLD_SOLDOUT_RECHECK"),
		AllocationMemory:      r.duration("STOCKHOLD_ALLOCATION_MEMORY"),
		Strategy:              r.oneOf("STOCKHOLD_STRATEGY", "priority", "most_stock", "nearest"),
		Workers:               r.integer("STOCKHOLD_WORKERS", 1, 1000),
		SweepInterval:         r.duration("STOCKHOLD_SWEEP_INTERVAL"),
		SweepGrace:            r.duration("STOCKHOLD_SWEEP_GRACE"),
		ReconcileInterval:     r.duration("STOCKHOLD_RECONCILE_INTERVAL"),
		ReconcileFullInterval: r.duration("STOCKHOLD_RECONCILE_FULL_INTERVAL"),
		ReconcileDeepInterval: r.duration("STOCKHOLD_RECONCILE_DEEP_INTERVAL"),
		ReconcileRepairLimit:  r.integer("STOCKHOLD_RECONCILE_REPAIR_LIMIT", 0, 1_000_000),
		RollbackPause:         r.duration("STOCKHOLD_ROLLBACK_PAUSE"),
		WatchInterval:         r.duration("STOCKHOLD_WATCH_INTERVAL"),
		TripInterval:          r.duration("STOCKHOLD_TRIP_INTERVAL"),
		TripLockWaits:         r.integer("STOCKHOLD_TRIP_LOCK_WAITS", 0, 1_000_000_000),
		TripExpiryBacklog:     r.integer("STOCKHOLD_TRIP_EXPIRY_BACKLOG", 0, 1_000_000_000),
		TripConfirmP99:        r.duration("STOCKHOLD_TRIP_CONFIRM_P99"),
		TripPeriods:           r.integer("STOCKHOLD_TRIP_PERIODS", 1, 1000),
		TripStopSale:          r.boolean("STOCKHOLD_TRIP_STOP_SALE"),
		RetryBase:             r.duration("STOCKHOLD_RETRY_BASE"),
		LogLevel:              r.oneOf("STOCKHOLD_LOG_LEVEL", "debug", "info", "warn", "error"),
		LogFormat:             r.oneOf("STOCKHOLD_LOG_FORMAT", "json", "text"),
		PprofAddr:             r.str("STOCKHOLD_PPROF_ADDR"),
		AlertRepageAfter:      r.duration("STOCKHOLD_ALERT_REPAGE_AFTER"),
		Retention:             r.retention("STOCKHOLD_RETENTION"),
		LedgerArchiveAfter:    r.integer("STOCKHOLD_LEDGER_ARCHIVE_AFTER", 0, 1200),
		LedgerArchiveDir:      r.str("STOCKHOLD_LEDGER_ARCHIVE_DIR"),
		WebhookAllowPrivate:   r.boolean("STOCKHOLD_WEBHOOK_ALLOW_PRIVATE"),

		RequestTimeout:        r.positive("STOCKHOLD_REQUEST_TIMEOUT"),
		ReadTimeout:           r.positive("STOCKHOLD_HTTP_READ_TIMEOUT"),
		WriteTimeout:          r.positive("STOCKHOLD_HTTP_WRITE_TIMEOUT"),
		IdleTimeout:           r.positive("STOCKHOLD_HTTP_IDLE_TIMEOUT"),
		MaxConns:              r.integer("STOCKHOLD_HTTP_MAX_CONNS", 16, 1_000_000),
		DrainDelay:            r.duration("STOCKHOLD_DRAIN_DELAY"),
		ReadyTimeout:          r.positive("STOCKHOLD_READY_TIMEOUT"),
		ShutdownTimeout:       r.positive("STOCKHOLD_SHUTDOWN_TIMEOUT"),
		JobStopTimeout:        r.positive("STOCKHOLD_JOB_STOP_TIMEOUT"),
		AuthFailuresPerMinute: r.integer("STOCKHOLD_AUTH_FAILURES_PER_MINUTE", 0, 1_000_000),
		TrustedProxies:        r.cidrs("STOCKHOLD_TRUSTED_PROXIES"),

		HTTPDBConns:      r.integer("STOCKHOLD_HTTP_DB_CONNS", 1, 1000),
		LockTimeout:      r.positive("STOCKHOLD_DB_LOCK_TIMEOUT"),
		StatementTimeout: r.positive("STOCKHOLD_DB_STATEMENT_TIMEOUT"),
		AcquireTimeout:   r.positive("STOCKHOLD_DB_ACQUIRE_TIMEOUT"),
		ConnectTimeout:   r.positive("STOCKHOLD_DB_CONNECT_TIMEOUT"),
	}
	if c.WriteTimeout <= c.RequestTimeout && c.WriteTimeout > 0 {
		r.fail("STOCKHOLD_HTTP_WRITE_TIMEOUT", c.WriteTimeout.String(),
			"must be longer than STOCKHOLD_REQUEST_TIMEOUT ("+c.RequestTimeout.String()+"), or answers of slow requests are cut")
	}
	if c.LedgerArchiveAfter > 0 && c.LedgerArchiveDir == "" {
		r.fail("STOCKHOLD_LEDGER_ARCHIVE_DIR", "", "is required when STOCKHOLD_LEDGER_ARCHIVE_AFTER is above 0: where the archive files go")
	}
	if _, _, err := net.SplitHostPort(c.PprofAddr); c.PprofAddr != "" && err != nil {
		r.fail("STOCKHOLD_PPROF_ADDR", c.PprofAddr, "must be host:port, such as 127.0.0.1:6060")
	}
	return c, errors.Join(r.errs...)
}

// reader collects every error while reading variables, and the names it
// read (for the test that holds Settings and Load to each other).
type reader struct {
	getenv func(string) string
	errs   []error
	read   []string
}

func (r *reader) fail(name, value, want string) {
	r.errs = append(r.errs, fmt.Errorf("%s=%q: %s", name, value, want))
}

// get returns the variable's value, or its default from Settings when it is
// unset or empty; set says which.
func (r *reader) get(name string) (v string, set bool) {
	r.read = append(r.read, name)
	if v := r.getenv(name); v != "" {
		return v, true
	}
	return Lookup(name).def(), false
}

func (r *reader) str(name string) string {
	v, _ := r.get(name)
	return v
}

func (r *reader) url(name string) string {
	v, _ := r.get(name)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.fail(name, v, "want an http or https URL")
	}
	return v
}

func (r *reader) boolean(name string) bool {
	v, _ := r.get(name)
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "want true or false")
	}
	return b
}

func (r *reader) integer(name string, min, max int) int {
	v, _ := r.get(name)
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		r.fail(name, v, fmt.Sprintf("want a whole number from %d to %d", min, max))
	}
	return n
}

func (r *reader) duration(name string) time.Duration {
	v, _ := r.get(name)
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, "want a duration such as 500ms, 30s or 5m")
	}
	return d
}

// positive is duration for settings where zero makes no sense.
func (r *reader) positive(name string) time.Duration {
	n := len(r.errs)
	d := r.duration(name)
	if d == 0 && len(r.errs) == n {
		r.fail(name, r.getenv(name), "want a duration above zero")
	}
	return d
}

// MinRetention is the shortest retention period: idempotency records must
// outlive any client's retries, and a hold's expiry work its expiry.
const MinRetention = time.Hour

// retention reads a retention period: a Go duration (720h) or whole days
// (30d); 0 means keep for ever.
func (r *reader) retention(name string) time.Duration {
	v, _ := r.get(name)
	d, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, derr := strconv.Atoi(days)
		d, err = time.Duration(n)*24*time.Hour, derr
		if n > 100_000 {
			err = fmt.Errorf("too long")
		}
	}
	if err != nil || d < 0 || (d > 0 && d < MinRetention) {
		r.fail(name, v, "want 0 (keep for ever) or a duration of at least 1h, such as 720h or 30d")
	}
	return d
}

func (r *reader) cidrs(name string) []*net.IPNet {
	v, _ := r.get(name)
	if v == "" {
		return nil
	}
	var out []*net.IPNet
	for _, part := range strings.Split(v, ",") {
		_, n, err := net.ParseCIDR(strings.TrimSpace(part))
		if err != nil {
			r.fail(name, v, "want comma-separated CIDRs such as 10.0.0.0/8")
			return nil
		}
		out = append(out, n)
	}
	return out
}

func (r *reader) oneOf(name string, allowed ...string) string {
	v, _ := r.get(name)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, v, "want one of "+strings.Join(allowed, ", "))
	return Lookup(name).def()
}
