package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/alerts"
)

type alertList struct {
	Alerts []alerts.Alert `json:"alerts"`
}

func (s *server) listAlerts(c echo.Context) error {
	limit := 100
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return badRequest("limit must be a whole number")
		}
		limit = n
	}
	list, err := s.Alerts.List(c.Request().Context(), c.QueryParam("status"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, alertList{Alerts: list})
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
