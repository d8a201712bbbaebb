// Package app wires stockhold together: it connects to PostgreSQL, builds
// the domain services, the River clients and the HTTP API, and runs them
// until told to stop.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"golang.org/x/sync/singleflight"
	"riverqueue.com/riverui"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/console"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/dbtypes"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/reports"
	"github.com/stockhold/stockhold/app/retention"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/app/trips"
	"github.com/stockhold/stockhold/app/webhooks"
	"github.com/stockhold/stockhold/jobs"
)

// App is a wired stockhold process.
type App struct {
	Config config.Config
	// Pool is River's and the workers' pool; readiness checks use it too.
	Pool *pgxpool.Pool
	// RequestPool is the HTTP requests' pool, with its own size and
	// session timeouts (see requestPool).
	RequestPool *pgxpool.Pool
	Inventory   *inventory.Service
	Reconcile   *reconcile.Service
	// Trips checks the protection switch's rules on what the HTTP
	// requests of this process saw; Serve runs it.
	Trips *trips.Service
	// Inserter enqueues jobs inside domain transactions.
	Inserter *river.Client[pgx.Tx]
	// Worker works jobs; Serve starts it.
	Worker *river.Client[pgx.Tx]
	HTTP   *echo.Echo
	// DBMetrics serves the gauges read from the database; Serve refreshes
	// them every few seconds.
	DBMetrics *metrics.Database

	log      *slog.Logger
	unwatch  func()
	migrator *schema.Migrator
	jobsUI   *riverui.Handler
	draining atomic.Bool
	// checks lets concurrent readiness checks share one: probes of one
	// instance write the same row, so checks run side by side would queue
	// on its lock, each eating into the others' ReadyTimeout.
	checks singleflight.Group
}

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
	cfg.AfterConnect = dbtypes.Register
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

// requestPool derives the HTTP requests' pool from pool's configuration
// (its connections validated the same way, see confirmWrites).
// Its sessions give up waiting for a lock after cfg.LockTimeout and on a
// statement after cfg.StatementTimeout (set once per connection, in the
// startup message, so they cost no round trip), and a request waits at
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
	if c.ConnConfig.RuntimeParams == nil {
		c.ConnConfig.RuntimeParams = map[string]string{}
	}
	params := c.ConnConfig.RuntimeParams
	if cfg.LockTimeout > 0 {
		params["lock_timeout"] = strconv.FormatInt(cfg.LockTimeout.Milliseconds(), 10) + "ms"
	}
	if cfg.StatementTimeout > 0 {
		params["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10) + "ms"
	}
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

// Services is every domain service of a process: the wiring's one
// container, built by NewServices. The HTTP layer, the console, the
// commands and the job workers (Workers) all act through it.
type Services struct {
	Inventory *inventory.Service
	Alerts    *alerts.Service
	Rollbacks *rollbacks.Service
	Campaigns *campaigns.Service
	Reconcile *reconcile.Service
	// Retention is nil when STOCKHOLD_RETENTION is 0.
	Retention *retention.Service
	Webhooks  *webhooks.Service
	// Trips checks the protection switch's rules (see app/trips).
	Trips *trips.Service
	// Reports answers the daily report (see app/reports).
	Reports *reports.Service
}

// Workers is what the job workers call: the same services.
func (s *Services) Workers() jobs.Deps {
	return jobs.Deps{Inventory: s.Inventory, Alerts: s.Alerts, Rollbacks: s.Rollbacks, Campaigns: s.Campaigns,
		Reconcile: s.Reconcile, Retention: s.Retention, Webhooks: s.Webhooks}
}

// NewServices builds the domain services on pool, configured by cfg (from
// config.Load, or config.Defaults in tests); they enqueue their jobs with
// inserter inside their own transactions.
func NewServices(cfg config.Config, pool *pgxpool.Pool, inserter *river.Client[pgx.Tx], log *slog.Logger) *Services {
	alertSvc := alerts.New(pool, inserter, cfg.AlertWebhook != "").WithRepageAfter(cfg.AlertRepageAfter)
	inv := inventory.New(pool, log, inventory.Config{
		Serial: !cfg.Coalesce, MaxBatch: cfg.BatchSize, Flights: cfg.BatchFlights,
		LockTimeout: cfg.LockTimeout, ExpiryTick: cfg.ExpiryTick, SoldOutRecheck: soldOutRecheck(cfg.SoldOutRecheck), Recorder: metrics.Recorder{},
		Alert: func(ctx context.Context, a inventory.Alert) {
			level := a.Level
			if level == "" {
				level = alerts.Critical
			}
			_, err := alertSvc.Raise(ctx, alerts.Raise{Level: level, Kind: a.Kind, Subject: a.Subject, SKU: a.SKU, Location: a.Location, Pool: a.Pool,
				Details: a.Details, Action: a.Summary})
			if err != nil {
				log.ErrorContext(ctx, "raise alert", "kind", a.Kind, "err", err)
			}
		},
	})
	rollbackSvc := rollbacks.New(pool, inserter, inv, cfg.RollbackPause)
	campaignSvc := campaigns.New(pool, inserter, inv, rollbackSvc, alertSvc)
	var keep *retention.Service
	if cfg.Retention > 0 {
		keep = retention.New(pool, retention.Config{After: cfg.Retention, Budget: jobs.RetentionBudget, Log: log})
	}
	return &Services{
		Trips: trips.New(pool, inv, alertSvc, trips.Config{
			Interval: cfg.TripInterval, LockWaits: int64(cfg.TripLockWaits), ExpiryBacklog: int64(cfg.TripExpiryBacklog),
			ConfirmP99: cfg.TripConfirmP99, Periods: cfg.TripPeriods, StopSale: cfg.TripStopSale, Log: log,
		}),
		Webhooks: webhooks.New(pool, inserter, alertSvc, webhooks.Config{
			AllowPrivate: cfg.WebhookAllowPrivate, RetryBase: cfg.RetryBase, Log: log, Recorder: metrics.Recorder{},
		}),
		Retention: keep,
		Reports:   reports.New(pool),
		Inventory: inv,
		Alerts:    alertSvc,
		Rollbacks: rollbackSvc,
		Campaigns: campaignSvc,
		Reconcile: reconcile.New(pool, inserter, alertSvc, inv, reconcile.Config{
			RepairLimit: cfg.ReconcileRepairLimit,
			// A hold is stuck once the sweeper has had a full interval past
			// its own grace to release it.
			StuckGrace: max(cfg.SweepGrace+cfg.SweepInterval, time.Minute),
			Rollbacks:  rollbackSvc,
			Campaigns:  campaignSvc,
			FullEvery:  cfg.ReconcileFullInterval,
			DeepEvery:  cfg.ReconcileDeepInterval,
			Log:        log,
		}),
	}
}

// Standalone builds the domain services on pool with an insert-only River
// client of its own: what a command needs to act through the domain (a
// rollback, a reconciliation) without workers, HTTP or the job dashboard.
func Standalone(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*Services, error) {
	inserter, err := jobs.NewInserter(pool)
	if err != nil {
		return nil, fmt.Errorf("river inserter: %w", err)
	}
	return NewServices(cfg, pool, inserter, log), nil
}

// New wires an App on pool, which River and the workers use; HTTP requests
// get a pool of their own derived from it (requestPool), which Close
// closes. New starts nothing.
func New(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*App, error) {
	inserter, err := jobs.NewInserter(pool)
	if err != nil {
		return nil, fmt.Errorf("river inserter: %w", err)
	}
	reqPool, err := requestPool(pool, cfg)
	if err != nil {
		return nil, fmt.Errorf("request pool: %w", err)
	}
	deps := NewServices(cfg, pool, inserter, log)
	worker, err := jobs.NewClient(pool, deps.Workers(), jobs.Config{
		Workers:           cfg.Workers,
		SweepInterval:     cfg.SweepInterval,
		SweepGrace:        cfg.SweepGrace,
		WatchInterval:     cfg.WatchInterval,
		ReconcileInterval: cfg.ReconcileInterval,
		AlertWebhook:      cfg.AlertWebhook,
		RetryBase:         cfg.RetryBase,
		Middleware:        []rivertype.Middleware{river.WorkerMiddlewareFunc(jobLogContext)},
		Log:               log,
	})
	if err != nil {
		reqPool.Close()
		return nil, fmt.Errorf("river client: %w", err)
	}
	migrator, err := schema.New(pool, nil)
	if err != nil {
		reqPool.Close()
		return nil, err
	}
	web := NewServices(cfg, reqPool, inserter, log)
	deps.Inventory.ShareWith(web.Inventory)
	a := &App{
		Config: cfg, Pool: pool, RequestPool: reqPool, Inventory: web.Inventory, Reconcile: web.Reconcile, Trips: web.Trips,
		Inserter: inserter, Worker: worker, log: log, migrator: migrator,
		DBMetrics: metrics.NewDatabase(pool, inventory.StuckAfter),
		// While the database is away, one line says so and one says when
		// it is back: the pool's ping tells.
		unwatch: logging.WatchDatabase(log, pool.Ping),
	}
	jobsUI, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(worker, nil),
		Logger:    log,
		Prefix:    "/ops/jobs",
	})
	if err != nil {
		_ = a.Close()
		return nil, fmt.Errorf("job dashboard: %w", err)
	}
	a.jobsUI = jobsUI
	authn := auth.NewAuthenticator(reqPool, auth.CacheTTL)
	// One failed-auth budget per client for the API and the console alike.
	failures := auth.NewFailureLimiter(cfg.AuthFailuresPerMinute)
	ops, err := console.New(console.Deps{
		Pool: reqPool, Inventory: web.Inventory, Campaigns: web.Campaigns, Rollbacks: web.Rollbacks,
		Alerts: web.Alerts, Reconcile: web.Reconcile, Webhooks: web.Webhooks, Auth: authn, Failures: failures, Log: log,
	})
	if err != nil {
		_ = a.Close()
		return nil, fmt.Errorf("console: %w", err)
	}
	a.HTTP = api.New(api.Deps{
		Inventory:      web.Inventory,
		Campaigns:      web.Campaigns,
		Rollbacks:      web.Rollbacks,
		Alerts:         web.Alerts,
		Reconcile:      web.Reconcile,
		Webhooks:       web.Webhooks,
		Reports:        web.Reports,
		Events:         events.NewFeed(reqPool),
		Auth:           authn,
		Ready:          a.ready,
		JobsUI:         jobsUI,
		Console:        ops,
		OpsSession:     ops.SessionKey,
		Log:            log,
		RequestTimeout: cfg.RequestTimeout,
		Failures:       failures,
		TrustedProxies: cfg.TrustedProxies,
	})
	return a, nil
}

// jobLogContext puts the job's id and kind, and the hold or SKU its args
// name, in the log context of everything the job's work logs.
func jobLogContext(ctx context.Context, job *rivertype.JobRow, work func(context.Context) error) error {
	attrs := []slog.Attr{slog.Int64("job_id", job.ID), slog.String("job_kind", job.Kind)}
	var args struct {
		ReservationID string `json:"reservation_id"`
		SKU           string `json:"sku"`
	}
	if json.Unmarshal(job.EncodedArgs, &args) == nil {
		if args.ReservationID != "" {
			attrs = append(attrs, slog.String("hold_id", args.ReservationID))
		}
		if args.SKU != "" {
			attrs = append(attrs, slog.String("sku", args.SKU))
		}
	}
	return work(logging.With(ctx, attrs...))
}

// ready reports whether this instance should get traffic: not shutting
// down, the database answering within Config.ReadyTimeout, its schema at
// least the one this binary carries, and a write committed (probeWrite).
// It asks on River's pool, so a burst that fills the requests' pool
// (answered 503 by the requests themselves) does not take every instance
// out of the load balancer at once.
func (a *App) ready(ctx context.Context) error {
	if a.draining.Load() {
		return &api.NotReady{Reason: "shutting down"}
	}
	_, err, _ := a.checks.Do("ready", func() (any, error) {
		return nil, a.check(context.WithoutCancel(ctx))
	})
	return err
}

// check is one readiness check, shared by the requests that asked for it
// meanwhile (ready): it is bounded by ReadyTimeout rather than by the
// request that happened to start it.
func (a *App) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.Config.ReadyTimeout)
	defer cancel()
	current, latest, err := a.migrator.Versions(ctx)
	if err != nil {
		return &api.NotReady{Reason: "database unreachable", Err: err}
	}
	// A schema ahead of this binary is a newer version's, migrated before
	// its instances roll out (docs/OPERATIONS.md): this one keeps serving
	// until it is replaced, since migrations only add what older versions
	// can ignore. One behind is missing what this binary needs.
	if current < latest {
		return &api.NotReady{Reason: "schema not current",
			Err: fmt.Errorf("schema at version %d, this binary needs %d: run `stockhold migrate up`", current, latest)}
	}
	if err := a.probeWrite(ctx); err != nil {
		return &api.NotReady{Reason: "database not writable", Err: err}
	}
	return nil
}

// writeProbeTimeout bounds a readiness probe's write, its commit's wait for
// a synchronous standby included.
const writeProbeTimeout = time.Second

// probeWrite commits a one-row write, as every acknowledged change does:
// it fails on a read-only server (a standby reached some other way than
// target_session_attrs, a node pg_auto_failover is promoting or demoting)
// and on a primary whose commits wait for a synchronous standby that does
// not confirm them within writeProbeTimeout (an old primary restarted
// before it is demoted), where reading alone would have said ready.
func (a *App) probeWrite(ctx context.Context) error {
	return pgx.BeginFunc(ctx, a.Pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.ReadinessProbeTimeout(ctx, strconv.FormatInt(writeProbeTimeout.Milliseconds(), 10)); err != nil {
			return err
		}
		return q.ReadinessProbe(ctx, a.Worker.ID())
	})
}

// Serve works jobs and answers HTTP on the configured address until ctx is
// cancelled, then stops both gracefully.
func (a *App) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.Config.Addr)
	if err != nil {
		return fmt.Errorf("STOCKHOLD_ADDR %s: %w", a.Config.Addr, err)
	}
	return a.ServeListener(ctx, ln)
}

// ServeListener is Serve on an existing listener. When ctx ends (SIGTERM):
// /readyz answers 503 at once and keep-alive ends, for DrainDelay, so load
// balancers move away while requests are still served; then the listener
// closes and in-flight requests get ShutdownTimeout to finish (connections
// still open after it, such as a client too slow to read its answer, are
// closed). Meanwhile running jobs get JobStopTimeout to finish before their
// contexts are cancelled. A stop that goes this way is not an error.
func (a *App) ServeListener(ctx context.Context, ln net.Listener) error {
	events, unsubscribe := a.Worker.Subscribe(metrics.JobEvents...)
	defer unsubscribe()
	metricsCtx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	go metrics.CountJobs(metricsCtx, events)
	go a.DBMetrics.Run(metricsCtx, a.log)
	go a.Trips.Run(metricsCtx)
	// Neither River nor the dashboard stops when ctx ends: cancelling
	// River's start context would cancel running jobs at once.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	if err := a.Worker.Start(bg); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	if err := a.jobsUI.Start(bg); err != nil {
		return fmt.Errorf("start job dashboard: %w", err)
	}
	if a.Config.PprofAddr != "" {
		stopProfiler, err := serveProfiler(a.Config.PprofAddr, a.log)
		if err != nil {
			return err
		}
		defer stopProfiler()
	}
	limited := api.NewListener(ln, a.Config.MaxConns)
	srv := &http.Server{
		Handler:           a.HTTP,
		ReadHeaderTimeout: min(a.Config.ReadTimeout, 10*time.Second),
		ReadTimeout:       a.Config.ReadTimeout,
		WriteTimeout:      a.Config.WriteTimeout,
		IdleTimeout:       a.Config.IdleTimeout,
		ConnState:         limited.ConnState,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limited) }()
	a.log.Info("stockhold serving", "addr", ln.Addr().String())

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	a.log.Info("stopping: draining", "drain_delay", a.Config.DrainDelay)
	a.draining.Store(true)
	srv.SetKeepAlivesEnabled(false)
	jobsStopped := make(chan struct{})
	go func() {
		defer close(jobsStopped)
		a.stopJobs(bg)
	}()
	if err == nil {
		select {
		case err = <-errc:
		case <-time.After(a.Config.DrainDelay):
		}
	}
	shutdownCtx, cancel := context.WithTimeout(bg, a.Config.ShutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil {
		a.log.Warn("closing connections still open after the shutdown timeout",
			"open", limited.Open(), "shutdown_timeout", a.Config.ShutdownTimeout)
		_ = srv.Close()
	}
	<-jobsStopped
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	a.log.Info("stopped")
	return err
}

// serveProfiler serves net/http/pprof on addr (STOCKHOLD_PPROF_ADDR), on a
// listener of its own, apart from the API's routes, middleware and
// connection cap; stop closes it.
func serveProfiler(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("STOCKHOLD_PPROF_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("serving the profiler without authentication", "pprof_addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// stopJobs stops River softly (see jobs.Stop).
func (a *App) stopJobs(ctx context.Context) {
	if err := jobs.Stop(ctx, a.Worker, a.Config.JobStopTimeout, a.log); err != nil {
		a.log.Warn("River did not stop cleanly", "err", err)
	}
}

// Close releases the App's resources: the requests' pool and the
// migrator (not River's pool, which the caller owns).
func (a *App) Close() error {
	a.unwatch()
	a.RequestPool.Close()
	return a.migrator.Close()
}

// soldOutRecheck is STOCKHOLD_SOLDOUT_RECHECK as inventory.Config takes
// it: 0 (off) becomes below zero, since zero there means the default.
func soldOutRecheck(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
