package stock

import (
	"context"
	"fmt"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// errNoPool refuses a request naming a stock row (sku, location, pool)
// that does not exist: unknown_location when the location does not exist,
// unknown_pool when the SKU has stock (at any location) but not this
// pool at this location, unknown_sku when it has none. A pool and a
// location are always named in the request's body, so they are references
// (HTTP 422); the SKU is one when the body names it too (skuInBody), and
// the thing the request addresses otherwise (404).
func errNoPool(ctx context.Context, q *db.Queries, sku, location, pool string, skuInBody bool) error {
	location = locationOr(location)
	if err := requireLocations(ctx, q, location); err != nil {
		return err
	}
	exists, err := q.StockSKUExists(ctx, sku)
	if err != nil {
		return fmt.Errorf("look for SKU %s: %w", sku, err)
	}
	if exists {
		return &domain.Error{Code: domain.CodeUnknownPool, Reference: true, SKU: sku, Pool: pool, Location: location,
			Detail: fmt.Sprintf("SKU %q has no pool %q%s", sku, pool, at(location))}
	}
	return &domain.Error{Code: domain.CodeUnknownSKU, Reference: skuInBody, SKU: sku, Pool: pool, Location: location,
		Detail: fmt.Sprintf("SKU %q has no stock", sku)}
}
