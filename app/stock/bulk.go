package stock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// MaxBulkLines bounds the lines of one bulk adjustment (and of one chunk of
// a CSV import): one transaction locks at most this many stock rows.
const MaxBulkLines = 1000

// BulkLine is one line of a bulk adjustment: it adds Delta to a pool's
// total and available, or, with SetTotal, sets the total (the difference
// goes to available).
type BulkLine struct {
	SKU string
	// Location empty means DefaultLocation.
	Location string
	Pool     string
	// Delta is non-zero unless SetTotal is given.
	Delta    int64
	SetTotal *int64
	// Ref, when not empty, is this line's ledger ref instead of the
	// adjustment's (the CSV import names the file and line).
	Ref string
}

// BulkAdjustment changes many pools at once, all or nothing.
type BulkAdjustment struct {
	Lines  []BulkLine
	Reason string
	Ref    string
	Actor  string
}

// BulkResult is what a bulk adjustment did: the stock of every SKU it
// named, by SKU (byte-wise), and how many lines changed a pool (a SetTotal
// equal to the total changes nothing and writes no ledger row).
type BulkResult struct {
	SKUs    []Stock `json:"skus"`
	Changed int     `json:"changed"`
	// UnitsIn and UnitsOut total the positive and negative changes.
	UnitsIn  int64 `json:"units_in"`
	UnitsOut int64 `json:"units_out"`
}

// lineError is a problem with line i of a bulk adjustment.
func lineError(i int, code domain.Code, l BulkLine, format string, args ...any) *domain.Error {
	n := i
	return &domain.Error{Code: code, SKU: l.SKU, Pool: l.Pool, Location: l.Location, Line: &n,
		Detail: fmt.Sprintf("lines[%d]: ", i) + fmt.Sprintf(format, args...)}
}

// Validate checks the lines and the text, naming the first bad line. Two
// lines may not name the same (sku, location, pool): which would apply first is
// ambiguous for set_total, and a file that repeats a row is most likely a
// mistake.
func (b *BulkAdjustment) Validate() error {
	switch {
	case len(b.Lines) == 0:
		return domain.Invalid("lines is empty: give 1 to %d lines", MaxBulkLines)
	case len(b.Lines) > MaxBulkLines:
		return domain.Invalid("lines has %d lines: at most %d in one adjustment", len(b.Lines), MaxBulkLines)
	}
	if err := domain.ValidText("reason", b.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	if err := domain.ValidRef("ref", b.Ref, domain.MaxTextLength); err != nil {
		return err
	}
	seen := make(map[string]int, len(b.Lines))
	for i := range b.Lines {
		l := &b.Lines[i]
		if l.Pool == "" {
			l.Pool = MainPool
		}
		l.Location = locationOr(l.Location)
		for _, check := range []error{domain.ValidName("sku", l.SKU), domain.ValidName("location", l.Location),
			domain.ValidName("pool", l.Pool), domain.ValidRef("ref", l.Ref, domain.MaxTextLength)} {
			if e, ok := check.(*domain.Error); ok {
				return lineError(i, domain.CodeInvalid, *l, "%s", e.Detail)
			}
		}
		switch {
		case l.SetTotal != nil && l.Delta != 0:
			return lineError(i, domain.CodeInvalid, *l, "give delta or set_total, not both")
		case l.SetTotal != nil && (*l.SetTotal < 0 || *l.SetTotal > MaxAdjustment):
			return lineError(i, domain.CodeInvalid, *l, "set_total must be a whole number from 0 to %d", MaxAdjustment)
		case l.SetTotal == nil && (l.Delta == 0 || l.Delta > MaxAdjustment || l.Delta < -MaxAdjustment):
			return lineError(i, domain.CodeInvalid, *l, "delta must be a non-zero whole number from -%d to %d (or give set_total)", MaxAdjustment, MaxAdjustment)
		}
		k := RowKey(l.SKU, l.Location, l.Pool)
		if j, dup := seen[k]; dup {
			return lineError(i, domain.CodeInvalid, *l, "SKU %q pool %s%s is already lines[%d]: give each pool once", l.SKU, l.Pool, at(l.Location), j)
		}
		seen[k] = i
	}
	return nil
}

// AdjustMany applies a bulk adjustment in one transaction.
func (s *Service) AdjustMany(ctx context.Context, b BulkAdjustment) (BulkResult, error) {
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (BulkResult, error) { return AdjustManyTx(ctx, tx, b) })
}

// AdjustManyOnce is AdjustMany at most once per key (see
// idempotency.Do), for an operator: a reason is required.
func (s *Service) AdjustManyOnce(ctx context.Context, key idempotency.Key, b BulkAdjustment) (out BulkResult, replayed bool, err error) {
	if err := requireReason(b.Reason); err != nil {
		return BulkResult{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (BulkResult, error) { return AdjustManyTx(ctx, tx, b) })
}

// AdjustManyTx applies a bulk adjustment inside the caller's transaction,
// all or nothing, in a handful of statements whatever the number of lines:
// create the main rows a positive line needs (as a single adjustment
// would), lock every named row in the global order ((sku, location, pool) byte-wise,
// as holds do, so neither deadlocks the other), check every line against
// the locked counters, then update the rows and append one ledger row per
// changed line in one statement. A line that would take more than is
// available is 409 insufficient_available, a pool that does not exist 422
// unknown_sku; either way nothing changes and the error names the line.
func AdjustManyTx(ctx context.Context, tx pgx.Tx, b BulkAdjustment) (BulkResult, error) {
	if err := b.Validate(); err != nil {
		return BulkResult{}, err
	}
	q := db.New(tx)
	skus := make([]string, len(b.Lines))
	pools := make([]string, len(b.Lines))
	locations := make([]string, len(b.Lines))
	for i, l := range b.Lines {
		skus[i], pools[i], locations[i] = l.SKU, l.Pool, l.Location
	}
	if err := createMainRows(ctx, q, b.Lines); err != nil {
		return BulkResult{}, err
	}
	rows, err := q.StockLockForAdjust(ctx, skus, locations, pools)
	if err != nil {
		return BulkResult{}, fmt.Errorf("lock stock rows: %w", err)
	}
	locked := make(map[string]db.Stock, len(rows))
	for _, r := range rows {
		locked[RowKey(r.Sku, r.Location, r.Pool)] = r
	}
	if err := refuseEndedLines(ctx, q, b.Lines); err != nil {
		return BulkResult{}, err
	}
	var out BulkResult
	p := db.StockAdjustManyParams{Actor: b.Actor, ActorKey: domain.KeyName(ctx), Reason: domain.Optional(b.Reason), Ref: domain.Optional(b.Ref)}
	for i, l := range b.Lines {
		delta, err := bulkDelta(ctx, q, i, l, locked)
		switch {
		case err != nil:
			return BulkResult{}, err
		case delta == 0:
			continue
		case delta > 0:
			out.UnitsIn += delta
		default:
			out.UnitsOut -= delta
		}
		p.Skus, p.Locations, p.Pools = append(p.Skus, l.SKU), append(p.Locations, l.Location), append(p.Pools, l.Pool)
		p.Deltas, p.Refs = append(p.Deltas, delta), append(p.Refs, l.Ref)
	}
	if len(p.Skus) > 0 {
		ids, err := q.StockAdjustMany(ctx, p)
		if err != nil {
			if promisedPast(err) { // bulkDelta checked each row: not expected
				return BulkResult{}, &domain.Error{Code: domain.CodeIncomingPromised,
					Detail: "the adjustment would leave holds promised more than a backorder policy allows of what is available and on its way: GET /v1/skus/{sku}/backorders shows what is promised"}
			}
			return BulkResult{}, fmt.Errorf("adjust %d stock rows: %w", len(p.Skus), err)
		}
		if len(ids) != len(p.Skus) {
			return BulkResult{}, fmt.Errorf("adjust %d stock rows: %d changed", len(p.Skus), len(ids))
		}
	}
	out.Changed = len(p.Skus)
	out.SKUs, err = stocksOf(ctx, q, skus)
	if err != nil {
		return BulkResult{}, err
	}
	return out, nil
}

// createMainRows creates the main rows a bulk adjustment's lines put
// stock into and that do not exist yet, at locations that must exist; a
// line on a pool of units with an identity at another location is refused.
func createMainRows(ctx context.Context, q *db.Queries, lines []BulkLine) error {
	var create, createAt []string
	for _, l := range lines {
		if l.Pool == MainPool && (l.Delta > 0 || l.SetTotal != nil && *l.SetTotal > 0) {
			create, createAt = append(create, l.SKU), append(createAt, l.Location)
		}
	}
	if len(create) == 0 {
		return nil
	}
	if err := requireLocations(ctx, q, createAt...); err != nil {
		return err
	}
	mains := make([]string, len(create))
	for i := range mains {
		mains[i] = MainPool
	}
	if err := guardPlainMany(ctx, q, create, mains); err != nil {
		return err
	}
	serialized, err := q.StockSerializedOf(ctx, create)
	if err != nil {
		return fmt.Errorf("look for pools of units: %w", err)
	}
	for i, l := range lines {
		for _, r := range serialized {
			if r.Sku == l.SKU && r.Pool == l.Pool && r.Location != l.Location {
				return lineError(i, domain.CodeSerializedPool, l,
					"SKU %q (pool %s) is units with an identity at %s: such a pool lives at one location", l.SKU, l.Pool, r.Location)
			}
		}
	}
	if err := q.StockCreateMainMany(ctx, create, createAt); err != nil {
		return fmt.Errorf("create main rows: %w", err)
	}
	return nil
}

// bulkDelta is what line i of a bulk adjustment changes its row's total
// by, its row as locked; or the line's refusal, naming it.
func bulkDelta(ctx context.Context, q *db.Queries, i int, l BulkLine, locked map[string]db.Stock) (int64, error) {
	r, ok := locked[RowKey(l.SKU, l.Location, l.Pool)]
	if !ok {
		err := errNoPool(ctx, q, l.SKU, l.Location, l.Pool, true)
		if de, ok := err.(*domain.Error); ok {
			n := i
			de.Line = &n
			de.Detail = fmt.Sprintf("lines[%d]: %s", i, de.Detail)
		}
		return 0, err
	}
	if r.Serialized {
		return 0, lineError(i, domain.CodeSerializedPool, l,
			"SKU %q (pool %s) is units with an identity: add or retire units instead", l.SKU, l.Pool)
	}
	delta := l.Delta
	if l.SetTotal != nil {
		delta = *l.SetTotal - r.Total
	}
	if delta < 0 && r.Available < -delta {
		if l.SetTotal != nil {
			return 0, lineError(i, domain.CodeInsufficientAvailable, l,
				"SKU %q (pool %s)%s cannot go to a total of %d: %d of its %d are %s", l.SKU, l.Pool,
				at(l.Location), *l.SetTotal, r.Total-r.Available, r.Total, notAvailable(r))
		}
		return 0, lineError(i, domain.CodeInsufficientAvailable, l,
			"SKU %q (pool %s)%s has %d available, %d to take", l.SKU, l.Pool, at(l.Location), r.Available, -delta)
	}
	if delta < 0 && !promiseFits(r, delta, 0) {
		e := errIncomingPromised(l.SKU, l.Location, l.Pool, LedgerAdjust).(*domain.Error)
		return 0, lineError(i, e.Code, l, "%s", e.Detail)
	}
	return delta, nil
}

// stocksOf reads the stock of skus (repeats allowed), in SKU order.
func stocksOf(ctx context.Context, q *db.Queries, skus []string) ([]Stock, error) {
	names := slices.Compact(slices.SortedFunc(slices.Values(skus), strings.Compare))
	all, err := q.StockListBySKUs(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	out := make([]Stock, 0, len(names))
	for _, r := range all {
		if n := len(out); n == 0 || out[n-1].SKU != r.Sku {
			out = append(out, Stock{SKU: r.Sku})
		}
		st := &out[len(out)-1]
		st.Pools = append(st.Pools, newPool(r))
	}
	return out, nil
}

// notAvailable says what a row's units that are not available are.
func notAvailable(r db.Stock) string {
	if r.QualityControl+r.Damaged+r.SafetyStock == 0 {
		return "held or sold"
	}
	return "held, sold or not for sale (quality control, damaged, safety stock)"
}
