// Package api is stockhold's HTTP interface (echo): routing, bearer-token
// auth, strict JSON decoding, idempotency and RFC 9457 problem answers.
// Handlers are short: decode, validate, call the domain, answer.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/reports"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
)

// Deps are what the HTTP layer calls into.
type Deps struct {
	Inventory *inventory.Service
	Campaigns *campaigns.Service
	Rollbacks *rollbacks.Service
	Alerts    *alerts.Service
	Reconcile *reconcile.Service
	Webhooks  *webhooks.Service
	Reports   *reports.Service
	Events    *events.Feed
	Auth      *auth.Authenticator
	// Ready reports whether the service can take traffic (database reachable,
	// schema current).
	Ready func(context.Context) error
	// JobsUI serves River's job dashboard under /ops/jobs/; nil leaves it out.
	JobsUI http.Handler
	// Console serves the operator console, every other path under /ops/;
	// nil leaves it out.
	Console http.Handler
	// OpsSession returns the ops key of a request's console session, so
	// the console's sign-in also opens /ops/jobs/; nil means none.
	OpsSession func(*http.Request) (auth.Key, bool, error)
	Log        *slog.Logger
	// RequestTimeout bounds one request; 0 means 10 seconds.
	RequestTimeout time.Duration
	// Failures limits failed authentications per client IP (429 past
	// it), shared with the console; nil means no limit.
	Failures *auth.FailureLimiter
	// TrustedProxies are the networks whose X-Forwarded-For names the
	// client; with none, the peer address is the client.
	TrustedProxies []*net.IPNet
}

type server struct {
	Deps
	log      *slog.Logger
	overload *throttle
}

// New returns the HTTP handler with every route of the API.
func New(d Deps) *echo.Echo {
	s := &server{Deps: d, log: d.Log}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.overload = newThrottle(s.log, 10*time.Second)
	if d.RequestTimeout == 0 {
		d.RequestTimeout = 10 * time.Second
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = ipExtractor(d.TrustedProxies)
	e.Use(chainOnce(
		requestID(),
		s.requestLogger(),
		browserHeaders(),
		middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{
			Limit: "64K",
			// Adding or retiring units takes up to 10,000 of them: its
			// routes set their own limit.
			Skipper: func(c echo.Context) bool {
				return c.Request().Method == http.MethodPost && unitsWrite.MatchString(c.Request().URL.Path)
			},
		}),
		// Errors are classified there, while the request's context is
		// still its own (requestTimeout cancels it on return).
		requestTimeout(d.RequestTimeout),
		// Innermost: a panic is answered while the request's context is
		// live (the timeout middleware cancels it on the way out, which
		// would read as a client gone), and still gets its request log
		// line and its latency, as a 500.
		middleware.RecoverWithConfig(middleware.RecoverConfig{LogErrorFunc: s.logPanic}),
	))

	s.routes(e)
	return e
}

// chainOnce is middleware (outermost first) as one, built once: echo
// applies its middleware anew on every request, around the handler its
// router found (a closure per middleware, each time). Per request, what
// remains is to keep the handler echo passes on (the route's, inside any
// middleware used after this one) in the request's echo context, where
// the chain's innermost handler calls it.
func chainOnce(middleware ...echo.MiddlewareFunc) echo.MiddlewareFunc {
	h := func(c echo.Context) error { return c.Handler()(c) }
	for i := len(middleware) - 1; i >= 0; i-- {
		h = middleware[i](h)
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.SetHandler(next)
			return h(c)
		}
	}
}

// clientIP hands the client's IP, as the IP extractor found it, to a
// handler outside echo (the console) through the request's context.
func clientIP() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.SetRequest(c.Request().WithContext(auth.WithClientIP(c.Request().Context(), c.RealIP())))
			return next(c)
		}
	}
}

// ipExtractor reads the client's IP from X-Forwarded-For when the peer is
// one of trusted, and from the peer address otherwise.
func ipExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// requestID gives every request an id: the caller's X-Request-Id when it
// is a plain token of at most 128 characters, else a new one. It is echoed
// in X-Request-Id and carried by every log line of the request, with the
// request's Idempotency-Key when it has a usable one.
func requestID() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			id := c.Request().Header.Get(echo.HeaderXRequestID)
			if !plainToken(id) {
				b := make([]byte, 12)
				_, _ = rand.Read(b)
				id = hex.EncodeToString(b)
			}
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			// Room for what the request adds to its line (logging.Add):
			// the SKU, a refusal's code, a hold's id and order reference.
			attrs := make([]slog.Attr, 1, 8)
			attrs[0] = slog.String("request_id", id)
			if keys := c.Request().Header.Values("Idempotency-Key"); len(keys) == 1 && printableKey(keys[0]) {
				attrs = append(attrs, slog.String("idempotency_key", keys[0]))
			}
			ctx := logging.With(c.Request().Context(), attrs...)
			c.SetRequest(c.Request().WithContext(ctx))
			return next(c)
		}
	}
}

// printableKey reports whether an Idempotency-Key is fit for a log line:
// 1-255 printable ASCII characters, as the API accepts.
func printableKey(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func plainToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// logPanic logs a handler's panic with its stack; the error handler then
// answers 500, as for any bug.
func (s *server) logPanic(c echo.Context, err error, stack []byte) error {
	s.log.ErrorContext(c.Request().Context(), "handler panicked", "method", c.Request().Method,
		"path", c.Request().URL.Path, "panic", err.Error(), "stack", string(stack))
	return err
}

// requestLogger logs each request once with slog and records its latency.
func (s *server) requestLogger() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogRoutePath: true, LogError: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			metrics.HTTPDuration.WithLabelValues(v.Method, v.RoutePath, strconv.Itoa(v.Status)).Observe(v.Latency.Seconds())
			// A 500 is a bug; a 503 is an overload answer, logged once per
			// interval by handleError; 499 is a client that went away.
			// A request that touches a hold is logged at info, with the
			// hold's id, its order reference and the Idempotency-Key, so a
			// person can follow an order through the logs.
			level := slog.LevelDebug
			if strings.HasPrefix(v.RoutePath, "/v1/reservations") {
				level = slog.LevelInfo
			}
			if v.Status >= 500 && v.Status != http.StatusServiceUnavailable {
				level = slog.LevelError
			}
			ctx := c.Request().Context()
			if sku := c.Param("sku"); sku != "" {
				logging.Add(ctx, slog.String("sku", sku))
			}
			if strings.HasPrefix(v.RoutePath, "/v1/reservations/:id") {
				logging.Add(ctx, slog.String("hold_id", c.Param("id")))
			}
			s.log.LogAttrs(ctx, level, "request",
				slog.String("method", v.Method), slog.String("uri", v.URI), slog.String("route", v.RoutePath),
				slog.Int("status", v.Status), slog.Duration("latency", v.Latency))
			return nil
		},
	})
}
