package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/reports"
)

// getDailyReport answers the report of one business day (date, tz): per
// pool a page at a time (cursor, limit), per campaign, in all, and the
// day's reconciliations.
func (s *server) getDailyReport(c echo.Context) error {
	p, err := pageParams(c, reports.MaxLimit, "")
	if err != nil {
		return err
	}
	if c.QueryParam("date") == "" {
		return badRequest("date is required: the business day as YYYY-MM-DD (2026-12-01)")
	}
	out, err := s.Reports.Daily(c.Request().Context(), reports.DailyQuery{
		Date: c.QueryParam("date"), TimeZone: c.QueryParam("tz"), Cursor: p.Cursor, Limit: p.Limit,
	})
	switch {
	case errors.Is(err, reports.ErrBadCursor):
		return badCursor()
	case errors.Is(err, reports.ErrBadDate):
		return badRequest(err.Error())
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, out)
}
