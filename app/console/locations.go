package console

import (
	"net/http"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/stock"
)

// Rows the locations page lists of each kind.
const locationsPageRows = 100

type locationsData struct {
	Locations []stock.Location
	// InTransit are the transfers on their way, oldest first, with their
	// age; More says there are more than the page shows.
	InTransit []stock.Transfer
	More      bool
	// Due are the open supplier inbound notices by the day they are
	// expected, the late first; MoreDue says there are more.
	Due     []stock.Inbound
	MoreDue bool
	// Counts are the latest stock counts with their differences.
	Counts []db.StockCount
}

// locations shows where stock is: every location with its totals in every
// state, the transfers in transit (oldest first, with their age), what
// suppliers are due to deliver (the late first), and the latest counts
// with their differences.
func (c *Console) locations(w http.ResponseWriter, r *http.Request, op who) error {
	ctx := r.Context()
	var d locationsData
	page, err := c.Inventory.Locations(ctx, "", stock.MaxLocationsPage)
	if err != nil {
		return err
	}
	d.Locations = page.Locations
	transfers, err := c.Inventory.Transfers(ctx, stock.TransferFilter{Status: stock.TransferInTransit, Limit: locationsPageRows})
	if err != nil {
		return err
	}
	d.InTransit, d.More = transfers.Transfers, transfers.NextCursor != nil
	due, err := c.Inventory.ListInbound(ctx, stock.InboundFilter{Status: stock.InboundOpen, Limit: locationsPageRows})
	if err != nil {
		return err
	}
	d.Due, d.MoreDue = due.Inbound, due.NextCursor != nil
	if d.Counts, err = c.Inventory.RecentCounts(ctx, "", locationsPageRows); err != nil {
		return err
	}
	return c.render(w, r, op, "locations", view{Title: "Locations", Nav: "locations", Data: d})
}
