package console

import (
	"context"
	"net/http"
	"strconv"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/reconcile"
)

type alertsData struct {
	Status string
	Alerts []alerts.Alert
}

// alertList shows alerts, the open ones unless ?status= says otherwise
// (open, acked, resolved, or all).
func (c *Console) alertList(w http.ResponseWriter, r *http.Request, op who) error {
	status := r.URL.Query().Get("status")
	if status == "" {
		status = alerts.StatusOpen
	}
	filter := status
	if status == "all" {
		filter = ""
	}
	list, err := c.Alerts.List(r.Context(), filter, 200)
	if err != nil {
		return err
	}
	return c.render(w, r, op, "alerts", view{Title: "Alerts", Nav: "alerts", Data: alertsData{Status: status, Alerts: list}})
}

// ack records that the operator is on an alert.
func (c *Console) ack(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Missing("alert")
	}
	a, err := c.Alerts.Ack(r.Context(), id, op.Key.Name)
	if err != nil {
		return c.refused(w, r, "/ops/alerts", err)
	}
	return c.done(w, r, "/ops/alerts", false, "Alert #%d (%s) acknowledged by %s.", a.ID, a.Kind, op.Key.Name)
}

type reconciliationsData struct {
	Runs  []db.ReconcileRun
	Nonce string
}

// reconciliationList shows the latest runs and the form that runs one now.
func (c *Console) reconciliationList(w http.ResponseWriter, r *http.Request, op who) error {
	runs, err := db.New(c.Pool).ReconcileRunList(r.Context(), 30)
	if err != nil {
		return err
	}
	d := reconciliationsData{Runs: runs, Nonce: randomToken()}
	return c.render(w, r, op, "reconciliations", view{Title: "Reconciliations", Nav: "reconciliations", Data: d})
}

// reconciliation shows one run with its findings by class.
func (c *Console) reconciliation(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Missing("reconciliation run")
	}
	run, err := c.Reconcile.Get(r.Context(), id)
	if err != nil {
		return err
	}
	v := view{Title: "Reconciliation #" + r.PathValue("id"), Nav: "reconciliations", Data: run}
	if run.Status == "pending" || run.Status == "running" {
		v.Refresh = 2
	}
	return c.render(w, r, op, "reconciliation", v)
}

// reconcileNow asks for a reconciliation of every SKU.
func (c *Console) reconcileNow(w http.ResponseWriter, r *http.Request, op who) error {
	out, err := once(r.Context(), op, "reconcile:"+r.PostForm.Get("nonce"), "all",
		func(ctx context.Context, k idempotency.Key) (reconcile.Requested, bool, error) {
			return c.Reconcile.RequestOnce(ctx, k, reconcile.TriggerHTTP, nil)
		})
	if err != nil {
		return c.refused(w, r, "/ops/reconciliations", err)
	}
	return c.done(w, r, "/ops/reconciliations/"+strconv.FormatInt(out.RunID, 10), false,
		"Reconciliation #%d requested by %s.", out.RunID, op.Key.Name)
}
