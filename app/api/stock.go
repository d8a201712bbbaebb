package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/stock"
)

type adjustmentBody struct {
	Delta    int64  `json:"delta"`
	Location string `json:"location,omitempty"`
	Pool     string `json:"pool"`
	Reason   string `json:"reason"`
	Ref      string `json:"ref"`
	DryRun   bool   `json:"dry_run"`
}

// once answers an idempotent request: call runs with the request's
// idempotency key (the caller, the Idempotency-Key, and the method, path
// and decoded body, so that the same key with another body is a 422), and
// its result is answered with status, first or replayed (then with
// Idempotent-Replayed: true).
func once[T any](c echo.Context, key string, body any, status int,
	call func(context.Context, idempotency.Key) (T, bool, error)) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	r := c.Request()
	k := idempotency.NewKey(caller(c).Name, key, []byte(r.Method), []byte(r.URL.Path), raw)
	out, replayed, err := call(r.Context(), k)
	if err != nil {
		return err
	}
	if replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return c.JSON(status, out)
}

// onceIfKeyed answers a step that is not idempotent by nature (a receipt,
// a close, a cancel): at most once per Idempotency-Key when the request
// has one (once), else plainly.
func onceIfKeyed[T any](c echo.Context, body any, plain func(context.Context) (T, error),
	call func(context.Context, idempotency.Key) (T, bool, error)) error {
	if len(c.Request().Header.Values("Idempotency-Key")) > 0 {
		key, err := idempotencyKey(c)
		if err != nil {
			return err
		}
		return once(c, key, body, http.StatusOK, call)
	}
	out, err := plain(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *server) getStock(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	st, err := s.Inventory.GetStock(c.Request().Context(), sku)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// getPickup answers where a SKU can be collected now.
func (s *server) getPickup(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	p, err := s.Inventory.Pickup(c.Request().Context(), sku)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

type switchBody struct {
	Location string `json:"location,omitempty"`
	Pool     string `json:"pool"`
	Reason   string `json:"reason"`
}

func (s *server) pauseStock(c echo.Context) error {
	return s.flipSwitch(c, s.Inventory.Pause)
}

func (s *server) flipSwitch(c echo.Context, flip func(context.Context, stock.SwitchRequest) (stock.Stock, error)) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body switchBody
	if err := decode(c, &body); err != nil {
		return err
	}
	st, err := flip(c.Request().Context(), stock.SwitchRequest{SKU: sku, Location: body.Location, Pool: body.Pool, Reason: body.Reason, Actor: caller(c).Name})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

type ledgerPage struct {
	SKU       string           `json:"sku"`
	Movements []stock.Movement `json:"movements"`
	// NextCursor is the cursor of the next (older) page; null on the
	// oldest page.
	NextCursor *string `json:"next_cursor"`
	// NextBeforeID is next_cursor as a number, under the deprecated name.
	NextBeforeID *int64 `json:"next_before_id"`
}

func (s *server) getLedger(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	p, err := pageParams(c, stock.MaxLedgerPage, "before_id")
	if err != nil {
		return err
	}
	before, err := intCursor(p)
	if err != nil {
		return err
	}
	page, err := s.Inventory.Ledger(c.Request().Context(), sku, p.Limit, before)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ledgerPage{SKU: sku, Movements: page.Movements,
		NextCursor: cursorOf(page.NextBeforeID), NextBeforeID: page.NextBeforeID})
}

type catalogueAnswer struct {
	SKUs []stock.Stock `json:"skus"`
	// Missing, in a batch's answer only, lists the SKUs named that have
	// no stock.
	Missing    *[]string `json:"missing,omitempty"`
	NextCursor *string   `json:"next_cursor"`
}

// listSKUs pages through the SKUs with their stock, in SKU order, filtered
// by low_stock, updated_since and location; with sku=A1&sku=B2 it answers
// those SKUs in one page, the ones with no stock listed as missing.
func (s *server) listSKUs(c echo.Context) error {
	p, err := pageParams(c, stock.MaxCataloguePage, "")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	for _, name := range []string{"low_stock", "updated_since", "location"} {
		if len(q[name]) > 1 {
			return badRequest("give " + name + " once")
		}
	}
	cq := stock.CatalogueQuery{After: p.Cursor, Limit: p.Limit, SKUs: q["sku"], Location: q.Get("location")}
	if p.Cursor != "" && domain.ValidName("cursor", p.Cursor) != nil {
		return badCursor()
	}
	if len(cq.SKUs) > 0 && p.Cursor != "" {
		return badRequest("a batch (sku=...) is one page: leave cursor out")
	}
	if v := q.Get("low_stock"); v != "" {
		if cq.LowStock, err = strconv.ParseBool(v); err != nil {
			return badRequest("low_stock must be true or false")
		}
	}
	if v := q.Get("updated_since"); v != "" {
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return badRequest("updated_since must be a time in RFC 3339 (2026-12-01T10:00:00Z)")
		}
		cq.UpdatedSince = &at
	}
	page, err := s.Inventory.Catalogue(c.Request().Context(), cq)
	if err != nil {
		return err
	}
	out := catalogueAnswer{SKUs: page.SKUs, NextCursor: page.Next}
	if len(cq.SKUs) > 0 {
		out.Missing = &page.Missing
	}
	return c.JSON(http.StatusOK, out)
}
