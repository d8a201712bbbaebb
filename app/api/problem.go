package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
)

// problem is an RFC 9457 problem detail. Extra members (sku, status, ...)
// sit beside the standard ones.
type problem struct {
	Status int
	Code   string
	Title  string
	Detail string
	Extra  map[string]any
}

func (p *problem) Error() string { return p.Code + ": " + p.Detail }

// MarshalJSON flattens Extra into the object, as RFC 9457 extensions are.
func (p *problem) MarshalJSON() ([]byte, error) {
	m := map[string]any{
		"type":   "/problems/" + p.Code,
		"title":  p.Title,
		"status": p.Status,
		"detail": p.Detail,
		"code":   p.Code,
	}
	for k, v := range p.Extra {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// titles are the short, fixed summaries of each problem code.
var titles = map[string]string{
	"invalid_request":         "The request is invalid",
	"not_found":               "Not found",
	"unknown_sku":             "Unknown SKU",
	"unknown_campaign":        "Unknown campaign",
	"out_of_stock":            "Out of stock",
	"sku_paused":              "SKU paused",
	"campaign_not_active":     "Campaign not active",
	"reservation_not_held":    "Reservation is not held",
	"insufficient_available":  "Not enough stock available",
	"idempotency_key_reused":  "Idempotency-Key reused with a different request",
	"idempotency_key_missing": "Idempotency-Key header missing",
	"idempotency_key_invalid": "Idempotency-Key header invalid",
	"unauthorized":            "Missing or unknown API key",
	"forbidden":               "This API key's role may not do that",
	"method_not_allowed":      "Method not allowed",
	"body_too_large":          "Request body too large",
	"conflict":                "Conflict",
	"timeout":                 "The request took too long",
	"unavailable":             "Service unavailable",
	"busy":                    "A row this request needs is locked; retry in a moment",
	"internal_error":          "Internal error",
}

// statuses maps domain codes to HTTP statuses: the one place that does.
var statuses = map[inventory.Code]int{
	inventory.CodeInvalid:               http.StatusUnprocessableEntity,
	inventory.CodeNotFound:              http.StatusNotFound,
	inventory.CodeUnknownSKU:            http.StatusNotFound,
	inventory.CodeUnknownCampaign:       http.StatusNotFound,
	inventory.CodeOutOfStock:            http.StatusConflict,
	inventory.CodeSKUPaused:             http.StatusConflict,
	inventory.CodeCampaignNotActive:     http.StatusConflict,
	inventory.CodeNotHeld:               http.StatusConflict,
	inventory.CodeInsufficientAvailable: http.StatusConflict,
	inventory.CodeIdempotencyReused:     http.StatusUnprocessableEntity,
	inventory.CodeConflict:              http.StatusConflict,
	inventory.CodeBusy:                  http.StatusServiceUnavailable,
}

func newProblem(status int, code, detail string) *problem {
	return &problem{Status: status, Code: code, Title: titles[code], Detail: detail}
}

func badRequest(detail string) *problem {
	return newProblem(http.StatusBadRequest, "invalid_request", detail)
}

// fromDomain turns a domain error into its problem; status 0 means the
// code's usual status.
func fromDomain(e *inventory.Error, status int) *problem {
	if status == 0 {
		status = statuses[e.Code]
	}
	if status == 0 {
		status = http.StatusConflict
	}
	p := newProblem(status, string(e.Code), e.Detail)
	p.Extra = map[string]any{}
	if e.SKU != "" {
		p.Extra["sku"] = e.SKU
	}
	if e.Pool != "" {
		p.Extra["pool"] = e.Pool
	}
	if e.Status != "" {
		// RFC 9457 reserves "status" for the HTTP status.
		p.Extra["reservation_status"] = e.Status
	}
	return p
}

// problemOf classifies any error a handler returned.
func problemOf(err error) *problem {
	var (
		p  *problem
		de *inventory.Error
		he *echo.HTTPError
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &de):
		return fromDomain(de, 0)
	case errors.Is(err, idempotency.ErrReused):
		return newProblem(http.StatusUnprocessableEntity, "idempotency_key_reused",
			"this Idempotency-Key was used before with a different request")
	case errors.As(err, &he):
		return fromHTTPError(he)
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(http.StatusServiceUnavailable, "timeout", "the request did not finish in time; it is safe to retry with the same Idempotency-Key")
	}
	return newProblem(http.StatusInternalServerError, "internal_error", "something went wrong on our side; it has been logged")
}

func fromHTTPError(he *echo.HTTPError) *problem {
	detail := http.StatusText(he.Code)
	if m, ok := he.Message.(string); ok {
		detail = m
	}
	switch he.Code {
	case http.StatusNotFound:
		return newProblem(he.Code, "not_found", "no such route")
	case http.StatusMethodNotAllowed:
		return newProblem(he.Code, "method_not_allowed", "this route does not take that method")
	case http.StatusRequestEntityTooLarge:
		return newProblem(he.Code, "body_too_large", "request bodies are limited to 64 KiB")
	case http.StatusUnauthorized:
		return newProblem(he.Code, "unauthorized", detail)
	case http.StatusForbidden:
		return newProblem(he.Code, "forbidden", detail)
	case http.StatusServiceUnavailable:
		return newProblem(he.Code, "timeout", "the request did not finish in time; it is safe to retry with the same Idempotency-Key")
	}
	if he.Code >= 500 {
		return newProblem(he.Code, "internal_error", detail)
	}
	return newProblem(he.Code, "invalid_request", detail)
}

// handleError is echo's one HTTPErrorHandler: every error becomes
// application/problem+json, and a 500 is logged, since it is a bug.
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemOf(err)
	if p.Status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method,
			"path", c.Request().URL.Path, "status", p.Status, "err", err)
	}
	if p.Status == http.StatusUnauthorized && c.Response().Header().Get("WWW-Authenticate") == "" {
		// Browser pages under /ops/ set their own Basic challenge.
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="stockhold"`)
	}
	body, merr := json.Marshal(p)
	if merr != nil {
		body = []byte(`{"type":"/problems/internal_error","status":500,"code":"internal_error"}`)
	}
	if p.Status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "1")
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	if c.Request().Method != http.MethodHead {
		_, _ = c.Response().Write(body)
	}
}
