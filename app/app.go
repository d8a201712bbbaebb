// Package app wires stockhold together: it connects to PostgreSQL, builds
// the domain services, the River clients and the HTTP API, and runs them
// until told to stop.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"golang.org/x/sync/singleflight"
	"riverqueue.com/riverui"

	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/console"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/app/trips"
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
	worker, err := newWorker(cfg, pool, deps, log)
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
		DBMetrics: metrics.NewDatabase(pool, holdstats.StuckAfter),
		// While the database is away, one line says so and one says when
		// it is back: the pool's ping tells.
		unwatch: logging.WatchDatabase(log, pool.Ping),
	}
	if err := a.wireHTTP(web); err != nil {
		_ = a.Close()
		return nil, err
	}
	return a, nil
}

// newWorker builds the River client that works the jobs, calling deps.
func newWorker(cfg config.Config, pool *pgxpool.Pool, deps *Services, log *slog.Logger) (*river.Client[pgx.Tx], error) {
	return jobs.NewClient(pool, deps.Workers(), jobs.Config{
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
}

// wireHTTP builds what answers HTTP on the requests' services web: the job
// dashboard, the console and the API routes around them.
func (a *App) wireHTTP(web *Services) error {
	cfg, log := a.Config, a.log
	jobsUI, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(a.Worker, nil),
		Logger:    log,
		Prefix:    "/ops/jobs",
	})
	if err != nil {
		return fmt.Errorf("job dashboard: %w", err)
	}
	a.jobsUI = jobsUI
	authn := auth.NewAuthenticator(a.RequestPool, auth.CacheTTL)
	// One failed-auth budget per client for the API and the console alike.
	failures := auth.NewFailureLimiter(cfg.AuthFailuresPerMinute)
	ops, err := console.New(console.Deps{
		Pool: a.RequestPool, Inventory: web.Inventory, Campaigns: web.Campaigns, Rollbacks: web.Rollbacks,
		Alerts: web.Alerts, Reconcile: web.Reconcile, Webhooks: web.Webhooks, Auth: authn, Failures: failures, Log: log,
	})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	a.HTTP = api.New(api.Deps{
		Inventory:      web.Inventory,
		Campaigns:      web.Campaigns,
		Rollbacks:      web.Rollbacks,
		Alerts:         web.Alerts,
		Reconcile:      web.Reconcile,
		Webhooks:       web.Webhooks,
		Reports:        web.Reports,
		Events:         events.NewFeed(a.RequestPool),
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
	return nil
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

// Close releases the App's resources: the requests' pool and the
// migrator (not River's pool, which the caller owns).
func (a *App) Close() error {
	a.unwatch()
	a.RequestPool.Close()
	return a.migrator.Close()
}
