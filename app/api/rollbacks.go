package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// rollbackBody is POST /v1/rollbacks, and also the args of a manual_rollback
// job inserted with plain SQL. The optional names are pointers so that one
// given empty ("campaign": "" next to "sku") is refused, as the job's
// strict decoding refuses it, rather than read as absent.
type rollbackBody struct {
	Operator       string      `json:"operator"`
	Reason         string      `json:"reason"`
	DryRun         bool        `json:"dry_run"`
	ReservationIDs []uuid.UUID `json:"reservation_ids"`
	Campaign       *string     `json:"campaign"`
	SKU            *string     `json:"sku"`
	Pool           *string     `json:"pool"`
	Location       *string     `json:"location,omitempty"`
	HeldBefore     *time.Time  `json:"held_before"`
	Cutoff         *time.Time  `json:"cutoff"`
}

// scope returns the body's scope; a name given empty is refused.
func (b rollbackBody) scope() (rollbacks.Scope, error) {
	s := rollbacks.Scope{ReservationIDs: b.ReservationIDs, HeldBefore: b.HeldBefore, Cutoff: b.Cutoff}
	for _, f := range []struct {
		name string
		from *string
		to   *string
	}{{"campaign", b.Campaign, &s.Campaign}, {"sku", b.SKU, &s.SKU}, {"pool", b.Pool, &s.Pool}, {"location", b.Location, &s.Location}} {
		if f.from == nil {
			continue
		}
		if *f.from == "" {
			return s, domain.Invalid("%s is empty: leave it out", f.name)
		}
		*f.to = *f.from
	}
	return s, nil
}

func (s *server) createRollback(c echo.Context) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var body rollbackBody
	if err := decode(c, &body); err != nil {
		return err
	}
	scope, err := body.scope()
	if err != nil {
		return err
	}
	req := rollbacks.Request{
		Operator: body.Operator, Reason: body.Reason, DryRun: body.DryRun, Source: rollbacks.SourceHTTP, Scope: scope,
	}
	return once(c, key, body, http.StatusAccepted, func(ctx context.Context, k idempotency.Key) (rollbacks.Created, bool, error) {
		return s.Rollbacks.CreateOnce(ctx, k, req)
	})
}

func (s *server) getRollback(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	out, err := s.Rollbacks.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

type resumeBody struct {
	Operator *string `json:"operator"`
}

// resumeRollback gives a rollback whose chain of jobs was stranded
// (cancelled, deleted, discarded) a job again. It is idempotent: a request
// that has a live job, or is finished, is answered as it is.
func (s *server) resumeRollback(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	var body resumeBody
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	operator, err := operatorOr(body.Operator, caller(c).Name)
	if err != nil {
		return err
	}
	out, err := s.Rollbacks.Resume(c.Request().Context(), id, operator)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

// operatorOr is the operator a body names, or def when it names none. An
// operator given empty is refused (422) rather than taken for absent: the
// document requires a name, and a client that sends "" most likely lost
// the value it meant to send.
func operatorOr(given *string, def string) (string, error) {
	if given == nil {
		return def, nil
	}
	if err := domain.ValidName("operator", *given); err != nil {
		return "", err
	}
	return *given, nil
}

// int64Param returns a path parameter that must be a positive integer id.
func int64Param(c echo.Context, name string) (int64, error) {
	n, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || n < 1 {
		return 0, badRequest(name + " must be a positive whole number")
	}
	return n, nil
}
