package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/api"
)

// TestMiddlewareOnEveryAnswer: the middleware every answer passes through
// (a request id, the browser headers, a problem for an error, a log line)
// runs for a route's answer, for a route's own middleware refusing, and
// for the router's own 404 and 405, one request after another; and so
// does middleware used on the API after it was made, inside it.
func TestMiddlewareOnEveryAnswer(t *testing.T) {
	t.Parallel()
	h := api.New(api.Deps{Log: quiet})
	var later []string
	h.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			later = append(later, c.Request().Method+" "+c.Response().Header().Get("X-Request-Id"))
			return next(c)
		}
	})
	seen := map[string]bool{}
	for range 3 {
		for _, c := range []struct {
			method, path string
			status       int
		}{
			{"GET", "/problems/out_of_stock", http.StatusOK},
			{"GET", "/v1/skus", http.StatusUnauthorized},
			{"GET", "/no/such/route", http.StatusNotFound},
			{"DELETE", "/openapi.json", http.StatusMethodNotAllowed},
		} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
			require.Equal(t, c.status, w.Code, "%s %s: %s", c.method, c.path, w.Body)
			id := w.Header().Get("X-Request-Id")
			require.Len(t, id, 24, "%s %s", c.method, c.path)
			require.False(t, seen[id], "a new id for each request")
			seen[id] = true
			require.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))
			require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
			if c.status >= 400 {
				require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			}
			require.Equal(t, c.method+" "+id, later[len(later)-1], "the later middleware ran, inside")
		}
	}
	require.Len(t, later, 12)
}
