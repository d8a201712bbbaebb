package dbtest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
)

// The fixtures below write the rows the service paths write, through the
// same queries (queries/*.sql), each in one transaction with its ledger
// rows, so RequireInvariants still holds after them. They live here rather
// than calling app/inventory because inventory's own tests use dbtest.

// mainPool is stock.MainPool, the regular pool every SKU has, and
// defaultLocation stock.DefaultLocation, where stock is unless said.
const (
	mainPool        = "main"
	defaultLocation = "default"
)

// StockIn adds n units of sku to its main pool at the default location
// (creating the row), with the stock_in ledger row an adjustment writes.
func StockIn(t testing.TB, pool *pgxpool.Pool, sku string, n int64) {
	t.Helper()
	StockInAt(t, pool, sku, defaultLocation, n)
}

// StockInAt is StockIn at location, which must exist (see Location).
func StockInAt(t testing.TB, pool *pgxpool.Pool, sku, location string, n int64) {
	t.Helper()
	inTx(t, pool, func(q *db.Queries) error {
		if _, err := q.StockAdjust(context.Background(), db.StockAdjustParams{Sku: sku, Location: location, Pool: mainPool, Delta: n}); err != nil {
			return err
		}
		return ledger(q, db.LedgerAppendParams{Sku: sku, Location: location, Pool: mainPool, Kind: "stock_in", DeltaTotal: n, DeltaAvailable: n,
			Actor: "test", Reason: ptr("test stock")})
	})
}

// Location adds location id (named after it) with priority, active, as
// POST /v1/locations does.
func Location(t testing.TB, pool *pgxpool.Pool, id string, priority int32) {
	t.Helper()
	inTx(t, pool, func(q *db.Queries) error {
		_, err := q.LocationCreate(context.Background(), db.LocationCreateParams{ID: id, Name: id, Priority: priority, Active: true, CreatedBy: "test"})
		return err
	})
}

// HoldOptions describe a hold made by Hold; the zero value holds one unit of
// main stock for client "shop" under a fresh key, for ten minutes.
type HoldOptions struct {
	// Pool is the stock pool the line takes from (a campaign's id); empty
	// is main.
	Pool string
	// Location is where the line takes it; empty is the default location.
	Location string
	// Campaign, when set, makes the hold a campaign hold.
	Campaign string
	// Client and Key are the hold's idempotency scope.
	Client, Key string
	// OrderRef is the client's order reference, if any.
	OrderRef string
	// Quantity is the units held; zero is one.
	Quantity int64
	// TTL is how long until the hold expires; zero is ten minutes.
	TTL time.Duration
}

// Hold holds units of sku as a granted hold does: the reservation, its line,
// the stock row's counters and the reserve ledger row, in one transaction.
// It fails the test when the pool is not on sale or lacks the units.
func Hold(t testing.TB, pool *pgxpool.Pool, sku string, opts *HoldOptions) uuid.UUID {
	t.Helper()
	o := HoldOptions{}
	if opts != nil {
		o = *opts
	}
	o.Pool = or(o.Pool, mainPool)
	o.Location = or(o.Location, defaultLocation)
	o.Client = or(o.Client, "shop")
	o.Key = or(o.Key, uuid.NewString())
	if o.Quantity == 0 {
		o.Quantity = 1
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Minute
	}
	id := uuid.New()
	inTx(t, pool, func(q *db.Queries) error {
		ctx := context.Background()
		_, err := q.ReservationInsert(ctx, db.ReservationInsertParams{
			ID: id, Client: o.Client, IdempotencyKey: o.Key, RequestHash: "fixture", OrderRef: optional(o.OrderRef),
			Campaign: optional(o.Campaign), TtlSeconds: int64(o.TTL / time.Second),
		})
		if err != nil {
			return err
		}
		q.StockHoldsApply(ctx, []db.StockHoldsApplyParams{{
			RowSkus: []string{sku}, RowLocations: []string{o.Location}, RowPools: []string{o.Pool}, RowQuantities: []int64{o.Quantity},
			LineIds: []uuid.UUID{id}, LineSkus: []string{sku}, LineLocations: []string{o.Location}, LinePools: []string{o.Pool},
			LineQuantities: []int64{o.Quantity}, LineActors: []string{o.Client},
		}}).Exec(func(_ int, e error) { err = e })
		return err
	})
	return id
}

// CampaignOptions describe a campaign made by Campaign; the zero value is a
// scheduled campaign that starts in an hour and lasts an hour, with holds
// of ten minutes.
type CampaignOptions struct {
	// Allotments are the units of each SKU the campaign takes from main.
	Allotments map[string]int64
	// Active starts the campaign now: its allotments move from main into
	// its pool (main must have them, see StockIn), as campaign_start does.
	Active bool
	// MaxPerOrder, when set, caps the units of one SKU a hold may take.
	MaxPerOrder *int64
}

// Campaign records campaign id with its allotments, scheduled or (with
// Active) started, in one transaction. It schedules no campaign_start or
// campaign_end job: a test that needs the campaign's steps calls the
// campaigns service.
func Campaign(t testing.TB, pool *pgxpool.Pool, id string, opts *CampaignOptions) {
	t.Helper()
	o := CampaignOptions{}
	if opts != nil {
		o = *opts
	}
	starts := time.Now().Add(time.Hour)
	if o.Active {
		starts = time.Now().Add(-time.Minute)
	}
	inTx(t, pool, func(q *db.Queries) error {
		ctx := context.Background()
		_, err := q.CampaignCreate(ctx, db.CampaignCreateParams{
			ID: id, StartsAt: starts, EndsAt: starts.Add(time.Hour), HoldTtlSeconds: 600, CreatedBy: "test",
			MaxPerOrder: o.MaxPerOrder,
		})
		if err != nil {
			return err
		}
		skus := slices.Sorted(maps.Keys(o.Allotments)) // byte order, as campaign start locks them
		qty := make([]int64, len(skus))
		for i, sku := range skus {
			qty[i] = o.Allotments[sku]
		}
		units := make([][]byte, len(skus)) // none named
		locations := make([]string, len(skus))
		for i := range locations {
			locations[i] = defaultLocation
		}
		if err := q.CampaignAllotmentsInsert(ctx, db.CampaignAllotmentsInsertParams{Campaign: id, Skus: skus, Locations: locations, Quantities: qty, Units: units}); err != nil {
			return err
		}
		if !o.Active {
			return nil
		}
		for i, sku := range skus {
			if err := transfer(q, sku, id, qty[i]); err != nil {
				return err
			}
		}
		_, err = q.CampaignSetStatus(ctx, db.CampaignSetStatusParams{Status: "active", ID: id})
		return err
	})
}

// transfer moves n units of sku from main into pool as a transfer does:
// both rows and a transfer ledger row each.
func transfer(q *db.Queries, sku, pool string, n int64) error {
	ctx := context.Background()
	if _, err := q.StockCreate(ctx, sku, defaultLocation, pool); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if _, err := q.StockTake(ctx, db.StockTakeParams{Quantity: n, Sku: sku, Location: defaultLocation, Pool: mainPool}); err != nil {
		return err
	}
	if err := ledger(q, db.LedgerAppendParams{Sku: sku, Location: defaultLocation, Pool: mainPool, Kind: "transfer", DeltaTotal: -n, DeltaAvailable: -n,
		Actor: "test", Ref: &pool}); err != nil {
		return err
	}
	if _, err := q.StockMove(ctx, db.StockMoveParams{Sku: sku, Location: defaultLocation, Pool: pool, DeltaTotal: n, DeltaAvailable: n}); err != nil {
		return err
	}
	return ledger(q, db.LedgerAppendParams{Sku: sku, Location: defaultLocation, Pool: pool, Kind: "transfer", DeltaTotal: n, DeltaAvailable: n,
		Actor: "test", Ref: &pool})
}

func ledger(q *db.Queries, p db.LedgerAppendParams) error {
	_, err := q.LedgerAppend(context.Background(), p)
	return err
}

// inTx runs f in a transaction on pool and fails the test if it errs.
func inTx(t testing.TB, pool *pgxpool.Pool, f func(*db.Queries) error) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return f(db.New(tx)) })
	require.NoError(t, err)
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func ptr(s string) *string { return &s }
