package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/stock"
)

type bulkBody struct {
	Reason string         `json:"reason"`
	Ref    string         `json:"ref"`
	Lines  []bulkLineBody `json:"lines"`
}

type bulkLineBody struct {
	SKU      string `json:"sku"`
	Location string `json:"location,omitempty"`
	Pool     string `json:"pool"`
	Delta    *int64 `json:"delta"`
	SetTotal *int64 `json:"set_total"`
}

type bulkAnswer struct {
	SKUs []stock.Stock `json:"skus"`
}

// adjustStockInBulk applies up to 1,000 adjustment lines in one
// transaction, all or nothing, once per Idempotency-Key.
func (s *server) adjustStockInBulk(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body bulkBody
	if err := decode(c, &body); err != nil {
		return err
	}
	b := stock.BulkAdjustment{Reason: body.Reason, Ref: body.Ref, Actor: caller(c).Name, Lines: make([]stock.BulkLine, len(body.Lines))}
	for i, l := range body.Lines {
		b.Lines[i] = stock.BulkLine{SKU: l.SKU, Location: l.Location, Pool: l.Pool, SetTotal: l.SetTotal}
		if l.Delta != nil {
			b.Lines[i].Delta = *l.Delta
		}
		if (l.Delta == nil) == (l.SetTotal == nil) || l.Delta != nil && *l.Delta == 0 {
			n := i
			return &domain.Error{Code: domain.CodeInvalid, Line: &n, SKU: l.SKU, Pool: l.Pool,
				Detail: fmt.Sprintf("lines[%d]: give either a non-zero delta or set_total", i)}
		}
	}
	if err := b.Validate(); err != nil {
		return err
	}
	return once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (bulkAnswer, bool, error) {
		res, replayed, err := s.Inventory.AdjustManyOnce(ctx, k, b)
		return bulkAnswer{SKUs: res.SKUs}, replayed, err
	})
}
