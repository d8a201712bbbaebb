package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed openapi.json
var openapiDoc []byte

func (s *server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) readyz(c echo.Context) error {
	if s.Ready != nil {
		if err := s.Ready(c.Request().Context()); err != nil {
			return newProblem(http.StatusServiceUnavailable, "unavailable", err.Error())
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openapiDoc)
}

func metricsHandler() http.Handler { return promhttp.Handler() }
