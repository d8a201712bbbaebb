package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/idempotency"
)

type campaignBody struct {
	ID             string    `json:"id"`
	StartsAt       time.Time `json:"starts_at"`
	EndsAt         time.Time `json:"ends_at"`
	HoldTTLSeconds int64     `json:"hold_ttl_seconds"`
	MaxPerOrder    *int64    `json:"max_per_order"`
	// MaxPerCustomer caps the units of one SKU one customer's holds take.
	MaxPerCustomer        *int64 `json:"max_per_customer"`
	CustomerWindowSeconds *int64 `json:"customer_window_seconds"`
	// Location is where allotments that name none are carved from.
	Location   string                `json:"location,omitempty"`
	Allotments []campaigns.Allotment `json:"allotments"`
}

func (s *server) createCampaign(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body campaignBody
	if err := decode(c, &body); err != nil {
		return err
	}
	create := campaigns.Request{
		ID: body.ID, StartsAt: body.StartsAt, EndsAt: body.EndsAt, HoldTTLSeconds: body.HoldTTLSeconds,
		MaxPerOrder: body.MaxPerOrder, MaxPerCustomer: body.MaxPerCustomer, CustomerWindowSeconds: body.CustomerWindowSeconds,
		Location: body.Location, Allotments: body.Allotments, Actor: caller(c).Name,
	}
	return once(c, key, body, http.StatusCreated, func(ctx context.Context, k idempotency.Key) (campaigns.Campaign, bool, error) {
		return s.Campaigns.CreateOnce(ctx, k, create)
	})
}

func (s *server) getCampaign(c echo.Context) error {
	id, err := nameParam(c, "id", "campaign id")
	if err != nil {
		return err
	}
	out, err := s.Campaigns.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

type endBody struct {
	Operator *string `json:"operator"`
	Reason   string  `json:"reason"`
}

func (s *server) endCampaign(c echo.Context) error {
	id, err := nameParam(c, "id", "campaign id")
	if err != nil {
		return err
	}
	var body endBody
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	operator, err := operatorOr(body.Operator, caller(c).Name)
	if err != nil {
		return err
	}
	out, err := s.Campaigns.End(c.Request().Context(), id, operator, body.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}
