package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/reconcile"
)

// reconciliationBody is the optional body of POST /v1/reconciliations: no
// body, or no skus field, checks every SKU; "skus": [] is refused (422),
// since a client that sends an empty list most likely meant some SKUs.
type reconciliationBody struct {
	SKUs []string `json:"skus"`
}

// createReconciliation records a pending run and enqueues its job in one
// transaction, and answers 202 with the run's id to poll.
func (s *server) createReconciliation(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body reconciliationBody
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	if body.SKUs != nil && len(body.SKUs) == 0 {
		return domain.Invalid("skus is empty: leave it out to check every SKU")
	}
	return once(c, key, body, http.StatusAccepted, func(ctx context.Context, k idempotency.Key) (reconcile.Requested, bool, error) {
		return s.Reconcile.RequestOnce(ctx, k, reconcile.TriggerHTTP, body.SKUs)
	})
}

func (s *server) getLatestReconciliation(c echo.Context) error {
	run, err := s.Reconcile.Latest(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

func (s *server) getReconciliation(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	run, err := s.Reconcile.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}
