package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/stock"
)

// Locations, moves between states, transfers between locations and stock
// counts: each handler decodes, calls the inventory, answers.

type locationBody struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Priority  int32    `json:"priority"`
	Active    *bool    `json:"active,omitempty"`
	Latitude  *float64 `json:"latitude,omitempty"`
	Longitude *float64 `json:"longitude,omitempty"`
	Pickup    bool     `json:"pickup,omitempty"`
}

// coordinates reads a body's latitude and longitude: both or neither.
func coordinates(lat, lon *float64) (*stock.Coordinates, error) {
	switch {
	case lat == nil && lon == nil:
		return nil, nil
	case lat == nil || lon == nil:
		return nil, domain.Invalid("give latitude and longitude together, in degrees")
	}
	return &stock.Coordinates{Latitude: *lat, Longitude: *lon}, nil
}

// createLocation adds a location, once per Idempotency-Key.
func (s *server) createLocation(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body locationBody
	if err := decode(c, &body); err != nil {
		return err
	}
	where, err := coordinates(body.Latitude, body.Longitude)
	if err != nil {
		return err
	}
	n := stock.NewLocation{ID: body.ID, Name: body.Name, Priority: body.Priority, Active: body.Active, Coordinates: where,
		Pickup: body.Pickup, Actor: caller(c).Name}
	return once(c, key, body, http.StatusCreated, func(ctx context.Context, k idempotency.Key) (stock.Location, bool, error) {
		return s.Inventory.CreateLocationOnce(ctx, k, n)
	})
}

// listLocations answers a page of locations, each with its totals.
func (s *server) listLocations(c echo.Context) error {
	p, err := pageParams(c, stock.MaxLocationsPage, "")
	if err != nil {
		return err
	}
	if p.Cursor != "" && domain.ValidName("cursor", p.Cursor) != nil {
		return badCursor()
	}
	page, err := s.Inventory.Locations(c.Request().Context(), p.Cursor, p.Limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (s *server) getLocation(c echo.Context) error {
	id, err := nameParam(c, "id", "location")
	if err != nil {
		return err
	}
	l, err := s.Inventory.Location(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

type locationPatch struct {
	Name      *string  `json:"name"`
	Priority  *int32   `json:"priority"`
	Active    *bool    `json:"active"`
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
	Pickup    *bool    `json:"pickup"`
}

// updateLocation changes a location's name, priority, active, where it is
// or pickup.
func (s *server) updateLocation(c echo.Context) error {
	id, err := nameParam(c, "id", "location")
	if err != nil {
		return err
	}
	var body locationPatch
	if err := decode(c, &body); err != nil {
		return err
	}
	where, err := coordinates(body.Latitude, body.Longitude)
	if err != nil {
		return err
	}
	l, err := s.Inventory.UpdateLocation(c.Request().Context(), stock.LocationChange{
		ID: id, Name: body.Name, Priority: body.Priority, Active: body.Active, Coordinates: where, Pickup: body.Pickup, Actor: caller(c).Name,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

type moveBody struct {
	Location string `json:"location,omitempty"`
	Pool     string `json:"pool,omitempty"`
	From     string `json:"from"`
	To       string `json:"to"`
	Quantity int64  `json:"quantity"`
	Reason   string `json:"reason"`
	Ref      string `json:"ref,omitempty"`
	DryRun   bool   `json:"dry_run,omitempty"`
}

type stockPreview struct {
	stock.Stock
	// DryRun says the stock is as the change would leave it: nothing
	// changed.
	DryRun bool `json:"dry_run,omitempty"`
}

// moveStock moves units of one (location, pool) between states, once per
// Idempotency-Key; dry_run answers the stock as it would be.
func (s *server) moveStock(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body moveBody
	if err := decode(c, &body); err != nil {
		return err
	}
	m := stock.Move{SKU: sku, Location: body.Location, Pool: body.Pool, From: body.From, To: body.To,
		Quantity: body.Quantity, Reason: body.Reason, Ref: body.Ref, Actor: caller(c).Name}
	if body.DryRun {
		st, err := s.Inventory.MovePreview(c.Request().Context(), m)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, stockPreview{Stock: st, DryRun: true})
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	return once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (stockPreview, bool, error) {
		st, replayed, err := s.Inventory.MoveOnce(ctx, k, m)
		return stockPreview{Stock: st}, replayed, err
	})
}

type countBody struct {
	Location string `json:"location,omitempty"`
	Pool     string `json:"pool,omitempty"`
	Counted  *int64 `json:"counted"`
	Reason   string `json:"reason"`
	Force    bool   `json:"force,omitempty"`
	DryRun   bool   `json:"dry_run,omitempty"`
}

// countStock records a stock count, once per Idempotency-Key; dry_run
// answers its difference (or refusal) and changes nothing.
func (s *server) countStock(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body countBody
	if err := decode(c, &body); err != nil {
		return err
	}
	if body.Counted == nil {
		return domain.Invalid("counted is required: what is on the shelf and not sold")
	}
	sc := stock.StockCount{SKU: sku, Location: body.Location, Pool: body.Pool, Counted: *body.Counted,
		Reason: body.Reason, Force: body.Force, Actor: caller(c).Name}
	if body.DryRun {
		out, err := s.Inventory.CountPreview(c.Request().Context(), sc)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	return once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (stock.Counted, bool, error) {
		return s.Inventory.CountOnce(ctx, k, sc)
	})
}

type transferBody struct {
	SKU      string `json:"sku"`
	Pool     string `json:"pool,omitempty"`
	From     string `json:"from"`
	To       string `json:"to"`
	Quantity int64  `json:"quantity"`
	Reason   string `json:"reason"`
}

// createTransfer sends units from one location to another, once per
// Idempotency-Key.
func (s *server) createTransfer(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body transferBody
	if err := decode(c, &body); err != nil {
		return err
	}
	n := stock.NewTransfer{SKU: body.SKU, Pool: body.Pool, From: body.From, To: body.To, Quantity: body.Quantity,
		Reason: body.Reason, Actor: caller(c).Name}
	return once(c, key, body, http.StatusCreated, func(ctx context.Context, k idempotency.Key) (stock.Transfer, bool, error) {
		return s.Inventory.CreateTransferOnce(ctx, k, n)
	})
}

func (s *server) getTransfer(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	t, err := s.Inventory.GetTransfer(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

// listTransfers answers transfers oldest first, by status and SKU.
func (s *server) listTransfers(c echo.Context) error {
	p, err := pageParams(c, stock.MaxTransfersPage, "")
	if err != nil {
		return err
	}
	f := stock.TransferFilter{Status: c.QueryParam("status"), SKU: c.QueryParam("sku"), Limit: p.Limit}
	if f.Cursor, err = uuidCursor(p); err != nil {
		return err
	}
	page, err := s.Inventory.Transfers(c.Request().Context(), f)
	if errors.Is(err, stock.ErrCursor) {
		return badCursor()
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

type receiveBody struct {
	Quantity *int64 `json:"quantity"`
	Reason   string `json:"reason,omitempty"`
}

// receiveTransfer records units of a transfer that arrived. With an
// Idempotency-Key a retry replays the first answer (a receipt is not
// idempotent by nature).
func (s *server) receiveTransfer(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	var body receiveBody
	if err := decode(c, &body); err != nil {
		return err
	}
	if body.Quantity == nil {
		return domain.Invalid("quantity is required: the units that arrived")
	}
	st := stock.TransferStep{ID: id, Quantity: *body.Quantity, Reason: body.Reason, Actor: caller(c).Name}
	return onceIfKeyed(c, body, func(ctx context.Context) (stock.Transfer, error) { return s.Inventory.ReceiveTransfer(ctx, st) },
		func(ctx context.Context, k idempotency.Key) (stock.Transfer, bool, error) {
			return s.Inventory.ReceiveTransferOnce(ctx, k, st)
		})
}

type transferEndBody struct {
	Reason string `json:"reason"`
}

// closeTransfer writes off what a transfer never delivered; with an
// Idempotency-Key a retry replays the first answer.
func (s *server) closeTransfer(c echo.Context) error {
	return s.endTransfer(c, s.Inventory.CloseTransfer, s.Inventory.CloseTransferOnce)
}

// cancelTransfer gives a transfer's units back to where they came from;
// with an Idempotency-Key a retry replays the first answer.
func (s *server) cancelTransfer(c echo.Context) error {
	return s.endTransfer(c, s.Inventory.CancelTransfer, s.Inventory.CancelTransferOnce)
}

func (s *server) endTransfer(c echo.Context, end func(context.Context, stock.TransferStep) (stock.Transfer, error),
	endOnce func(context.Context, idempotency.Key, stock.TransferStep) (stock.Transfer, bool, error)) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	var body transferEndBody
	if err := decode(c, &body); err != nil {
		return err
	}
	st := stock.TransferStep{ID: id, Reason: body.Reason, Actor: caller(c).Name}
	return onceIfKeyed(c, body, func(ctx context.Context) (stock.Transfer, error) { return end(ctx, st) },
		func(ctx context.Context, k idempotency.Key) (stock.Transfer, bool, error) { return endOnce(ctx, k, st) })
}
