package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/stock"
)

// campaignList shows campaigns, running and rolling-back ones first.
func (c *Console) campaignList(w http.ResponseWriter, r *http.Request, op who) error {
	list, err := db.New(c.Pool).CampaignList(r.Context(), 100)
	if err != nil {
		return err
	}
	return c.render(w, r, op, "campaigns", view{Title: "Campaigns", Nav: "campaigns", Data: list})
}

// campaign shows a campaign's allotments, pools and rollback progress, and
// the form that ends it now.
func (c *Console) campaign(w http.ResponseWriter, r *http.Request, op who) error {
	cp, err := c.Campaigns.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	v := view{Title: "Campaign " + cp.ID, Nav: "campaigns", Data: cp}
	if cp.Status == campaigns.StatusEnded {
		v.Refresh = 3 // rolling back: watch it go
	}
	return c.render(w, r, op, "campaign", v)
}

// endCampaign ends a campaign at once, as the operator: it stops taking
// holds and its unpaid holds start rolling back.
func (c *Console) endCampaign(w http.ResponseWriter, r *http.Request, op who) error {
	id := r.PathValue("id")
	back := "/ops/campaigns/" + url.PathEscape(id)
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		return c.done(w, r, back, true, "Say why the campaign ends early.")
	}
	out, err := c.Campaigns.End(r.Context(), id, op.Key.Name, reason)
	if err != nil {
		return c.refused(w, r, back, err)
	}
	return c.done(w, r, back, false, "Campaign %s ended; rollback #%d releases its unpaid holds.", id, out.RollbackID)
}

// switchCampaign pauses (on false) or resumes every pool of a campaign, as
// the API's campaign switches do (a resume gated by each pool's books).
func (c *Console) switchCampaign(on bool) func(http.ResponseWriter, *http.Request, who) error {
	return func(w http.ResponseWriter, r *http.Request, op who) error {
		id := r.PathValue("id")
		back := "/ops/campaigns/" + url.PathEscape(id)
		reason := strings.TrimSpace(r.PostForm.Get("reason"))
		out, run, err := c.Reconcile.SwitchCampaign(r.Context(), stock.PoolSwitch{Pool: id, On: on, Reason: reason, Actor: op.Key.Name})
		if err != nil {
			return c.refused(w, r, back, err)
		}
		verb := "paused"
		if on {
			verb = "resumed"
		}
		msg := fmt.Sprintf("Campaign %s: %d %s %s.", id, out.Changed, noun(out.Changed, "pool", "pools"), verb)
		if run != nil {
			msg += fmt.Sprintf(" Reconciliation #%d afterwards: %d high-risk %s.", run.ID, run.HighRisk, noun(run.HighRisk, "finding", "findings"))
		}
		return c.done(w, r, back, false, "%s", msg)
	}
}
