package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/webhooks"
)

type eventsPage struct {
	Events []events.Event `json:"events"`
	// NextCursor is the cursor to read on from: the id of the page's last
	// event, or null when the page is empty (the reader is caught up:
	// read again later with the same cursor). A feed has no last page;
	// its end is where no event follows yet.
	NextCursor *string `json:"next_cursor"`
	// Next is the deprecated form: the id of the page's last event, or
	// the cursor given when the page is empty.
	Next string `json:"next"`
}

// getEvents reads the event feed after a cursor (an event id).
func (s *server) getEvents(c echo.Context) error {
	p, err := pageParams(c, events.MaxPage, "after")
	if err != nil {
		return err
	}
	after := events.Start
	if p.Cursor != "" {
		if after, err = events.ParsePosition(p.Cursor); err != nil {
			return badRequest("cursor must be an event id (the next_cursor of a previous page), such as 7412-1039-0")
		}
	}
	page, err := s.Events.Read(c.Request().Context(), after, p.Limit)
	if err != nil {
		return err
	}
	out := eventsPage{Events: page.Events, Next: page.Next.String()}
	if len(page.Events) > 0 {
		out.NextCursor = &out.Next
	}
	return c.JSON(http.StatusOK, out)
}

type thresholdBody struct {
	Location string `json:"location,omitempty"`
	Pool     string `json:"pool"`
	// Threshold is required; null removes the threshold.
	Threshold json.RawMessage `json:"threshold"`
}

// setThreshold sets or removes a pool's low-stock threshold.
func (s *server) setThreshold(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body thresholdBody
	if err := decode(c, &body); err != nil {
		return err
	}
	t := stock.Threshold{SKU: sku, Location: body.Location, Pool: body.Pool, Actor: caller(c).Name}
	switch string(body.Threshold) {
	case "":
		return domain.Invalid("threshold is required: a whole number, or null to remove the threshold")
	case "null":
	default:
		var n int64
		if err := decodeJSON(body.Threshold, &n); err != nil {
			return badRequest("threshold must be a whole number or null")
		}
		t.Threshold = &n
	}
	st, err := s.Inventory.SetThreshold(c.Request().Context(), t)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

type webhookBody struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// createWebhook registers a webhook, once per Idempotency-Key; the answer
// (and only it, and its replays) carries the secret.
func (s *server) createWebhook(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body webhookBody
	if err := decode(c, &body); err != nil {
		return err
	}
	r := webhooks.Register{URL: body.URL, Events: body.Events, Actor: caller(c).Name}
	return once(c, key, body, http.StatusCreated, func(ctx context.Context, k idempotency.Key) (webhooks.Created, bool, error) {
		return s.Webhooks.CreateOnce(ctx, k, r)
	})
}

type webhookList struct {
	Webhooks   []webhooks.Webhook `json:"webhooks"`
	NextCursor *string            `json:"next_cursor"`
}

// listWebhooks pages through the webhooks in id order.
func (s *server) listWebhooks(c echo.Context) error {
	p, err := pageParams(c, webhooks.MaxList, "")
	if err != nil {
		return err
	}
	after, err := intCursor(p)
	if err != nil {
		return err
	}
	out, next, err := s.Webhooks.Page(c.Request().Context(), after, p.Limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhookList{Webhooks: out, NextCursor: cursorOf(next)})
}

func (s *server) getWebhook(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	w, err := s.Webhooks.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w)
}

func (s *server) deleteWebhook(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	if err := s.Webhooks.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
