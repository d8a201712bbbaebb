package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/webhooks"
)

// overviewAlerts is how many open alerts the overview lists.
const overviewAlerts = 10

type overviewData struct {
	// The five questions: how much stock is left (lowest first), which
	// holds expire in the next minutes, which orders were confirmed, who
	// handles each open alert, and which switches are in force.
	StopSale stock.StopSale
	// ClientStops are the clients whose sales are stopped now; Clients the
	// shop keys' owners, whose sales the form can stop.
	ClientStops []stock.StopSale
	Clients     []string
	Paused      []db.StockPausedListRow
	Stock       []poolRow
	Expiring    []inventory.Reservation
	Confirmed   []db.Reservation
	Short       map[string]string

	OpenAlerts     []alerts.Alert
	OpenAlertCount int
	Stats          holdstats.Stats
	Rollbacks      []rollbacks.Rollback
	Campaigns      []campaigns.Campaign
	Reconciliation *reconcile.Run
	Backlog        []db.MetricsJobBacklogRow
	Webhooks       []webhooks.Webhook
	// Hot is this process's SKUs with the most hold requests in the last
	// minute; Slowest its named statements, slowest mean first.
	Hot     []metrics.HotSKU
	Slowest []metrics.Statement
}

// overviewStatements is how many of the slowest statements the overview lists.
const overviewStatements = 10

// overviewRows is how many rows each of the overview's lists shows.
const overviewRows = 10

// expiringWithin is how far ahead the overview lists holds about to expire.
const expiringWithin = 10 * time.Minute

// overview answers the 2 a.m. questions on one page: the switches in
// force, stock levels lowest first, holds about to expire, recent confirmed
// orders, open alerts with their owners, holds stuck past expiry, rollbacks
// and campaigns in progress, the latest reconciliation, the last hour's
// hold outcomes, River's backlog, the webhooks' lag, and this process's
// hot SKUs and slowest statements.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, op who) error {
	ctx := r.Context()
	d := &overviewData{Hot: metrics.HotSKUs(), Slowest: metrics.SlowestStatements(overviewStatements)}
	q := db.New(c.Pool)
	for _, step := range []func(context.Context, *db.Queries, who, *overviewData) error{
		c.overviewSwitches, c.overviewHolds, c.overviewWork, c.overviewJobs,
	} {
		if err := step(ctx, q, op, d); err != nil {
			return err
		}
	}
	return c.render(w, r, op, "overview", view{Title: "Overview", Nav: "overview", Data: *d})
}

// overviewSwitches reads the stop-sales in force, the shops' clients and
// the paused SKUs.
func (c *Console) overviewSwitches(ctx context.Context, q *db.Queries, _ who, d *overviewData) error {
	stops, err := c.Inventory.StopSales(ctx)
	if err != nil {
		return err
	}
	d.StopSale = stops.StopSale
	for _, st := range stops.Clients {
		if st.Active {
			d.ClientStops = append(d.ClientStops, st)
		}
	}
	keys, err := q.APIKeyList(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.Role == "shop" && k.RevokedAt == nil && !slices.Contains(d.Clients, k.Name) {
			d.Clients = append(d.Clients, k.Name)
		}
	}
	if d.Paused, err = q.StockPausedList(ctx, 50); err != nil {
		return err
	}
	return nil
}

// overviewHolds reads the stock levels lowest first, the holds about to
// expire and the recent confirmed orders.
func (c *Console) overviewHolds(ctx context.Context, q *db.Queries, op who, d *overviewData) error {
	low, err := q.StockLowest(ctx, overviewRows)
	if err != nil {
		return err
	}
	for _, s := range low {
		d.Stock = append(d.Stock, newPoolRow(s.Sku, s.Location, s.Pool, s.Total, s.Available, s.Reserved, s.Sold, s.Status, s.LowThreshold, s.Serialized))
	}
	soon := time.Now().Add(expiringWithin)
	page, err := c.Inventory.List(ctx, inventory.ListQuery{Status: inventory.StatusHeld, ExpiresBefore: &soon, Limit: overviewRows},
		inventory.Caller{Name: op.Key.Name, Ops: true})
	if err != nil {
		return err
	}
	d.Expiring = page.Reservations
	if d.Confirmed, err = q.ReservationsConfirmedRecent(ctx, overviewRows); err != nil {
		return err
	}
	var ids []uuid.UUID
	for _, h := range d.Expiring {
		ids = append(ids, h.ID)
	}
	for _, h := range d.Confirmed {
		ids = append(ids, h.ID)
	}
	d.Short = shortIDs(ids)
	return nil
}

// overviewWork reads the open alerts, the last hour's outcomes, the
// rollbacks and campaigns in progress and the latest reconciliation.
func (c *Console) overviewWork(ctx context.Context, q *db.Queries, _ who, d *overviewData) error {
	open, err := c.Alerts.List(ctx, alerts.StatusOpen, alerts.MaxList)
	if err != nil {
		return err
	}
	d.OpenAlertCount = len(open)
	d.OpenAlerts = open[:min(len(open), overviewAlerts)]
	if d.Stats, err = c.Inventory.Stats(ctx, time.Hour); err != nil {
		return err
	}
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
	return nil
}

// overviewJobs reads River's backlog, by kind and state, and the webhooks.
func (c *Console) overviewJobs(ctx context.Context, q *db.Queries, _ who, d *overviewData) error {
	var err error
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
	return nil
}
