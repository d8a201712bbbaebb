// Package app wires stockhold together: it connects to PostgreSQL, builds
// the domain services, the River clients and the HTTP API, and runs them
// until told to stop.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/jobs"
)

// App is a wired stockhold process.
type App struct {
	Config    config.Config
	Pool      *pgxpool.Pool
	Inventory *inventory.Service
	Reconcile *reconcile.Service
	// Inserter enqueues jobs inside domain transactions.
	Inserter *river.Client[pgx.Tx]
	// Worker works jobs; Serve starts it.
	Worker *river.Client[pgx.Tx]
	HTTP   *echo.Echo

	log      *slog.Logger
	migrator *schema.Migrator
	jobsUI   *riverui.Handler
}

// Connect opens a pool on url, checked with a ping.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (4 on a small machine) starves the job workers
		// and the HTTP handlers of each other; pool_max_conns overrides.
		cfg.MaxConns = 40
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return pool, nil
}

// Services builds the domain services on pool, configured by cfg; they
// enqueue their jobs with inserter inside their own transactions. The
// workers call the same services, so this is also what jobs.NewClient takes.
func Services(cfg config.Config, pool *pgxpool.Pool, inserter *river.Client[pgx.Tx], log *slog.Logger) jobs.Deps {
	alertSvc := alerts.New(pool, inserter, cfg.AlertWebhook != "")
	inv := inventory.New(pool, inserter, log, inventory.Config{
		Coalesce: cfg.Coalesce, MaxBatch: cfg.BatchSize, Flights: cfg.BatchFlights,
		LockTimeout: cfg.LockTimeout, ExpiryTick: cfg.ExpiryTick,
		Alert: func(ctx context.Context, a inventory.Alert) {
			_, err := alertSvc.Raise(ctx, alerts.Raise{Level: alerts.Critical, Kind: a.Kind, Subject: a.Subject, Details: a.Details, Action: a.Summary})
			if err != nil {
				log.ErrorContext(ctx, "raise alert", "kind", a.Kind, "err", err)
			}
		},
	})
	rollbackSvc := rollbacks.New(pool, inserter, cfg.RollbackPause)
	return jobs.Deps{
		Inventory: inv,
		Alerts:    alertSvc,
		Rollbacks: rollbackSvc,
		Campaigns: campaigns.New(pool, inserter, rollbackSvc, alertSvc),
		Reconcile: reconcile.New(pool, inserter, alertSvc, reconcile.Config{
			RepairLimit: cfg.ReconcileRepairLimit,
			// A hold is stuck once the sweeper has had a full interval past
			// its own grace to release it.
			StuckGrace: max(cfg.SweepGrace+cfg.SweepInterval, time.Minute),
			Log:        log,
		}),
	}
}

// New wires an App on pool; it starts nothing.
func New(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*App, error) {
	inserter, err := jobs.NewInserter(pool)
	if err != nil {
		return nil, fmt.Errorf("river inserter: %w", err)
	}
	deps := Services(cfg, pool, inserter, log)
	worker, err := jobs.NewClient(pool, deps, jobs.Config{
		Workers:           cfg.Workers,
		SweepInterval:     cfg.SweepInterval,
		SweepGrace:        cfg.SweepGrace,
		WatchInterval:     cfg.WatchInterval,
		ReconcileInterval: cfg.ReconcileInterval,
		AlertWebhook:      cfg.AlertWebhook,
		RetryBase:         cfg.RetryBase,
		Log:               log,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	migrator, err := schema.New(pool, nil)
	if err != nil {
		return nil, err
	}
	a := &App{
		Config: cfg, Pool: pool, Inventory: deps.Inventory, Reconcile: deps.Reconcile, Inserter: inserter, Worker: worker,
		log: log, migrator: migrator,
	}
	jobsUI, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(worker, nil),
		Logger:    log,
		Prefix:    "/ops/jobs",
	})
	if err != nil {
		return nil, fmt.Errorf("job dashboard: %w", err)
	}
	a.jobsUI = jobsUI
	a.HTTP = api.New(api.Deps{
		Pool:      pool,
		Inventory: deps.Inventory,
		Campaigns: deps.Campaigns,
		Rollbacks: deps.Rollbacks,
		Alerts:    deps.Alerts,
		Reconcile: deps.Reconcile,
		Auth:      auth.NewAuthenticator(pool, 10*time.Second),
		Ready:     a.ready,
		JobsUI:    jobsUI,
		Log:       log,
	})
	return a, nil
}

// ready reports whether the database answers and its schema is the one this
// binary carries.
func (a *App) ready(ctx context.Context) error {
	current, latest, err := a.migrator.Versions(ctx)
	if err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	if current != latest {
		return fmt.Errorf("schema at version %d, this binary needs %d: run `stockhold migrate up`", current, latest)
	}
	return nil
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

// ServeListener is Serve on an existing listener.
func (a *App) ServeListener(ctx context.Context, ln net.Listener) error {
	if err := a.Worker.Start(ctx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	if err := a.jobsUI.Start(ctx); err != nil {
		return fmt.Errorf("start job dashboard: %w", err)
	}
	srv := &http.Server{Handler: a.HTTP, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.log.Info("stockhold serving", "addr", ln.Addr().String())

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil && err == nil {
		err = serr
	}
	if werr := a.Worker.Stop(shutdownCtx); werr != nil && err == nil {
		err = werr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close releases the App's resources (not the pool, which the caller owns).
func (a *App) Close() error { return a.migrator.Close() }
