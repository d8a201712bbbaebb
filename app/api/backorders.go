package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/stock"
)

type backordersBody struct {
	Pool        string `json:"pool"`
	BelowZero   int64  `json:"below_zero"`
	HorizonDays *int32 `json:"horizon_days"`
}

func (s *server) setBackorders(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body backordersBody
	if err := decode(c, &body); err != nil {
		return err
	}
	b, err := s.Inventory.SetBackorders(c.Request().Context(), stock.Backorders{SKU: sku, Pool: body.Pool,
		BelowZero: body.BelowZero, HorizonDays: body.HorizonDays}, caller(c).Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (s *server) getBackorders(c echo.Context) error {
	sku, pool, err := limitsOf(c)
	if err != nil {
		return err
	}
	b, err := s.Inventory.GetBackorders(c.Request().Context(), sku, pool)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (s *server) deleteBackorders(c echo.Context) error {
	sku, pool, err := limitsOf(c)
	if err != nil {
		return err
	}
	if err := s.Inventory.DeleteBackorders(c.Request().Context(), sku, pool); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
