// Package api is stockhold's HTTP interface (echo): routing, bearer-token
// auth, strict JSON decoding, idempotency and RFC 9457 problem answers.
// Handlers are short: decode, validate, call the domain, answer.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// Deps are what the HTTP layer calls into.
type Deps struct {
	Pool      *pgxpool.Pool
	Inventory *inventory.Service
	Campaigns *campaigns.Service
	Rollbacks *rollbacks.Service
	Alerts    *alerts.Service
	Reconcile *reconcile.Service
	Auth      *auth.Authenticator
	// Ready reports whether the service can take traffic (database reachable,
	// schema current).
	Ready func(context.Context) error
	// JobsUI serves River's job dashboard under /ops/jobs/; nil leaves it out.
	JobsUI http.Handler
	Log    *slog.Logger
	// RequestTimeout bounds one request; 0 means 30 seconds.
	RequestTimeout time.Duration
}

type server struct {
	Deps
	log *slog.Logger
}

// New returns the HTTP handler with every route of the API.
func New(d Deps) *echo.Echo {
	s := &server{Deps: d, log: d.Log}
	if s.log == nil {
		s.log = slog.Default()
	}
	if d.RequestTimeout == 0 {
		d.RequestTimeout = 30 * time.Second
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.Recover())
	e.Use(s.requestLogger())
	e.Use(middleware.BodyLimit("64K"))
	e.Use(middleware.ContextTimeoutWithConfig(middleware.ContextTimeoutConfig{Timeout: d.RequestTimeout}))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(metricsHandler()))
	e.GET("/openapi.json", s.openapi)

	// Route-level middleware, not groups: a group's middleware would also
	// guard the group's unknown paths, turning a 404 into a 401 or 403.
	shop := s.authenticate(auth.RoleShop, auth.RoleOps)
	ops := s.authenticate(auth.RoleOps)

	e.POST("/v1/skus/:sku/adjustments", s.adjustStock, ops)
	e.GET("/v1/skus/:sku", s.getStock, shop)
	e.POST("/v1/skus/:sku/pause", s.pauseStock, ops)
	e.POST("/v1/skus/:sku/resume", s.resumeStock, ops)
	e.GET("/v1/skus/:sku/ledger", s.getLedger, ops)

	e.POST("/v1/reservations", s.createReservation, shop)
	e.GET("/v1/reservations/:id", s.getReservation, shop)
	e.POST("/v1/reservations/:id/confirm", s.confirmReservation, shop)
	e.POST("/v1/reservations/:id/release", s.releaseReservation, shop)

	e.POST("/v1/campaigns", s.createCampaign, ops)
	e.GET("/v1/campaigns/:id", s.getCampaign, ops)
	e.POST("/v1/campaigns/:id/end", s.endCampaign, ops)
	e.POST("/v1/rollbacks", s.createRollback, ops)
	e.GET("/v1/rollbacks/:id", s.getRollback, ops)
	e.POST("/v1/rollbacks/:id/resume", s.resumeRollback, ops)
	e.GET("/v1/alerts", s.listAlerts, ops)
	e.POST("/v1/alerts/:id/ack", s.ackAlert, ops)
	e.GET("/v1/stats", s.getStats, ops)
	e.POST("/v1/reconciliations", s.createReconciliation, ops)
	e.GET("/v1/reconciliations/latest", s.getLatestReconciliation, ops)
	e.GET("/v1/reconciliations/:id", s.getReconciliation, ops)

	if d.JobsUI != nil {
		jobsUI := echo.WrapHandler(d.JobsUI)
		guard := s.authenticateOps()
		e.Any("/ops/jobs", jobsUI, guard)
		e.Any("/ops/jobs/*", jobsUI, guard)
	}
	return e
}

// requestLogger logs each request once with slog and records its latency.
func (s *server) requestLogger() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogRoutePath: true, LogError: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			metrics.HTTPDuration.WithLabelValues(v.Method, v.RoutePath, strconv.Itoa(v.Status)).Observe(v.Latency.Seconds())
			level := slog.LevelDebug
			if v.Status >= 500 {
				level = slog.LevelError
			}
			s.log.LogAttrs(c.Request().Context(), level, "request",
				slog.String("method", v.Method), slog.String("uri", v.URI), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency))
			return nil
		},
	})
}
