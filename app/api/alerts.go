package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/alerts"
)

type alertList struct {
	Alerts     []alerts.Alert `json:"alerts"`
	NextCursor *string        `json:"next_cursor"`
}

// listAlerts pages through the alerts, the last seen first.
func (s *server) listAlerts(c echo.Context) error {
	p, err := pageParams(c, alerts.MaxList, "")
	if err != nil {
		return err
	}
	lq := alerts.ListQuery{Status: c.QueryParam("status"), Limit: p.Limit}
	if p.Cursor != "" {
		cur, err := alerts.ParseCursor(p.Cursor)
		if err != nil {
			return badCursor()
		}
		lq.After = &cur
	}
	page, err := s.Alerts.Page(c.Request().Context(), lq)
	if err != nil {
		return err
	}
	out := alertList{Alerts: page.Alerts}
	if page.Next != nil {
		next := page.Next.String()
		out.NextCursor = &next
	}
	return c.JSON(http.StatusOK, out)
}

type ackBody struct {
	// Operator is nil when left out (the key's name is used); given, it
	// must be a name, as the document says.
	Operator *string `json:"operator"`
}

func (s *server) ackAlert(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	var body ackBody
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	operator, err := operatorOr(body.Operator, caller(c).Name)
	if err != nil {
		return err
	}
	a, err := s.Alerts.Ack(c.Request().Context(), id, operator)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}
