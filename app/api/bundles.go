package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/stock"
)

type bundleBody struct {
	Components []stock.Component `json:"components"`
	Reason     string            `json:"reason"`
}

func (s *server) setBundle(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body bundleBody
	if err := decode(c, &body); err != nil {
		return err
	}
	b, err := s.Inventory.SetBundle(c.Request().Context(), stock.Bundle{SKU: sku, Components: body.Components, Reason: body.Reason}, caller(c).Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (s *server) getBundle(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	b, err := s.Inventory.GetBundle(c.Request().Context(), sku)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (s *server) deleteBundle(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	if err := s.Inventory.DeleteBundle(c.Request().Context(), sku); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
