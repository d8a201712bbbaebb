package api

import (
	"context"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// MaxUnitsBody is the largest body of a request adding or retiring units:
// room for stock.MaxUnitsPerRequest units with short attributes, where
// every other route takes MaxBody.
const MaxUnitsBody = 4 << 20

// unitsWrite matches the paths of the routes that add or retire units,
// which the global body limit skips.
var unitsWrite = regexp.MustCompile(`^/v1/skus/[^/]+/units(/retire)?$`)

type addUnitsBody struct {
	Location string           `json:"location,omitempty"`
	Pool     string           `json:"pool"`
	Reason   string           `json:"reason"`
	Ref      string           `json:"ref"`
	Units    []stock.UnitSpec `json:"units"`
}

// addUnits adds units with an identity to a pool, once per
// Idempotency-Key (see inventory.AddUnitsOnce).
func (s *server) addUnits(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body addUnitsBody
	if err := decode(c, &body); err != nil {
		return err
	}
	ch := stock.UnitsChange{SKU: sku, Location: body.Location, Pool: body.Pool, Reason: body.Reason, Ref: body.Ref, Actor: caller(c).Name, Units: body.Units}
	return once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (stock.Stock, bool, error) {
		return s.Inventory.AddUnitsOnce(ctx, k, ch)
	})
}

type retireUnitsBody struct {
	Location string   `json:"location,omitempty"`
	Pool     string   `json:"pool"`
	Reason   string   `json:"reason"`
	Ref      string   `json:"ref"`
	Units    []string `json:"units"`
}

// retireUnits takes available units out of their pool, once per
// Idempotency-Key (see inventory.RetireUnitsOnce).
func (s *server) retireUnits(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body retireUnitsBody
	if err := decode(c, &body); err != nil {
		return err
	}
	ch := stock.UnitsChange{SKU: sku, Location: body.Location, Pool: body.Pool, Reason: body.Reason, Ref: body.Ref, Actor: caller(c).Name,
		Units: make([]stock.UnitSpec, len(body.Units))}
	for i, id := range body.Units {
		ch.Units[i] = stock.UnitSpec{ID: id}
	}
	return once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (stock.Stock, bool, error) {
		return s.Inventory.RetireUnitsOnce(ctx, k, ch)
	})
}

// listUnits pages through a SKU's units in id order.
func (s *server) listUnits(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	p, err := pageParams(c, stock.MaxUnitsPage, "after")
	if err != nil {
		return err
	}
	if p.Cursor != "" && domain.ValidName("cursor", p.Cursor) != nil {
		return badCursor()
	}
	page, err := s.Inventory.ListUnits(c.Request().Context(), stock.UnitsQuery{
		SKU: sku, Pool: c.QueryParam("pool"), Status: c.QueryParam("status"), Group: c.QueryParam("group"),
		After: p.Cursor, Limit: p.Limit, By: viewer(asCaller(c)),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// viewer is the caller as the units' listing sees it: who may see which
// holds.
func viewer(by inventory.Caller) stock.Viewer { return stock.Viewer{Name: by.Name, Ops: by.Ops} }
