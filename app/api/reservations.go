package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/stock"
)

type holdBody struct {
	OrderRef    string     `json:"order_ref"`
	CustomerRef string     `json:"customer_ref"`
	Items       []holdItem `json:"items"`
	TTLSeconds  *int64     `json:"ttl_seconds"`
	Campaign    *string    `json:"campaign"`
	// Strategy allocates the lines that name no location: priority,
	// most_stock or nearest (to ShipTo); left out, the key's default.
	Strategy *string `json:"strategy"`
	ShipTo   *shipTo `json:"ship_to"`
}

// shipTo is where an order goes, for the nearest strategy.
type shipTo struct {
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
}

type holdItem struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
	// Units names units with an identity (seats, serial numbers).
	Units []string `json:"units,omitempty"`
	// Adjacent asks for Quantity units of one group with consecutive
	// positions.
	Adjacent bool `json:"adjacent,omitempty"`
	// Location takes the line from that location; without one the
	// service allocates it (lowest priority first).
	Location string `json:"location,omitempty"`
	// Split lets the service take an allocated line from several
	// locations.
	Split bool `json:"split,omitempty"`
	// Partial takes what is available of the line, up to Quantity and
	// at least MinQuantity.
	Partial     bool  `json:"partial,omitempty"`
	MinQuantity int64 `json:"min_quantity,omitempty"`
}

// inventoryItems are a request's lines as the inventory takes them.
func inventoryItems(list []holdItem) []inventory.Item {
	out := make([]inventory.Item, len(list))
	for i, it := range list {
		out[i] = inventory.Item{SKU: it.SKU, Quantity: it.Quantity, Units: it.Units, Adjacent: it.Adjacent,
			Location: it.Location, Split: it.Split, Partial: it.Partial, MinQuantity: it.MinQuantity}
	}
	return out
}

// holdRequest turns a decoded body into the domain's request.
func (b holdBody) holdRequest(client, key string, locations []string) (inventory.HoldRequest, error) {
	req := inventory.HoldRequest{Client: client, IdempotencyKey: key, OrderRef: b.OrderRef, CustomerRef: b.CustomerRef, Locations: locations}
	if b.TTLSeconds != nil {
		if *b.TTLSeconds < 1 || *b.TTLSeconds > inventory.MaxTTLSeconds {
			return req, domain.Invalid("ttl_seconds must be from 1 to %d", inventory.MaxTTLSeconds)
		}
		req.TTLSeconds = *b.TTLSeconds
	}
	if b.Campaign != nil {
		if *b.Campaign == "" {
			return req, domain.Invalid("campaign is empty: leave it out for regular stock")
		}
		req.Campaign = *b.Campaign
	}
	req.Items = inventoryItems(b.Items)
	if b.Strategy != nil {
		if *b.Strategy == "" {
			return req, domain.Invalid("strategy is empty: leave it out for the key's default")
		}
		req.Strategy = inventory.Strategy(*b.Strategy)
	}
	if b.ShipTo != nil {
		if b.ShipTo.Latitude == nil || b.ShipTo.Longitude == nil {
			return req, domain.Invalid("ship_to needs latitude and longitude, in degrees")
		}
		req.ShipTo = &inventory.Coordinates{Latitude: *b.ShipTo.Latitude, Longitude: *b.ShipTo.Longitude}
	}
	return req, req.Validate()
}

func (s *server) createReservation(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body holdBody
	if err := decodeHold(c, &body); err != nil {
		s.Inventory.CountUnreadableHold()
		return err
	}
	req, err := body.holdRequest(caller(c).Name, key, caller(c).Locations)
	req.DefaultStrategy = inventory.Strategy(caller(c).Strategy)
	if err != nil {
		s.Inventory.CountUnreadableHold()
		return err
	}
	if req.OrderRef != "" {
		logging.Add(c.Request().Context(), slog.String("order_ref", req.OrderRef))
	}
	logSKUs(c.Request().Context(), req.Items)
	r, replayed, err := s.Inventory.Hold(c.Request().Context(), req)
	if err != nil {
		if de, ok := errorAs[*domain.Error](err); ok {
			// On the request's line, not one of its own: refusals are
			// ordinary (900 of 1,000 in a flash sale) and counted.
			logging.Add(c.Request().Context(), slog.String("code", string(de.Code)), slog.String("refused_sku", de.SKU))
		}
		return err
	}
	logHold(c.Request().Context(), r)
	if replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/reservations/"+r.ID.String())
	return c.JSON(http.StatusCreated, r)
}

func (s *server) getReservation(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	r, err := s.Inventory.Get(c.Request().Context(), id, asCaller(c))
	if err != nil {
		return err
	}
	logHold(c.Request().Context(), r)
	return c.JSON(http.StatusOK, r)
}

func (s *server) confirmReservation(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	if err := decodeOptional(c, &struct{}{}); err != nil {
		return err
	}
	r, err := s.Inventory.Confirm(c.Request().Context(), id, asCaller(c))
	metrics.CountTransition("confirm", err)
	if err != nil {
		return err
	}
	logHold(c.Request().Context(), r)
	return c.JSON(http.StatusOK, r)
}

type releaseBody struct {
	Reason string `json:"reason"`
	// Items, when given, releases only these units; the hold stays held
	// with the rest.
	Items []holdItem `json:"items"`
}

// releaseReservation releases a hold whole, or with items some of its
// units. A partial release is not idempotent by nature (each one hands back
// more), so it honours an Idempotency-Key when the request carries one.
func (s *server) releaseReservation(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	var body releaseBody
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	if body.Items == nil {
		r, err := s.Inventory.Release(c.Request().Context(), id, asCaller(c), body.Reason)
		metrics.CountTransition("release", err)
		if err != nil {
			return err
		}
		logHold(c.Request().Context(), r)
		return c.JSON(http.StatusOK, r)
	}
	items := inventoryItems(body.Items)
	by := asCaller(c)
	if len(c.Request().Header.Values("Idempotency-Key")) > 0 {
		key, err := idempotencyKey(c)
		if err != nil {
			return err
		}
		err = once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (inventory.Reservation, bool, error) {
			return s.Inventory.ReleaseItemsOnce(ctx, k, id, by, body.Reason, items)
		})
		metrics.CountTransition("release", err)
		return err
	}
	r, err := s.Inventory.ReleaseItems(c.Request().Context(), id, by, body.Reason, items)
	metrics.CountTransition("release", err)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

type extendBody struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

// extendReservation moves a held hold's expiry (see inventory.Extend).
func (s *server) extendReservation(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	var body extendBody
	if err := decode(c, &body); err != nil {
		return err
	}
	if body.TTLSeconds == nil {
		return domain.Invalid("ttl_seconds is required: how long from now the hold should last")
	}
	r, err := s.Inventory.Extend(c.Request().Context(), id, asCaller(c), *body.TTLSeconds)
	metrics.CountTransition("extend", err)
	if err != nil {
		return err
	}
	logHold(c.Request().Context(), r)
	return c.JSON(http.StatusOK, r)
}

// listReservations pages through the holds the caller may see (an ops key
// every client's), newest first, filtered by order_ref, status and sku;
// with expires_before, only the holds expiring before it, soonest first.
func (s *server) listReservations(c echo.Context) error {
	p, err := pageParams(c, inventory.MaxListPage, "")
	if err != nil {
		return err
	}
	lq := inventory.ListQuery{OrderRef: c.QueryParam("order_ref"), Status: inventory.HoldStatus(c.QueryParam("status")), SKU: c.QueryParam("sku"), Limit: p.Limit}
	if lq.Before, err = uuidCursor(p); err != nil {
		return err
	}
	if v := c.QueryParam("expires_before"); v != "" {
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return badRequest("expires_before must be a time in RFC 3339 (2026-12-01T10:00:00Z)")
		}
		lq.ExpiresBefore = &at
	}
	page, err := s.Inventory.List(c.Request().Context(), lq, asCaller(c))
	if errors.Is(err, stock.ErrCursor) {
		return badCursor()
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// logSKUs puts a hold's SKUs in the request's log lines: "sku" for one,
// "skus" for several.
func logSKUs(ctx context.Context, items []inventory.Item) {
	if len(items) == 1 {
		logging.Add(ctx, slog.String("sku", items[0].SKU))
		return
	}
	skus := make([]string, 0, len(items))
	for _, it := range items {
		if !slices.Contains(skus, it.SKU) {
			skus = append(skus, it.SKU)
		}
	}
	if len(skus) == 1 {
		logging.Add(ctx, slog.String("sku", skus[0]))
	} else if len(skus) > 1 {
		logging.Add(ctx, slog.Any("skus", skus))
	}
}

// logHold puts a hold's id and order reference on its request's log lines.
func logHold(ctx context.Context, r inventory.Reservation) {
	logging.Add(ctx, slog.String("hold_id", r.ID.String()))
	if r.OrderRef != nil {
		logging.Add(ctx, slog.String("order_ref", *r.OrderRef))
	}
}
