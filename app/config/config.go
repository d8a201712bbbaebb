// Package config reads stockhold's settings from the environment: every
// variable is declared once here, with its default and its validation, and
// an error names the variable at fault.
package config

import (
	"fmt"
	"net/url"
	"runtime"
	"strconv"
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
	// batches, run at once (STOCKHOLD_BATCH_FLIGHTS).
	BatchFlights int
	// LockTimeout bounds how long a request's batch waits for a row lock
	// before the requests needing that row answer busy (STOCKHOLD_LOCK_TIMEOUT).
	LockTimeout time.Duration
	// ExpiryTick is the longest the expiry loop sleeps between passes
	// (STOCKHOLD_EXPIRY_TICK).
	ExpiryTick time.Duration
	// Workers is how many River jobs run at once (STOCKHOLD_WORKERS).
	Workers int
	// SweepInterval is how often the expiry sweeper runs (STOCKHOLD_SWEEP_INTERVAL).
	SweepInterval time.Duration
	// SweepGrace is how far past expiry a hold must be before the sweeper
	// releases it; until then its own job should (STOCKHOLD_SWEEP_GRACE).
	SweepGrace time.Duration
	// ReconcileInterval is how often reconciliation runs (STOCKHOLD_RECONCILE_INTERVAL).
	ReconcileInterval time.Duration
	// ReconcileRepairLimit bounds the stuck holds one run releases per SKU
	// (STOCKHOLD_RECONCILE_REPAIR_LIMIT).
	ReconcileRepairLimit int
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
}

// Load reads the configuration through getenv (os.Getenv in production).
func Load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := Config{
		DatabaseURL:          r.str("DATABASE_URL", ""),
		Addr:                 r.str("STOCKHOLD_ADDR", ":8080"),
		AlertWebhook:         r.url("STOCKHOLD_ALERT_WEBHOOK"),
		Coalesce:             r.boolean("STOCKHOLD_COALESCE", true),
		BatchSize:            r.integer("STOCKHOLD_BATCH_SIZE", 128, 1, 10_000),
		BatchFlights:         r.integer("STOCKHOLD_BATCH_FLIGHTS", max(2, runtime.NumCPU()), 1, 64),
		LockTimeout:          r.positive("STOCKHOLD_LOCK_TIMEOUT", 500*time.Millisecond),
		ExpiryTick:           r.positive("STOCKHOLD_EXPIRY_TICK", 200*time.Millisecond),
		Workers:              r.integer("STOCKHOLD_WORKERS", 20, 1, 1000),
		SweepInterval:        r.duration("STOCKHOLD_SWEEP_INTERVAL", 30*time.Second),
		SweepGrace:           r.duration("STOCKHOLD_SWEEP_GRACE", time.Minute),
		ReconcileInterval:    r.duration("STOCKHOLD_RECONCILE_INTERVAL", 5*time.Minute),
		ReconcileRepairLimit: r.integer("STOCKHOLD_RECONCILE_REPAIR_LIMIT", 100, 0, 1_000_000),
		RollbackPause:        r.duration("STOCKHOLD_ROLLBACK_PAUSE", 100*time.Millisecond),
		WatchInterval:        r.duration("STOCKHOLD_WATCH_INTERVAL", 15*time.Second),
		RetryBase:            r.duration("STOCKHOLD_RETRY_BASE", 5*time.Second),
		LogLevel:             r.oneOf("STOCKHOLD_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
	}
	if r.err == nil && c.DatabaseURL == "" {
		r.err = fmt.Errorf("DATABASE_URL is not set (with `make run` the Makefile starts a private PostgreSQL and sets it)")
	}
	return c, r.err
}

// reader collects the first error while reading variables.
type reader struct {
	getenv func(string) string
	err    error
}

func (r *reader) fail(name, value, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s=%q: %s", name, value, want)
	}
}

func (r *reader) str(name, def string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	return def
}

func (r *reader) url(name string) string {
	v := r.getenv(name)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.fail(name, v, "want an http or https URL")
	}
	return v
}

func (r *reader) boolean(name string, def bool) bool {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "want true or false")
	}
	return b
}

func (r *reader) integer(name string, def, min, max int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		r.fail(name, v, fmt.Sprintf("want a whole number from %d to %d", min, max))
	}
	return n
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, "want a duration such as 500ms, 30s or 5m")
	}
	return d
}

// positive is duration, refusing zero.
func (r *reader) positive(name string, def time.Duration) time.Duration {
	d := r.duration(name, def)
	if d == 0 {
		r.fail(name, r.getenv(name), "want a positive duration such as 200ms")
	}
	return d
}

func (r *reader) oneOf(name, def string, allowed ...string) string {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, v, fmt.Sprintf("want one of %v", allowed))
	return def
}
