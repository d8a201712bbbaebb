package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

type limitsBody struct {
	Pool                  string `json:"pool"`
	MaxPerOrder           *int64 `json:"max_per_order"`
	MinPerOrder           *int64 `json:"min_per_order"`
	Step                  *int64 `json:"step"`
	MaxPerCustomer        *int64 `json:"max_per_customer"`
	CustomerWindowSeconds *int64 `json:"customer_window_seconds"`
}

// limitsOf is the pool a limits request addresses: the SKU in its path,
// the pool in its query (empty: main).
func limitsOf(c echo.Context) (sku, pool string, err error) {
	if sku, err = nameParam(c, "sku", "sku"); err != nil {
		return "", "", err
	}
	if pool = c.QueryParam("pool"); pool == "" {
		return sku, stock.MainPool, nil
	}
	return sku, pool, domain.ValidName("pool", pool)
}

func (s *server) setLimits(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body limitsBody
	if err := decode(c, &body); err != nil {
		return err
	}
	l, err := s.Inventory.SetLimits(c.Request().Context(), stock.Limits{SKU: sku, Pool: body.Pool, MaxPerOrder: body.MaxPerOrder,
		MinPerOrder: body.MinPerOrder, Step: body.Step, MaxPerCustomer: body.MaxPerCustomer,
		CustomerWindowSeconds: body.CustomerWindowSeconds}, caller(c).Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (s *server) getLimits(c echo.Context) error {
	sku, pool, err := limitsOf(c)
	if err != nil {
		return err
	}
	l, err := s.Inventory.GetLimits(c.Request().Context(), sku, pool)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (s *server) deleteLimits(c echo.Context) error {
	sku, pool, err := limitsOf(c)
	if err != nil {
		return err
	}
	if err := s.Inventory.DeleteLimits(c.Request().Context(), sku, pool); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
