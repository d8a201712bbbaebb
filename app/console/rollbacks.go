package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/rollbacks"
)

type rollbackListData struct {
	Rollbacks []rollbacks.Rollback
	// Nonce makes the dry-run form's post idempotent: sent twice (a double
	// click, a reload), it starts one dry run.
	Nonce string
}

// rollbackList shows rollback requests (who, why, scope, counts) and the
// form that starts one, which always starts with a dry run.
func (c *Console) rollbackList(w http.ResponseWriter, r *http.Request, op who) error {
	rows, err := db.New(c.Pool).RollbackList(r.Context(), 50)
	if err != nil {
		return err
	}
	d := rollbackListData{Nonce: randomToken()}
	for _, row := range rows {
		rb, err := rollbacks.View(row)
		if err != nil {
			return err
		}
		d.Rollbacks = append(d.Rollbacks, rb)
	}
	return c.render(w, r, op, "rollbacks", view{Title: "Rollbacks", Nav: "rollbacks", Data: d})
}

// rollbackForm reads the rollback form: a reason and one scope (a SKU's
// pool held before a time, a campaign, or hold ids).
func rollbackForm(form url.Values, operator string) (rollbacks.Request, error) {
	req := rollbacks.Request{
		Operator: operator, Reason: strings.TrimSpace(form.Get("reason")), DryRun: true, Source: rollbacks.SourceHTTP,
		Scope: rollbacks.Scope{
			SKU: strings.TrimSpace(form.Get("sku")), Pool: strings.TrimSpace(form.Get("pool")),
			Campaign: strings.TrimSpace(form.Get("campaign")),
		},
	}
	if v := strings.TrimSpace(form.Get("held_before")); v != "" {
		t, err := parseTime(v)
		if err != nil {
			return req, domain.Invalid("held_before %q is not a time such as 2026-11-29T14:00 (UTC)", v)
		}
		req.Scope.HeldBefore = &t
	}
	for _, f := range strings.Fields(strings.NewReplacer(",", " ").Replace(form.Get("reservation_ids"))) {
		id, err := uuid.Parse(f)
		if err != nil {
			return req, domain.Invalid("%q is not a hold id", f)
		}
		req.Scope.ReservationIDs = append(req.Scope.ReservationIDs, id)
	}
	return req, req.Validate()
}

// parseTime reads RFC 3339, or a datetime-local field's value taken as UTC.
func parseTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05", v); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02T15:04", v)
}

// dryRun starts a dry run of the form's rollback: it counts what would be
// released and changes nothing. The real rollback is sent from the dry
// run's page, once its count is known.
func (c *Console) dryRun(w http.ResponseWriter, r *http.Request, op who) error {
	req, err := rollbackForm(r.PostForm, op.Key.Name)
	if err != nil {
		return c.refused(w, r, "/ops/rollbacks", err)
	}
	out, err := once(r.Context(), op, "rollback-dry-run:"+r.PostForm.Get("nonce"), req,
		func(ctx context.Context, k idempotency.Key) (rollbacks.Created, bool, error) {
			return c.Rollbacks.CreateOnce(ctx, k, req)
		})
	if err != nil {
		return c.refused(w, r, "/ops/rollbacks", err)
	}
	return c.done(w, r, "/ops/rollbacks/"+strconv.FormatInt(out.RollbackID, 10), false,
		"Dry run #%d is counting the holds in scope; nothing is released.", out.RollbackID)
}

type rollbackData struct {
	Rollback rollbacks.Rollback
	// CanRun is true on a finished dry run that found holds: its page
	// offers the real rollback, showing the count first.
	CanRun bool
}

// rollback shows one request; a finished dry run with holds in scope
// offers the real rollback.
func (c *Console) rollback(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Missing("rollback")
	}
	rb, err := c.Rollbacks.Get(r.Context(), id)
	if err != nil {
		return err
	}
	d := rollbackData{Rollback: rb, CanRun: canRun(rb)}
	v := view{Title: "Rollback #" + r.PathValue("id"), Nav: "rollbacks", Data: d}
	if !rb.Done() {
		v.Refresh = 1
	}
	return c.render(w, r, op, "rollback", v)
}

func canRun(rb rollbacks.Rollback) bool {
	return rb.DryRun && rb.Status == rollbacks.StatusSucceeded && rb.MatchedCount != nil && *rb.MatchedCount > 0
}

// runRollback sends the real rollback of a finished dry run, with the dry
// run's scope and reason and its cut-off, as the operator who clicks: the
// real run releases the holds the dry run counted (those still held) and
// none made since. Each dry run is run at most once per operator.
func (c *Console) runRollback(w http.ResponseWriter, r *http.Request, op who) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return domain.Missing("rollback")
	}
	back := "/ops/rollbacks/" + r.PathValue("id")
	dry, err := c.Rollbacks.Get(r.Context(), id)
	if err != nil {
		return err
	}
	if !canRun(dry) {
		return c.done(w, r, back, true, "Only a finished dry run that found holds can be run.")
	}
	scope, cut := dry.Scope, dry.Cutoff()
	scope.Cutoff = &cut
	req := rollbacks.Request{Operator: op.Key.Name, Reason: dry.Reason, Scope: scope, Source: rollbacks.SourceHTTP}
	out, err := once(r.Context(), op, "rollback-run:"+r.PathValue("id"), req,
		func(ctx context.Context, k idempotency.Key) (rollbacks.Created, bool, error) {
			return c.Rollbacks.CreateOnce(ctx, k, req)
		})
	if err != nil {
		return c.refused(w, r, back, err)
	}
	return c.done(w, r, "/ops/rollbacks/"+strconv.FormatInt(out.RollbackID, 10), false,
		"Rollback #%d started from dry run #%d, which counted %d %s.", out.RollbackID, id, *dry.MatchedCount, noun(*dry.MatchedCount, "hold", "holds"))
}

// once runs create, a service's idempotent call, at most once per
// operator and form key, as the API's Idempotency-Key does: a form sent
// twice gets the first answer. body identifies the request.
func once[T any](ctx context.Context, op who, key string, body any,
	create func(context.Context, idempotency.Key) (T, bool, error)) (T, error) {
	var zero T
	if err := domain.ValidRef("the form's nonce", key, 200); err != nil {
		return zero, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return zero, err
	}
	out, _, err := create(ctx, idempotency.NewKey(op.Key.Name, "console:"+key, raw))
	if errors.Is(err, domain.ErrKeyReused) {
		return zero, domain.Invalid("this form was already sent with other values; reload the page")
	}
	return out, err
}
