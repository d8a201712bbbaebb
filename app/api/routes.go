package api

import (
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/stockhold/stockhold/app/auth"
)

// routes registers every route, grouped as the OpenAPI document's tags
// group them.
func (s *server) routes(e *echo.Echo) {
	s.healthRoutes(e)
	// Route-level middleware, not groups: a group's middleware would also
	// guard the group's unknown paths, turning a 404 into a 401 or 403.
	shop := s.authenticate(auth.RoleShop, auth.RoleOps)
	ops := s.authenticate(auth.RoleOps)
	s.stockRoutes(e, shop, ops)
	s.locationRoutes(e, ops)
	s.holdRoutes(e, shop)
	s.eventRoutes(e, ops)
	s.campaignRoutes(e, ops)
	s.opsRoutes(e, ops)
	s.opsUIRoutes(e)
}

// healthRoutes are the health tag's: probes, metrics and the documents,
// none behind a key.
func (s *server) healthRoutes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(metricsHandler()))
	e.GET("/openapi.json", s.openapi)
	e.GET("/docs", s.docs)
	e.GET("/docs/:page", s.docs)
	e.GET("/problems", s.problems)
	e.GET("/problems/:code", s.problems)
}

// stockRoutes are the stock tag's: a SKU's stock, its units, stop-sale.
func (s *server) stockRoutes(e *echo.Echo, shop, ops echo.MiddlewareFunc) {
	e.POST("/v1/skus/:sku/adjustments", s.adjustStock, ops)
	e.GET("/v1/skus", s.listSKUs, shop)
	e.GET("/v1/skus/:sku", s.getStock, shop)
	e.GET("/v1/skus/:sku/pickup", s.getPickup, shop)
	e.POST("/v1/skus/:sku/pause", s.pauseStock, ops)
	e.POST("/v1/skus/:sku/resume", s.resumeStock, ops)
	e.POST("/v1/skus/:sku/repair", s.repairStock, ops)
	e.GET("/v1/skus/:sku/ledger", s.getLedger, ops)
	e.GET("/v1/stop-sale", s.getStopSale, ops)
	e.PUT("/v1/stop-sale", s.putStopSale, ops)
	e.PUT("/v1/skus/:sku/threshold", s.setThreshold, ops)
	e.PUT("/v1/skus/:sku/limits", s.setLimits, ops)
	e.GET("/v1/skus/:sku/limits", s.getLimits, shop)
	e.DELETE("/v1/skus/:sku/limits", s.deleteLimits, ops)
	e.PUT("/v1/bundles/:sku", s.setBundle, ops)
	e.GET("/v1/bundles/:sku", s.getBundle, shop)
	e.DELETE("/v1/bundles/:sku", s.deleteBundle, ops)
	e.PUT("/v1/skus/:sku/backorders", s.setBackorders, ops)
	e.GET("/v1/skus/:sku/backorders", s.getBackorders, shop)
	e.DELETE("/v1/skus/:sku/backorders", s.deleteBackorders, ops)
	unitsLimit := middleware.BodyLimit(strconv.Itoa(MaxUnitsBody/1024) + "K")
	e.POST("/v1/skus/:sku/units", s.addUnits, ops, unitsLimit)
	e.POST("/v1/skus/:sku/units/retire", s.retireUnits, ops, unitsLimit)
	e.GET("/v1/skus/:sku/units", s.listUnits, shop)
	e.POST("/v1/stock/adjustments", s.adjustStockInBulk, ops)
}

// locationRoutes are the locations tag's: moves and counts at a location,
// the locations themselves, transfers between them, inbound from suppliers.
func (s *server) locationRoutes(e *echo.Echo, ops echo.MiddlewareFunc) {
	e.POST("/v1/skus/:sku/moves", s.moveStock, ops)
	e.POST("/v1/skus/:sku/counts", s.countStock, ops)

	e.POST("/v1/locations", s.createLocation, ops)
	e.GET("/v1/locations", s.listLocations, ops)
	e.GET("/v1/locations/:id", s.getLocation, ops)
	e.PATCH("/v1/locations/:id", s.updateLocation, ops)
	e.POST("/v1/transfers", s.createTransfer, ops)
	e.GET("/v1/transfers", s.listTransfers, ops)
	e.GET("/v1/transfers/:id", s.getTransfer, ops)
	e.POST("/v1/transfers/:id/receive", s.receiveTransfer, ops)
	e.POST("/v1/transfers/:id/close", s.closeTransfer, ops)
	e.POST("/v1/transfers/:id/cancel", s.cancelTransfer, ops)
	e.POST("/v1/inbound", s.createInbound, ops)
	e.GET("/v1/inbound", s.listInbound, ops)
	e.GET("/v1/inbound/:id", s.getInbound, ops)
	e.POST("/v1/inbound/:id/receive", s.receiveInbound, ops)
	e.POST("/v1/inbound/:id/close", s.closeInbound, ops)
	e.POST("/v1/inbound/:id/cancel", s.cancelInbound, ops)
}

// holdRoutes are the holds tag's.
func (s *server) holdRoutes(e *echo.Echo, shop echo.MiddlewareFunc) {
	e.POST("/v1/reservations", s.createReservation, shop)
	e.GET("/v1/reservations", s.listReservations, shop)
	e.GET("/v1/reservations/:id", s.getReservation, shop)
	e.POST("/v1/reservations/:id/confirm", s.confirmReservation, shop)
	e.POST("/v1/reservations/:id/release", s.releaseReservation, shop)
	e.POST("/v1/reservations/:id/extend", s.extendReservation, shop)
	e.POST("/v1/reservations/:id/reinstate", s.reinstateReservation, shop)
}

// eventRoutes are the events tag's: the feed and its webhooks.
func (s *server) eventRoutes(e *echo.Echo, ops echo.MiddlewareFunc) {
	e.GET("/v1/events", s.getEvents, ops)
	e.POST("/v1/webhooks", s.createWebhook, ops)
	e.GET("/v1/webhooks", s.listWebhooks, ops)
	e.GET("/v1/webhooks/:id", s.getWebhook, ops)
	e.DELETE("/v1/webhooks/:id", s.deleteWebhook, ops)
}

// campaignRoutes are the campaigns and rollbacks tags'.
func (s *server) campaignRoutes(e *echo.Echo, ops echo.MiddlewareFunc) {
	e.POST("/v1/campaigns", s.createCampaign, ops)
	e.GET("/v1/campaigns/:id", s.getCampaign, ops)
	e.POST("/v1/campaigns/:id/end", s.endCampaign, ops)
	e.POST("/v1/campaigns/:id/pause", s.pauseCampaign, ops)
	e.POST("/v1/campaigns/:id/resume", s.resumeCampaign, ops)
	e.POST("/v1/rollbacks", s.createRollback, ops)
	e.GET("/v1/rollbacks/:id", s.getRollback, ops)
	e.POST("/v1/rollbacks/:id/resume", s.resumeRollback, ops)
}

// opsRoutes are the alerts, stats and reconciliation tags'.
func (s *server) opsRoutes(e *echo.Echo, ops echo.MiddlewareFunc) {
	e.GET("/v1/alerts", s.listAlerts, ops)
	e.POST("/v1/alerts/:id/ack", s.ackAlert, ops)
	e.POST("/v1/alerts/:id/take", s.takeAlert, ops)
	e.GET("/v1/stats", s.getStats, ops)
	e.GET("/v1/reports/daily", s.getDailyReport, ops)
	e.POST("/v1/reconciliations", s.createReconciliation, ops)
	e.GET("/v1/reconciliations/latest", s.getLatestReconciliation, ops)
	e.GET("/v1/reconciliations/:id", s.getReconciliation, ops)
}

// opsUIRoutes are the ops-ui tag's: the job dashboard and the console,
// when the process has them.
func (s *server) opsUIRoutes(e *echo.Echo) {
	if s.JobsUI != nil {
		jobsUI := echo.WrapHandler(withConsoleLink(s.JobsUI))
		guard := s.authenticateOps()
		e.Any("/ops/jobs", jobsUI, guard, sameOrigin())
		e.Any("/ops/jobs/*", jobsUI, guard, sameOrigin(), cleanPath())
	}
	if s.Console != nil {
		console := echo.WrapHandler(s.Console)
		e.Any("/ops", console, clientIP())
		e.Any("/ops/*", console, clientIP())
	}
}
