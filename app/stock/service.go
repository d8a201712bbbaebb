// Package stock owns the stock operations on the stock rows, each keyed by
// (sku, location, pool): adjustments (one pool or many at once), moves
// between a row's states, counts, transfers between locations, locations
// themselves, units with an identity, the catalogue, thresholds, a
// campaign's pool transfers and the return of an ended campaign's pools,
// the stop-sale switches, and the protection switch's pool side (pause,
// a gated resume, repair, a campaign's pool switch). Each change happens
// in one transaction together with its ledger rows.
//
// Holds are not here: the hold engine (app/inventory) takes units from
// these rows and hands them back. What the two share goes through small
// seams: a stock row is locked in the byte order of its key (RowKey), in
// the hold engine's batches as in these operations; every transaction
// here that may put stock back tells the hold engine's memory of sold-out
// pools (Writes); and what a person must look at goes out as an Alert.
package stock

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/dbtx"
)

// MainPool is the pool of regular stock; campaign pools are named after
// their campaign.
const MainPool = "main"

// DefaultLocation is where stock is when nothing says where: every row
// from before locations existed, and every write that names no location.
const DefaultLocation = "default"

// MaxAdjustment bounds one adjustment's delta and a total it sets, from
// the API contract.
const MaxAdjustment = 1_000_000_000

// ErrCursor refuses a page cursor that is not one the listing gave the
// caller: a hold that does not exist, or that the caller may not see. The
// HTTP layer answers it 400, as every list does a cursor it did not give.
var ErrCursor = errors.New("cursor must be the next_cursor of a previous page of this list")

// RowKey is the key of the stock row (sku, location, pool). Stock rows are
// locked in the byte order of their keys, by every transaction that locks
// more than one (the hold engine's batches, bulk adjustments, transfers),
// so that two of them never wait for each other.
func RowKey(sku, location, pool string) string { return sku + "\x00" + location + "\x00" + pool }

// Alert is a problem a service reports through its Config's Alert.
type Alert struct {
	// Level is the alert's level; empty means critical.
	Level string
	Kind  string
	// Subject is what it is about; one alert stays open per kind and subject.
	Subject string
	Summary string
	Details map[string]any
	// SKU, Location and Pool, when set, say which pool it is about.
	SKU, Location, Pool string
}

// Writes is what the stock operations tell the hold engine, which keeps
// in memory the pools it found sold out and the clients whose sales are
// stopped, and answers holds from that memory (see app/inventory's
// soldout.go): after each transaction that may put stock back on a row it
// calls Written, so that no hold is refused on a read made before it; and
// after a committed flip of a client's stop-sale switch, ClientSwitched.
type Writes interface {
	Written()
	ClientSwitched(client string, on bool)
}

// Config tunes the service.
type Config struct {
	// Alert, when set, is told about what a person must look at: a count
	// that found fewer units than are held, a forced resume of a pool out
	// of balance, a campaign's pool switch that could not pause.
	Alert func(ctx context.Context, a Alert)
}

// Service runs the stock operations.
type Service struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	cfg    Config
	writes Writes
	// catalogueScan, set by tests only, replaces CatalogueScan.
	catalogueScan int
}

// New returns a Service on pool that tells writes (nil: nothing) of the
// transactions that may put stock back.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config, writes Writes) *Service {
	if log == nil {
		log = slog.Default()
	}
	if writes == nil {
		writes = noWrites{}
	}
	return &Service{pool: pool, log: log, cfg: cfg, writes: writes}
}

type noWrites struct{}

func (noWrites) Written()                    {}
func (noWrites) ClientSwitched(string, bool) {}

// inTx runs fn in a transaction (dbtx.WithTx), committing when it returns
// nil. Such a transaction may put stock back on a row: it tells writes
// once it ends.
func (s *Service) inTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	defer s.writes.Written()
	return dbtx.WithTx(ctx, s.pool, fn)
}

// inTxV is inTx for a function that returns a value (dbtx.WithTxV).
func inTxV[T any](ctx context.Context, s *Service, fn func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	defer s.writes.Written()
	return dbtx.WithTxV(ctx, s.pool, fn)
}

// errPreview ends a preview's transaction: nothing it wrote is kept.
var errPreview = errors.New("preview: roll back")

// preview answers what write would: it runs write in a transaction that
// is then rolled back, so the answer is the database's own (the value, or
// the refusal) and nothing changes.
func preview[T any](ctx context.Context, s *Service, write func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	out, err := inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (T, error) {
		out, err := write(ctx, tx)
		if err != nil {
			return out, err
		}
		return out, errPreview
	})
	if !errors.Is(err, errPreview) {
		var zero T
		return zero, err
	}
	return out, nil
}
