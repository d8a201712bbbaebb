package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// Stock row statuses.
const (
	StockOnSale = "on_sale"
	StockPaused = "paused"
)

// Pool is the counters of one (sku, location, pool): every state. total is
// on hand: available + reserved + sold + quality_control + damaged +
// safety_stock; incoming is on its way here, not yet on hand.
type Pool struct {
	Location string `json:"location"`
	Pool     string `json:"pool"`
	// Counters are its states, in the answer in their order (total,
	// available, reserved, sold, quality_control, damaged, safety_stock,
	// incoming).
	Counters
	Status       string  `json:"status"`
	PausedReason *string `json:"paused_reason"`
	// LowThreshold is the pool's low-stock threshold (nil: none): a change
	// that takes available from above it to at or below it sends stock.low.
	LowThreshold *int64    `json:"low_threshold"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Serialized marks a pool of units with an identity (seats, serial
	// numbers): its counters are its units by status, and it changes only
	// through them. Left out for other pools.
	Serialized bool `json:"serialized,omitempty"`
	// Backordered is what held and confirmed holds were promised beyond
	// the row's stock and have not had filled yet (its pool's backorder
	// policy lets them): not in total. Left out when none.
	Backordered int64 `json:"backordered,omitempty"`
}

// Stock is every (location, pool) of one SKU.
type Stock struct {
	SKU   string `json:"sku"`
	Pools []Pool `json:"pools"`
	// Bundle, for a bundle (which has no pools of its own), is its
	// availability computed from its components' (bundles.go).
	Bundle *BundleStock `json:"bundle,omitempty"`
	// changed is, for a bundle in a catalogue page, when its definition or
	// a component's main pool last changed (updated_since's filter).
	changed time.Time
}

func newPool(r db.Stock) Pool {
	return Pool{
		Location: r.Location, Pool: r.Pool, Counters: Counters{Total: r.Total, Available: r.Available, Reserved: r.Reserved, Sold: r.Sold,
			QualityControl: r.QualityControl, Damaged: r.Damaged, SafetyStock: r.SafetyStock, Incoming: r.Incoming, Short: r.Short},
		Status: r.Status, PausedReason: r.PausedReason, LowThreshold: r.LowThreshold, UpdatedAt: r.UpdatedAt,
		Serialized: r.Serialized, Backordered: r.Backordered,
	}
}

// GetStock returns the pools of sku; for a bundle, none, and its
// availability computed from its components'.
func (s *Service) GetStock(ctx context.Context, sku string) (Stock, error) {
	if err := domain.ValidName("sku", sku); err != nil {
		return Stock{}, err
	}
	q := db.New(s.pool)
	st, err := stockOf(ctx, q, sku)
	var e *domain.Error
	if errors.As(err, &e) && e.Code == domain.CodeUnknownSKU {
		return bundleStockOf(ctx, q, sku)
	}
	return st, err
}

func stockOf(ctx context.Context, q *db.Queries, sku string) (Stock, error) {
	rows, err := q.StockListBySKU(ctx, sku)
	if err != nil {
		return Stock{}, err
	}
	if len(rows) == 0 {
		return Stock{}, &domain.Error{Code: domain.CodeUnknownSKU, SKU: sku, Detail: fmt.Sprintf("SKU %q has no stock", sku)}
	}
	st := Stock{SKU: sku, Pools: make([]Pool, len(rows))}
	for i, r := range rows {
		st.Pools[i] = newPool(r)
	}
	return st, nil
}

// Adjustment changes a pool's stock from outside: a restock, a count
// correction, a write-off. Location empty means DefaultLocation.
type Adjustment struct {
	SKU      string
	Location string
	Pool     string
	Delta    int64
	Reason   string
	Ref      string
	Actor    string
}

// Validate checks the adjustment's fields.
func (a Adjustment) Validate() error {
	if err := domain.ValidName("sku", a.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("pool", a.Pool); err != nil {
		return err
	}
	if err := domain.ValidName("location", a.Location); err != nil {
		return err
	}
	if a.Delta == 0 || a.Delta > MaxAdjustment || a.Delta < -MaxAdjustment {
		return domain.Invalid("delta must be a non-zero whole number from -%d to %d", MaxAdjustment, MaxAdjustment)
	}
	if err := domain.ValidText("reason", a.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	return domain.ValidRef("ref", a.Ref, domain.MaxTextLength)
}

// Adjust adds Delta to a pool's total and available. The first positive
// delta for a SKU creates its main row; a negative delta takes only from
// available, never from units held or sold.
func (s *Service) Adjust(ctx context.Context, a Adjustment) (Stock, error) {
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Stock, error) { return AdjustTx(ctx, tx, a) })
}

// AdjustOnce is Adjust at most once per key, for an operator: a reason is
// required. A retry with the same key and request gets the first answer,
// with replayed true (see idempotency.Do).
func (s *Service) AdjustOnce(ctx context.Context, key idempotency.Key, a Adjustment) (out Stock, replayed bool, err error) {
	if err := a.withReason(); err != nil {
		return Stock{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Stock, error) { return AdjustTx(ctx, tx, a) })
}

// AdjustPreview answers what AdjustOnce would: the SKU's stock as the
// adjustment would leave it, or the refusal it would meet. The adjustment
// is made in a transaction that is then rolled back, so the answer is the
// database's own and nothing changes.
func (s *Service) AdjustPreview(ctx context.Context, a Adjustment) (Stock, error) {
	if err := a.withReason(); err != nil {
		return Stock{}, err
	}
	return preview(ctx, s, func(ctx context.Context, tx pgx.Tx) (Stock, error) { return AdjustTx(ctx, tx, a) })
}

// withReason validates an operator's adjustment: the reason is required.
func (a Adjustment) withReason() error { return requireReason(a.Reason) }

// requireReason refuses an operator's change of stock that does not say
// why (single and bulk adjustments alike).
func requireReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return domain.Invalid("reason is required: why the stock changes (a restock, a count, a write-off)")
	}
	return nil
}

// AdjustTx is Adjust inside the caller's transaction.
func AdjustTx(ctx context.Context, tx pgx.Tx, a Adjustment) (Stock, error) {
	if a.Pool == "" {
		a.Pool = MainPool
	}
	a.Location = locationOr(a.Location)
	if err := a.Validate(); err != nil {
		return Stock{}, err
	}
	q := db.New(tx)
	var (
		err  error
		kind = LedgerAdjust
	)
	switch {
	case a.Delta > 0 && a.Pool == MainPool:
		kind = LedgerStockIn
		if err := requireLocations(ctx, q, a.Location); err != nil {
			return Stock{}, err
		}
		if err := notSerializedElsewhere(ctx, q, a.SKU, a.Location, a.Pool); err != nil {
			return Stock{}, err
		}
		_, err = q.StockAdjust(ctx, db.StockAdjustParams{Sku: a.SKU, Location: a.Location, Pool: a.Pool, Delta: a.Delta})
	case a.Delta > 0:
		kind = LedgerStockIn
		_, err = q.StockMove(ctx, db.StockMoveParams{Sku: a.SKU, Location: a.Location, Pool: a.Pool, DeltaTotal: a.Delta, DeltaAvailable: a.Delta})
	default:
		_, err = q.StockTake(ctx, db.StockTakeParams{Quantity: -a.Delta, Sku: a.SKU, Location: a.Location, Pool: a.Pool})
	}
	if promisedPast(err) {
		return Stock{}, errIncomingPromised(a.SKU, a.Location, a.Pool, kind)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		row, gerr := q.StockGet(ctx, a.SKU, a.Location, a.Pool)
		if gerr == nil && row.Serialized {
			return Stock{}, errSerialized(a.SKU, a.Pool)
		}
		if gerr == nil {
			if err := refuseEnded(ctx, q, a.SKU, a.Location, a.Pool); err != nil {
				return Stock{}, err
			}
		}
		if gerr == nil {
			return Stock{}, &domain.Error{Code: domain.CodeInsufficientAvailable, SKU: a.SKU, Pool: a.Pool, Location: a.Location,
				Detail: fmt.Sprintf("SKU %q (pool %s) has less than %d available%s", a.SKU, a.Pool, -a.Delta, at(a.Location))}
		}
		return Stock{}, errNoPool(ctx, q, a.SKU, a.Location, a.Pool, false)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("adjust %s/%s/%s: %w", a.SKU, a.Location, a.Pool, err)
	}
	// After the write, which locked the row (see refuseEnded).
	if err := refuseEnded(ctx, q, a.SKU, a.Location, a.Pool); err != nil {
		return Stock{}, err
	}
	err = appendLedger(ctx, q, db.LedgerAppendParams{
		Sku: a.SKU, Location: a.Location, Pool: a.Pool, Kind: string(kind), DeltaTotal: a.Delta, DeltaAvailable: a.Delta,
		Actor: a.Actor, ActorKey: domain.KeyName(ctx), Reason: domain.Optional(a.Reason), Ref: domain.Optional(a.Ref),
	})
	if err != nil {
		return Stock{}, err
	}
	return stockOf(ctx, q, a.SKU)
}

// at is " at location" for a message about a row, or nothing at the
// default location (as every message said before locations existed).
func at(location string) string {
	if location == DefaultLocation || location == "" {
		return ""
	}
	return " at " + location
}

// notSerializedElsewhere refuses stock of a SKU's pool at location when the
// pool holds units with an identity at another location: such a pool lives
// at one location. It first takes the pool's guard shared (poolguard.go),
// so an addition of units is either seen or waits for this transaction.
func notSerializedElsewhere(ctx context.Context, q *db.Queries, sku, location, pool string) error {
	if err := guardPlain(ctx, q, sku, pool); err != nil {
		return err
	}
	return serializedElsewhere(ctx, q, sku, location, pool)
}

// serializedElsewhere is notSerializedElsewhere's check, for a caller that
// holds the pool's guard.
func serializedElsewhere(ctx context.Context, q *db.Queries, sku, location, pool string) error {
	where, err := q.StockPoolSerializedAt(ctx, sku, pool)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	case where != location:
		return &domain.Error{Code: domain.CodeSerializedPool, SKU: sku, Pool: pool, Location: location,
			Detail: fmt.Sprintf("SKU %q (pool %s) is units with an identity at %s: such a pool lives at one location", sku, pool, where)}
	}
	return nil
}

// SwitchRequest asks Pause or Resume to flip the protection switch of one
// (sku, location, pool); Location empty means DefaultLocation.
type SwitchRequest struct {
	SKU      string
	Location string
	Pool     string
	Reason   string
	Actor    string
	// Refs name what the switch is about (order refs, hold ids, ledger
	// ids, a ticket), stored on its ledger row.
	Refs []string
}

func (w SwitchRequest) validate() error {
	if err := domain.ValidName("sku", w.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("location", w.Location); err != nil {
		return err
	}
	if err := domain.ValidName("pool", w.Pool); err != nil {
		return err
	}
	if w.Reason == "" {
		return domain.Invalid("reason is required")
	}
	if err := domain.ValidRefs("refs", w.Refs); err != nil {
		return err
	}
	return domain.ValidText("reason", w.Reason, domain.MaxTextLength)
}

// Pause stops new holds on a pool; confirms and releases keep working. It
// is recorded in the ledger with who did it and why.
func (s *Service) Pause(ctx context.Context, w SwitchRequest) (Stock, error) {
	return s.setStatus(ctx, w, StockPaused)
}

// PauseTx pauses a pool inside the caller's transaction: reconciliation and
// campaign end use it.
func PauseTx(ctx context.Context, tx pgx.Tx, w SwitchRequest) error {
	w.Location = locationOr(w.Location)
	return setStatusTx(ctx, db.New(tx), w, StockPaused)
}

func (s *Service) setStatus(ctx context.Context, w SwitchRequest, status string) (Stock, error) {
	if w.Pool == "" {
		w.Pool = MainPool
	}
	w.Location = locationOr(w.Location)
	if err := w.validate(); err != nil {
		return Stock{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Stock, error) {
		q := db.New(tx)
		if status == StockOnSale && w.Pool != MainPool {
			terms, err := q.CampaignHoldTerms(ctx, w.Pool)
			if err == nil && !terms.Open {
				return Stock{}, &domain.Error{Code: domain.CodeCampaignNotActive, SKU: w.SKU, Pool: w.Pool,
					Detail: fmt.Sprintf("campaign %q is %s: its pool stays paused", w.Pool, terms.Status)}
			}
		}
		if err := setStatusTx(ctx, q, w, status); err != nil {
			return Stock{}, err
		}
		return stockOf(ctx, q, w.SKU)
	})
}

func setStatusTx(ctx context.Context, q *db.Queries, w SwitchRequest, status string) error {
	var reason *string
	kind := LedgerResume
	if status == StockPaused {
		reason, kind = &w.Reason, LedgerPause
	}
	_, err := q.StockSetStatus(ctx, db.StockSetStatusParams{Status: status, PausedReason: reason, Sku: w.SKU, Location: w.Location, Pool: w.Pool})
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoPool(ctx, q, w.SKU, w.Location, w.Pool, false)
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s/%s: %w", kind, w.SKU, w.Location, w.Pool, err)
	}
	return appendLedger(ctx, q, db.LedgerAppendParams{
		Sku: w.SKU, Location: w.Location, Pool: w.Pool, Kind: string(kind), Actor: w.Actor, ActorKey: domain.KeyName(ctx), Reason: &w.Reason, Refs: w.Refs,
	})
}

// appendLedger records the change just made to a stock row in the same
// transaction (LedgerAppend reads the row for its version, counters and
// feed position).
func appendLedger(ctx context.Context, q *db.Queries, p db.LedgerAppendParams) error {
	n, err := q.LedgerAppend(ctx, p)
	if err == nil && n != 1 {
		err = fmt.Errorf("no stock row %s/%s/%s", p.Sku, p.Location, p.Pool)
	}
	if err != nil {
		return fmt.Errorf("append %s to the ledger: %w", p.Kind, err)
	}
	return nil
}

// Movement is one ledger row.
type Movement struct {
	ID             int64     `json:"id"`
	At             time.Time `json:"at"`
	SKU            string    `json:"sku"`
	Location       string    `json:"location"`
	Pool           string    `json:"pool"`
	Kind           string    `json:"kind"`
	DeltaTotal     int64     `json:"delta_total"`
	DeltaAvailable int64     `json:"delta_available"`
	DeltaReserved  int64     `json:"delta_reserved"`
	DeltaSold      int64     `json:"delta_sold"`
	// The other states' deltas, left out when zero (as every movement
	// before locations existed).
	DeltaQualityControl int64 `json:"delta_quality_control,omitempty"`
	DeltaDamaged        int64 `json:"delta_damaged,omitempty"`
	DeltaSafetyStock    int64 `json:"delta_safety_stock,omitempty"`
	DeltaIncoming       int64 `json:"delta_incoming,omitempty"`
	// DeltaShort moves the held units a count found missing (a count, a
	// shortfall, a sold_short); left out when zero.
	DeltaShort int64 `json:"delta_short,omitempty"`
	// DeltaBackordered moves the units promised past what is on hand
	// (the row's backordered): up for a hold that promises them, down as
	// a release, expiry or rollback gives them back or a receipt fills
	// them (backorder_fill); left out when zero. ExpectedOn is, for a
	// reserve that promised units, the day the delivery that fills its
	// last promised unit was expected as the hold was made (YYYY-MM-DD);
	// left out otherwise.
	DeltaBackordered int64   `json:"delta_backordered,omitempty"`
	ExpectedOn       string  `json:"expected_on,omitempty"`
	ReservationID    *string `json:"reservation_id"`
	Actor            string  `json:"actor"`
	// ActorKey is, for an adjustment, a pause or a resume, the credential
	// that authenticated it (see domain.WithKeyName).
	ActorKey *string `json:"actor_key"`
	Reason   *string `json:"reason"`
	Ref      *string `json:"ref"`
	// Units names the units with an identity the movement moved; left out
	// for a pool without units.
	Units []string `json:"units,omitempty"`
	// Refs are what a repair or a resume named as what it is about;
	// left out when none.
	Refs []string `json:"refs,omitempty"`
	// Bundle is, for a movement of a hold's component line held for a
	// bundle, the bundle line it came from, as the hold has it now (a
	// partial release of the bundle lowers its quantity) (MovementsOf);
	// nil otherwise.
	Bundle *MovementBundle `json:"bundle,omitempty"`
}

// MovementBundle is the line of a hold request on a bundle that a
// component line was held for: the bundle, how many of it the line holds
// now, and the version of its definition the hold used.
type MovementBundle struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
	Version  int64  `json:"version"`
}

// MaxLedgerPage bounds one page of ledger rows.
const MaxLedgerPage = 1000

// LedgerPage is a page of a SKU's movements, newest first. NextBeforeID,
// when not nil, asks for the page after it (older movements); nil means
// this page holds the oldest.
type LedgerPage struct {
	Movements    []Movement
	NextBeforeID *int64
}

// Ledger returns up to limit movements of sku's pools, newest first, older
// than beforeID when it is above zero. Pages are by id (a keyset), so a
// client walking back from the newest page sees every movement once, even
// while new ones are appended.
func (s *Service) Ledger(ctx context.Context, sku string, limit int, beforeID int64) (LedgerPage, error) {
	if err := domain.ValidName("sku", sku); err != nil {
		return LedgerPage{}, err
	}
	if limit < 1 || limit > MaxLedgerPage {
		return LedgerPage{}, domain.Invalid("limit must be from 1 to %d", MaxLedgerPage)
	}
	if beforeID < 0 {
		return LedgerPage{}, domain.Invalid("before_id must be a ledger id (a positive whole number)")
	}
	var before *int64
	q := db.New(s.pool)
	if beforeID > 0 {
		before = &beforeID
		archived, err := q.LedgerArchived(ctx)
		if err != nil {
			return LedgerPage{}, fmt.Errorf("read how far the ledger is archived: %w", err)
		}
		if beforeID <= archived.MaxID {
			return LedgerPage{}, domain.Archived("the movements before %s were archived (ids up to %d): the page before id %d is in the archive",
				archived.ToAt.UTC().Format(time.RFC3339), archived.MaxID, beforeID)
		}
	}
	// One more than asked says whether an older page exists.
	rows, err := q.LedgerPageBySKU(ctx, sku, before, int32(limit+1))
	if err != nil {
		return LedgerPage{}, err
	}
	if len(rows) == 0 {
		if _, err := stockOf(ctx, q, sku); err != nil {
			return LedgerPage{}, err
		}
	}
	var page LedgerPage
	if len(rows) > limit {
		rows = rows[:limit]
		next := rows[limit-1].ID
		page.NextBeforeID = &next
	}
	if page.Movements, err = MovementsOf(ctx, q, rows); err != nil {
		return LedgerPage{}, err
	}
	return page, nil
}

// MovementsOf is Movements with, on each movement of a hold's component
// line held for a bundle, the bundle line it came from (read from the
// hold's lines: one per sku, location and pool).
func MovementsOf(ctx context.Context, q *db.Queries, rows []db.Ledger) ([]Movement, error) {
	out := Movements(rows)
	var ids []uuid.UUID
	for _, r := range rows {
		if r.ReservationID != nil && !slices.Contains(ids, *r.ReservationID) {
			ids = append(ids, *r.ReservationID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	lines, err := q.LedgerBundleLines(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read the bundle lines of the movements' holds: %w", err)
	}
	type key struct {
		id                  uuid.UUID
		sku, location, pool string
	}
	bundles := make(map[key]MovementBundle, len(lines))
	for _, l := range lines {
		bundles[key{l.ReservationID, l.Sku, l.Location, l.Pool}] = MovementBundle{SKU: l.BundleSku, Quantity: l.BundleQuantity, Version: l.BundleVersion}
	}
	for i, r := range rows {
		if r.ReservationID == nil {
			continue
		}
		if b, ok := bundles[key{*r.ReservationID, r.Sku, r.Location, r.Pool}]; ok {
			out[i].Bundle = &b
		}
	}
	return out, nil
}

// Movements reads ledger rows as the movements the API and the console
// show.
func Movements(rows []db.Ledger) []Movement {
	out := make([]Movement, len(rows))
	for i, r := range rows {
		out[i] = Movement{
			ID: r.ID, At: r.At, SKU: r.Sku, Location: r.Location, Pool: r.Pool, Kind: r.Kind,
			DeltaTotal: r.DeltaTotal, DeltaAvailable: r.DeltaAvailable, DeltaReserved: r.DeltaReserved, DeltaSold: r.DeltaSold,
			DeltaQualityControl: r.DeltaQualityControl, DeltaDamaged: r.DeltaDamaged, DeltaSafetyStock: r.DeltaSafetyStock,
			DeltaIncoming: r.DeltaIncoming, DeltaShort: r.DeltaShort, DeltaBackordered: r.DeltaBackordered,
			Actor: r.Actor, ActorKey: r.ActorKey, Reason: r.Reason, Ref: r.Ref, Units: r.Units, Refs: r.Refs,
		}
		if r.ExpectedOn.Valid {
			out[i].ExpectedOn = r.ExpectedOn.Time.Format(time.DateOnly)
		}
		if r.ReservationID != nil {
			id := r.ReservationID.String()
			out[i].ReservationID = &id
		}
	}
	return out
}
