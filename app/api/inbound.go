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

// Supplier inbound notices: each handler decodes, calls the inventory,
// answers.

type inboundLineBody struct {
	SKU      string `json:"sku"`
	Pool     string `json:"pool,omitempty"`
	Quantity int64  `json:"quantity"`
}

type inboundBody struct {
	SupplierRef string            `json:"supplier_ref"`
	Location    string            `json:"location,omitempty"`
	ExpectedOn  string            `json:"expected_on"`
	Lines       []inboundLineBody `json:"lines"`
	Reason      string            `json:"reason,omitempty"`
}

// createInbound records a supplier's notice, once per Idempotency-Key.
func (s *server) createInbound(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body inboundBody
	if err := decode(c, &body); err != nil {
		return err
	}
	n := stock.NewInbound{SupplierRef: body.SupplierRef, Location: body.Location, ExpectedOn: body.ExpectedOn,
		Reason: body.Reason, Actor: caller(c).Name}
	for _, l := range body.Lines {
		n.Lines = append(n.Lines, stock.NewInboundLine{SKU: l.SKU, Pool: l.Pool, Quantity: l.Quantity})
	}
	return once(c, key, body, http.StatusCreated, func(ctx context.Context, k idempotency.Key) (stock.Inbound, bool, error) {
		return s.Inventory.CreateInboundOnce(ctx, k, n)
	})
}

func (s *server) getInbound(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	i, err := s.Inventory.GetInbound(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, i)
}

// listInbound answers notices by the day they are expected, by status,
// location and SKU.
func (s *server) listInbound(c echo.Context) error {
	p, err := pageParams(c, stock.MaxInboundPage, "")
	if err != nil {
		return err
	}
	f := stock.InboundFilter{Status: c.QueryParam("status"), Location: c.QueryParam("location"), SKU: c.QueryParam("sku"), Limit: p.Limit}
	if f.Cursor, err = uuidCursor(p); err != nil {
		return err
	}
	page, err := s.Inventory.ListInbound(c.Request().Context(), f)
	if errors.Is(err, stock.ErrCursor) {
		return badCursor()
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

type inboundReceiveBody struct {
	SKU      string `json:"sku"`
	Pool     string `json:"pool,omitempty"`
	Quantity *int64 `json:"quantity"`
	Reason   string `json:"reason,omitempty"`
}

// receiveInbound records units of a notice's line that arrived. With an
// Idempotency-Key a retry replays the first answer (a receipt is not
// idempotent by nature).
func (s *server) receiveInbound(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	var body inboundReceiveBody
	if err := decode(c, &body); err != nil {
		return err
	}
	if body.Quantity == nil {
		return domain.Invalid("quantity is required: the units of the line that arrived")
	}
	st := stock.InboundStep{ID: id, SKU: body.SKU, Pool: body.Pool, Quantity: *body.Quantity, Reason: body.Reason, Actor: caller(c).Name}
	return s.inboundStep(c, body, st, s.Inventory.ReceiveInbound, s.Inventory.ReceiveInboundOnce)
}

// closeInbound writes off what a notice never delivered; with an
// Idempotency-Key a retry replays the first answer.
func (s *server) closeInbound(c echo.Context) error {
	return s.endInbound(c, s.Inventory.CloseInbound, s.Inventory.CloseInboundOnce)
}

// cancelInbound takes a notice's incoming back; with an Idempotency-Key a
// retry replays the first answer.
func (s *server) cancelInbound(c echo.Context) error {
	return s.endInbound(c, s.Inventory.CancelInbound, s.Inventory.CancelInboundOnce)
}

func (s *server) endInbound(c echo.Context, end func(context.Context, stock.InboundStep) (stock.Inbound, error),
	endOnce func(context.Context, idempotency.Key, stock.InboundStep) (stock.Inbound, bool, error)) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	var body transferEndBody
	if err := decode(c, &body); err != nil {
		return err
	}
	st := stock.InboundStep{ID: id, Reason: body.Reason, Actor: caller(c).Name}
	return s.inboundStep(c, body, st, end, endOnce)
}

// inboundStep runs a step of a notice, at most once per Idempotency-Key
// when the request has one.
func (s *server) inboundStep(c echo.Context, body any, st stock.InboundStep, step func(context.Context, stock.InboundStep) (stock.Inbound, error),
	stepOnce func(context.Context, idempotency.Key, stock.InboundStep) (stock.Inbound, bool, error)) error {
	return onceIfKeyed(c, body, func(ctx context.Context) (stock.Inbound, error) { return step(ctx, st) },
		func(ctx context.Context, k idempotency.Key) (stock.Inbound, bool, error) { return stepOnce(ctx, k, st) })
}
