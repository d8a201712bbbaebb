package api

import (
	"bytes"
	_ "embed"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed openapi.json
var openapiDoc []byte

func (s *server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// NotReady is why the service cannot take traffic: Reason is the short,
// fixed phrase /readyz answers with ("shutting down", "database
// unreachable"); Err, which may name hosts and sockets, is only logged.
type NotReady struct {
	Reason string
	Err    error
}

func (e *NotReady) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *NotReady) Unwrap() error { return e.Err }

// readyz answers 200, or 503 with a short reason and nothing else: it is
// unauthenticated, so the error behind the reason goes to the log only.
func (s *server) readyz(c echo.Context) error {
	if s.Ready == nil {
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	}
	err := s.Ready(c.Request().Context())
	if err == nil {
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	}
	reason := "not ready"
	var nr *NotReady
	if errors.As(err, &nr) {
		reason = nr.Reason
	}
	p := newProblem(http.StatusServiceUnavailable, "unavailable", reason)
	p.RetryAfter = retryUnavailable
	p.cause = err // logged once per interval by handleError
	return p
}

func (s *server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openapiDoc)
}

func metricsHandler() http.Handler { return promhttp.Handler() }

// OpenAPI returns the OpenAPI document served at /openapi.json (a copy).
func OpenAPI() []byte { return bytes.Clone(openapiDoc) }
