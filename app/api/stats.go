package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/metrics"
)

// getStats answers how holds are faring: over the window (a Go duration,
// default 24h) from the database, and since this process started from its
// hold counter; holdstats.Stats documents which figure is which.
func (s *server) getStats(c echo.Context) error {
	window := holdstats.DefaultStatsWindow
	if v := c.QueryParam("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return badRequest(fmt.Sprintf("window must be a duration such as 1h or 24h, from %s to %s",
				holdstats.MinStatsWindow, holdstats.MaxStatsWindow))
		}
		if d < holdstats.MinStatsWindow || d > holdstats.MaxStatsWindow {
			return domain.Invalid("window must be from %s to %s, like 1h or 24h", holdstats.MinStatsWindow, holdstats.MaxStatsWindow)
		}
		window = d
	}
	st, err := s.Inventory.Stats(c.Request().Context(), window)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, stats{Stats: st, HotSKUs: metrics.HotSKUs()})
}

// stats are the holds' figures and this process's hot SKUs.
type stats struct {
	holdstats.Stats
	// HotSKUs are the SKUs with the most hold requests in this process in
	// the last minute (stockhold_sku_holds_total's top), most first.
	HotSKUs []metrics.HotSKU `json:"hot_skus"`
}
