package console

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
)

// overviewAlerts is how many open alerts the overview lists.
const overviewAlerts = 10

type overviewData struct {
	OpenAlerts     []alerts.Alert
	OpenAlertCount int
	Stats          inventory.Stats
	Rollbacks      []rollbacks.Rollback
	Campaigns      []campaigns.Campaign
	Reconciliation *reconcile.Run
	Backlog        []db.MetricsJobBacklogRow
	Webhooks       []webhooks.Webhook
}

// overview answers the 2 a.m. questions on one page: open alerts, holds
// stuck past expiry, rollbacks and campaigns in progress, the latest
// reconciliation, the last hour's hold outcomes, River's backlog and the
// webhooks' lag.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, op who) error {
	ctx := r.Context()
	var d overviewData
	open, err := c.Alerts.List(ctx, alerts.StatusOpen, alerts.MaxList)
	if err != nil {
		return err
	}
	d.OpenAlertCount = len(open)
	d.OpenAlerts = open[:min(len(open), overviewAlerts)]
	if d.Stats, err = c.Inventory.Stats(ctx, time.Hour); err != nil {
		return err
	}
	q := db.New(c.Pool)
	rows, err := q.RollbackList(ctx, 20)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if row.Status != rollbacks.StatusPending && row.Status != rollbacks.StatusRunning {
			break // unfinished ones come first
		}
		rb, err := rollbacks.View(row)
		if err != nil {
			return err
		}
		d.Rollbacks = append(d.Rollbacks, rb)
	}
	list, err := q.CampaignList(ctx, 10)
	if err != nil {
		return err
	}
	for _, cp := range list {
		if cp.Status != campaigns.StatusActive && cp.Status != campaigns.StatusEnded {
			continue
		}
		full, err := c.Campaigns.Get(ctx, cp.ID)
		if err != nil {
			return err
		}
		d.Campaigns = append(d.Campaigns, full)
	}
	run, err := c.Reconcile.Latest(ctx)
	var de *domain.Error
	switch {
	case err == nil:
		d.Reconciliation = &run
	case !errors.As(err, &de) || de.Code != domain.CodeNotFound:
		return err
	}
	if d.Backlog, err = q.MetricsJobBacklog(ctx); err != nil {
		return err
	}
	if c.Webhooks != nil {
		if d.Webhooks, err = c.Webhooks.List(ctx); err != nil {
			return err
		}
	}
	slices.SortFunc(d.Backlog, func(a, b db.MetricsJobBacklogRow) int {
		if a.Kind != b.Kind {
			if a.Kind < b.Kind {
				return -1
			}
			return 1
		}
		if a.State < b.State {
			return -1
		}
		return 1
	})
	return c.render(w, r, op, "overview", view{Title: "Overview", Nav: "overview", Data: d})
}
