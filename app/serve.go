package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/jobs"
)

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
