package app

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/dbtypes"
	"github.com/stockhold/stockhold/app/metrics"
)

// jobPoolSpare is what River's pool holds beyond one connection per
// worker: River's own services (the LISTEN connection, leader election,
// fetching, completing, maintenance) and readiness checks.
const jobPoolSpare = 8

// Connect opens a pool on url, checked with a ping. Unless url says
// otherwise, it holds up to 40 connections and gives up opening one
// after 5 seconds.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return connect(ctx, url, 40, 5*time.Second)
}

// Open is Connect for serve: the pool River and the workers use, sized
// one connection per worker plus River's own, unless DATABASE_URL sets
// pool_max_conns. HTTP requests get a pool of their own (see New).
func Open(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	return connect(ctx, cfg.DatabaseURL, int32(cfg.Workers+jobPoolSpare), cfg.ConnectTimeout)
}

// The backoff of OpenWaiting: its first pause, and the longest.
const (
	waitFirst = 250 * time.Millisecond
	waitMax   = 10 * time.Second
)

// OpenWaiting is Open for serve: while PostgreSQL cannot be reached (not
// started yet at boot, restarting, refusing connections while it starts
// up), it tries again with backoff, from a quarter of a second to 10 s
// apart, for as long as ctx lasts, instead of failing at once (which a
// service manager turns into a restart loop). It logs one line when it
// starts waiting and one when the database is there. Any other error (a
// URL that does not parse, a wrong password, no such database) ends it at
// once: waiting would not mend it.
func OpenWaiting(ctx context.Context, cfg config.Config, log *slog.Logger) (*pgxpool.Pool, error) {
	began, pause := time.Now(), waitFirst
	for waiting := false; ; waiting = true {
		pool, err := Open(ctx, cfg)
		switch {
		case err == nil:
			if waiting {
				log.Info("PostgreSQL is reachable: starting", "waited", time.Since(began).Round(time.Millisecond).String())
			}
			return pool, nil
		case ctx.Err() != nil:
			return nil, err
		case dberr.OverloadOf(err) != dberr.Unavailable:
			return nil, err
		case !waiting:
			log.Warn("PostgreSQL cannot be reached: waiting for it, retrying with backoff (up to 10 s apart)", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped while waiting for PostgreSQL: %w", err)
		case <-time.After(pause):
		}
		pause = min(2*pause, waitMax)
	}
}

func connect(ctx context.Context, url string, maxConns int32, connectTimeout time.Duration) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(url, maxConns)
	if err != nil {
		return nil, err
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without one, a database that stops answering (no reset) holds
		// a new connection, and the request waiting on it, for minutes.
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	Instrument(cfg)
	cfg.AfterConnect = sessionSettings(dbtypes.Register, jitOff(cfg.ConnConfig)...)
	cfg.ConnConfig.ValidateConnect = confirmWrites(cfg.ConnConfig.ValidateConnect)
	guard := guardPool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	guard.pool.Store(pool)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return pool, nil
}

// poolConfig parses url, a URL or key=value string, into a pool's
// configuration holding up to maxConns connections unless url sets
// pool_max_conns: pgx's default (4 on a small machine) would starve the
// workers. pgxpool consumes the setting while it parses, so the settings
// are read first as pgconn parses them (unknown ones are runtime
// parameters).
func poolConfig(url string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	settings, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if _, given := settings.RuntimeParams["pool_max_conns"]; !given {
		cfg.MaxConns = maxConns
	}
	return cfg, nil
}

// jitOff is the setting that turns PostgreSQL's JIT compilation off for
// c's sessions, or none when its URL sets jit. PostgreSQL compiles a
// statement whose estimated cost passes jit_above_cost (and optimizes and
// inlines it past 500,000), and over the ledger's monthly partitions the
// estimates of stockhold's statements grow with the partitions (a probe
// counted once per partition, a lateral a one-time filter skips), not
// with the rows they read: on a year of history an incremental
// reconciliation spent 5.2 of its 5.6 s compiling its check of 10,000
// rows, and a page of the event feed most of a second. Their work is
// probes and small sums, which JIT does not speed up.
func jitOff(c *pgx.ConnConfig) []string {
	if _, given := c.RuntimeParams["jit"]; given {
		return nil
	}
	return []string{"SET jit = off"}
}

// sessionSettings is an AfterConnect that runs settings (SET statements)
// on each new connection, in one round trip, then next. They are
// statements rather than parameters of the startup message because
// PgBouncer refuses a startup parameter it does not track ("unsupported
// startup parameter") and its ignore_startup_parameters drops them.
func sessionSettings(next func(context.Context, *pgx.Conn) error, settings ...string) func(context.Context, *pgx.Conn) error {
	if len(settings) == 0 {
		return next
	}
	sql := strings.Join(settings, "; ")
	return func(ctx context.Context, conn *pgx.Conn) error {
		// Without arguments pgx sends it in the simple protocol: one
		// message, however many statements.
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		if next == nil {
			return nil
		}
		return next(ctx, conn)
	}
}

// requestPool derives the HTTP requests' pool from pool's configuration
// (its connections validated the same way, see confirmWrites, and JIT
// off, see jitOff). Its sessions give up waiting for a lock after
// cfg.LockTimeout and on a statement after cfg.StatementTimeout (set once
// per connection, when it opens, see sessionSettings), and a request waits at
// most cfg.AcquireTimeout for a free connection. So a row held locked by
// someone else (a DBA's SELECT ... FOR UPDATE left open) costs the requests
// for it a fraction of a second each, answered 503 busy, and cannot take
// every connection; River and the workers, on their own pool, are not
// bounded this way (a job may wait on a lock; River's job timeout bounds it)
// and cannot take the requests' connections either.
func requestPool(pool *pgxpool.Pool, cfg config.Config) (*pgxpool.Pool, error) {
	c := pool.Config()
	if cfg.HTTPDBConns > 0 {
		c.MaxConns = int32(cfg.HTTPDBConns)
	}
	c.MinConns, c.MinIdleConns = 0, 0
	settings := jitOff(c.ConnConfig)
	if cfg.LockTimeout > 0 {
		settings = append(settings, "SET lock_timeout = '"+strconv.FormatInt(cfg.LockTimeout.Milliseconds(), 10)+"ms'")
	}
	if cfg.StatementTimeout > 0 {
		settings = append(settings, "SET statement_timeout = '"+strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)+"ms'")
	}
	c.AfterConnect = sessionSettings(c.AfterConnect, settings...)
	if cfg.AcquireTimeout > 0 {
		c.ConnConfig.Tracer = acquireTimeout{wait: cfg.AcquireTimeout, QueryTracer: c.ConnConfig.Tracer}
	}
	guard := guardPool(c)
	p, err := pgxpool.NewWithConfig(context.Background(), c)
	if err != nil {
		return nil, err
	}
	guard.pool.Store(p)
	return p, nil
}

// acquireTimeout bounds how long pgxpool's Acquire waits for a connection:
// pgxpool uses the context its acquire tracer returns for the rest of the
// acquisition. The caller's context still bounds everything else. An
// acquisition that times out returns context.DeadlineExceeded while the
// request's own context is live, which the HTTP layer answers 503
// unavailable.
type acquireTimeout struct {
	wait time.Duration
	// QueryTracer is the pool's own tracer (the metrics'), if any, which
	// still sees every statement.
	pgx.QueryTracer
}

type acquireCancelKey struct{}

func (d acquireTimeout) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d.wait)
	return context.WithValue(ctx, acquireCancelKey{}, cancel)
}

func (acquireTimeout) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if cancel, ok := ctx.Value(acquireCancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TraceQueryStart and TraceQueryEnd pass statements on to the pool's own
// tracer; pgx.ConnConfig holds a pgx.QueryTracer, so acquireTimeout is one.
func (d acquireTimeout) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if d.QueryTracer == nil {
		return ctx
	}
	return d.QueryTracer.TraceQueryStart(ctx, conn, data)
}

func (d acquireTimeout) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if d.QueryTracer != nil {
		d.QueryTracer.TraceQueryEnd(ctx, conn, data)
	}
}

// TraceBatchStart, TraceBatchQuery and TraceBatchEnd pass batches on to the
// pool's own tracer when it traces them (the hold batches are pgx batches).
func (d acquireTimeout) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if bt, ok := d.QueryTracer.(pgx.BatchTracer); ok {
		return bt.TraceBatchStart(ctx, conn, data)
	}
	return ctx
}

func (d acquireTimeout) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	if bt, ok := d.QueryTracer.(pgx.BatchTracer); ok {
		bt.TraceBatchQuery(ctx, conn, data)
	}
}

func (d acquireTimeout) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	if bt, ok := d.QueryTracer.(pgx.BatchTracer); ok {
		bt.TraceBatchEnd(ctx, conn, data)
	}
}

// Instrument makes a pool report to /metrics: it times the statements on
// stock rows, which is how long they waited for the row locks.
func Instrument(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = metrics.Tracer{} }
