package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
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
	once, err := onceKey(c, key, body)
	if err != nil {
		return err
	}
	req, replayed, err := s.Reconcile.RequestOnce(c.Request().Context(), once, reconcile.TriggerHTTP, body.SKUs)
	if err != nil {
		return err
	}
	return answerOnce(c, http.StatusAccepted, req, replayed)
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
