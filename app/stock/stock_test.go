package stock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/stock"
)

var quietLog = slog.New(slog.DiscardHandler)

type bundle struct {
	pool *pgxpool.Pool
}

type setupOpts struct {
	// icu gives the database an ICU default collation (en-US), where text
	// sorts by language rules rather than byte by byte.
	icu bool
}

// setup returns a stock Service on a test's own database, whose books are
// checked when the test ends.
func setup(t *testing.T, opts *setupOpts) (*stock.Service, *bundle) {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{}
	}
	dbOpts := &dbtest.Options{}
	if opts.icu {
		dbOpts.ICULocale = "en-US"
	}
	pool := dbtest.NewWithOptions(t, dbOpts)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return stock.New(pool, quietLog, stock.Config{}, nil), &bundle{pool: pool}
}

func code(err error) domain.Code {
	var e *domain.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func key(name string) idempotency.Key { return idempotency.NewKey("ops", name) }

// warehouses adds paris (priority 1), lyon and berlin (both 2: berlin
// before lyon by id).
func warehouses(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	dbtest.Location(t, pool, "paris", 1)
	dbtest.Location(t, pool, "lyon", 2)
	dbtest.Location(t, pool, "berlin", 2)
}

// at returns sku's main pool at location.
func at(t *testing.T, svc *stock.Service, sku, location string) stock.Pool {
	t.Helper()
	st, err := svc.GetStock(context.Background(), sku)
	require.NoError(t, err)
	for _, p := range st.Pools {
		if p.Location == location && p.Pool == stock.MainPool {
			return p
		}
	}
	t.Fatalf("no main pool of %s at %s", sku, location)
	return stock.Pool{}
}

func addUnits(t *testing.T, svc *stock.Service, sku string, specs []stock.UnitSpec) stock.Stock {
	t.Helper()
	st, _, err := svc.AddUnitsOnce(context.Background(), idempotency.NewKey("ops", "add-"+sku+"-"+specs[0].ID),
		stock.UnitsChange{SKU: sku, Reason: "seating plan", Actor: "ops", Units: specs})
	require.NoError(t, err)
	return st
}
