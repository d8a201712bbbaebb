package api

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

// checked is an operator's answer followed by the reconciliation that ran
// after the action (null when none ran: a dry run, a forced resume, or a
// run that failed and is logged).
type checked struct {
	Reconciliation *reconcile.Check `json:"reconciliation"`
}

type adjustAnswer struct {
	stock.Stock
	// DryRun says the stock is as the adjustment would leave it: nothing
	// changed.
	DryRun bool `json:"dry_run,omitempty"`
	checked
}

type liftBody struct {
	Location string   `json:"location,omitempty"`
	Pool     string   `json:"pool"`
	Reason   string   `json:"reason"`
	Force    bool     `json:"force"`
	Refs     []string `json:"refs"`
}

// resumeStock lifts a pool's pause through its gate: 409 books_unbalanced
// while its books disagree, unless force.
func (s *server) resumeStock(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body liftBody
	if err := decode(c, &body); err != nil {
		return err
	}
	l := stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: sku, Location: body.Location, Pool: body.Pool, Reason: body.Reason, Actor: caller(c).Name, Refs: body.Refs}, Force: body.Force}
	out, run, err := s.Reconcile.Resume(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resumed{Stock: out.Stock, Lifted: out.Paused, checked: checked{run}})
}

// resumed is a resume's answer: the stock, the pause it lifted, and the
// reconciliation that followed.
type resumed struct {
	stock.Stock
	// Lifted is the pause the resume lifted (who, why, when; a protection
	// rule's pause names its rule): null when the pool was on sale.
	Lifted *stock.Pause `json:"lifted"`
	checked
}

type repairBody struct {
	Location string   `json:"location,omitempty"`
	Pool     string   `json:"pool"`
	To       string   `json:"to"`
	Reason   string   `json:"reason"`
	DryRun   bool     `json:"dry_run"`
	Refs     []string `json:"refs"`
	// ExpectedDifference is the difference the preview showed: the apply
	// is refused (409 preview_stale) when the books moved since.
	ExpectedDifference *stock.Counters `json:"expected_difference"`
}

type repairAnswer struct {
	stock.Repaired
	checked
}

// repairStock closes the gap between a pool's counters and its ledger, or
// previews it (dry_run).
func (s *server) repairStock(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body repairBody
	if err := decode(c, &body); err != nil {
		return err
	}
	out, run, err := s.Reconcile.Repair(c.Request().Context(), stock.RepairRequest{
		SKU: sku, Location: body.Location, Pool: body.Pool, To: body.To, Reason: body.Reason, Actor: caller(c).Name, DryRun: body.DryRun, Refs: body.Refs,
		ExpectedDifference: body.ExpectedDifference,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, repairAnswer{Repaired: out, checked: checked{run}})
}

type stopSaleBody struct {
	Active *bool  `json:"active"`
	Reason string `json:"reason"`
	// Client, when set, is the key owner whose holds alone the switch
	// stops; Location, when set, the location whose sales alone it stops;
	// neither: everything.
	Client   string `json:"client"`
	Location string `json:"location,omitempty"`
}

// getStopSale answers every stop-sale switch: the one for everything and
// each client's.
func (s *server) getStopSale(c echo.Context) error {
	st, err := s.Inventory.StopSales(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// putStopSale turns the switch for everything, one client's or one
// location's on or off; turning one off answers what it lifted.
func (s *server) putStopSale(c echo.Context) error {
	var body stopSaleBody
	if err := decode(c, &body); err != nil {
		return err
	}
	if body.Active == nil {
		return domain.Invalid("active is required: true stops new holds, false lets them in again")
	}
	st, err := s.Inventory.SetStopSale(c.Request().Context(), stock.StopSaleChange{
		Client: body.Client, Location: body.Location, Active: *body.Active, Reason: body.Reason, Actor: caller(c).Name,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

type campaignSwitchBody struct {
	Reason string `json:"reason"`
	Force  bool   `json:"force"`
}

type campaignSwitched struct {
	stock.PoolSwitched
	checked
}

func (s *server) pauseCampaign(c echo.Context) error  { return s.switchCampaign(c, false) }
func (s *server) resumeCampaign(c echo.Context) error { return s.switchCampaign(c, true) }

func (s *server) switchCampaign(c echo.Context, on bool) error {
	id, err := nameParam(c, "id", "campaign")
	if err != nil {
		return err
	}
	var body campaignSwitchBody
	if err := decode(c, &body); err != nil {
		return err
	}
	if body.Force && !on {
		return domain.Invalid("force applies to resume only")
	}
	out, run, err := s.Reconcile.SwitchCampaign(c.Request().Context(), stock.PoolSwitch{
		Pool: id, On: on, Force: body.Force, Reason: body.Reason, Actor: caller(c).Name,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, campaignSwitched{PoolSwitched: out, checked: checked{run}})
}

// reinstateReservation holds again the lines of a released or expired hold
// (a late payment), all or nothing; again, it answers the hold it made.
func (s *server) reinstateReservation(c echo.Context) error {
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	if err := decodeOptional(c, &struct{}{}); err != nil {
		return err
	}
	r, err := s.Inventory.Reinstate(c.Request().Context(), id, asCaller(c))
	if err != nil {
		return err
	}
	// hold_id is the path's, the hold reinstated; the new hold is
	// reinstated_as.
	logging.Add(c.Request().Context(), slog.String("reinstated_as", r.ID.String()))
	if r.OrderRef != nil {
		logging.Add(c.Request().Context(), slog.String("order_ref", *r.OrderRef))
	}
	return c.JSON(http.StatusOK, r)
}

type takeBody struct {
	Operator *string `json:"operator"`
}

// takeAlert makes an operator the owner of an alert.
func (s *server) takeAlert(c echo.Context) error {
	id, err := int64Param(c, "id")
	if err != nil {
		return err
	}
	var body takeBody
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	operator, err := operatorOr(body.Operator, caller(c).Name)
	if err != nil {
		return err
	}
	a, err := s.Alerts.Take(c.Request().Context(), id, operator)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

// adjustStock adds to or takes from a pool's stock once per
// Idempotency-Key, then reconciles the SKU; dry_run answers the stock as
// it would be and changes nothing (no Idempotency-Key needed).
func (s *server) adjustStock(c echo.Context) error {
	sku, err := nameParam(c, "sku", "sku")
	if err != nil {
		return err
	}
	var body adjustmentBody
	if err := decode(c, &body); err != nil {
		return err
	}
	a := stock.Adjustment{SKU: sku, Location: body.Location, Pool: body.Pool, Delta: body.Delta, Reason: body.Reason, Ref: body.Ref, Actor: caller(c).Name}
	if body.DryRun {
		st, err := s.Inventory.AdjustPreview(c.Request().Context(), a)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, adjustAnswer{Stock: st, DryRun: true})
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	return once(c, key, body, http.StatusOK, func(ctx context.Context, k idempotency.Key) (adjustAnswer, bool, error) {
		st, replayed, err := s.Inventory.AdjustOnce(ctx, k, a)
		if err != nil {
			return adjustAnswer{}, false, err
		}
		return adjustAnswer{Stock: st, checked: checked{s.Reconcile.After(ctx, reconcile.TriggerAdjustment, sku)}}, replayed, nil
	})
}
