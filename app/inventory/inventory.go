// Package inventory is the hold engine: holds on the stock rows, each keyed
// by (sku, location, pool), and the ledger rows that explain them. It owns
// the hold / confirm / release state machine, the batches that carry holds
// and changes to holds to PostgreSQL (batch_*.go: the hold batch, its
// writes, the change batch, the changes joined to a hold batch, the
// stop-sale read and the failure policy, on app/batch's queue and pipe),
// the pure grant decision (decide.go), expiry, the memory of
// sold-out pools (soldout.go), partial releases, extensions and
// reinstatements. Each change happens in one transaction together with
// its ledger rows and the River jobs it needs.
//
// The stock operations on the same rows (adjustments, moves, counts,
// transfers, locations, units, the stop-sale and protection switches) are
// app/stock's; a Service embeds a stock.Service so that the wiring hands
// one service around, and tells its memory of sold-out pools of the stock
// operations' writes (stock.Writes).
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/stock"
)

// Limits on requests, from the API contract.
const (
	MaxQuantity     = 1_000_000
	MaxLines        = 100
	MaxTTLSeconds   = 604_800
	DefaultTTL      = 900 * time.Second
	MaxOrderRefSize = 255
)

// Config tunes the service. A zero field takes the production setting,
// from app/config (see WithDefaults): a test that builds a Service says
// only what it changes.
type Config struct {
	// Serial gives every hold, confirm and release a transaction of its
	// own (STOCKHOLD_COALESCE=false); each still goes through the batch
	// path. By default a batch carries many.
	Serial bool
	// MaxBatch bounds the requests one transaction carries
	// (STOCKHOLD_BATCH_SIZE).
	MaxBatch int
	// Flights is how many batches of each kind (holds, confirms and
	// releases) may run at once, each on its own connection
	// (STOCKHOLD_BATCH_FLIGHTS). Flights beyond the first go only when
	// requests are waiting in company or a flight is slow (see batch.Queue).
	Flights int
	// LockTimeout bounds how long a batch waits for a row lock before the
	// requests that need that row answer busy (STOCKHOLD_DB_LOCK_TIMEOUT).
	LockTimeout time.Duration
	// ExpiryTick is the longest the expiry loop sleeps between passes
	// (STOCKHOLD_EXPIRY_TICK): a hold expires at most about this late.
	ExpiryTick time.Duration
	// SoldOutRecheck is how old a read may be that a refusal from memory
	// rests on (STOCKHOLD_SOLDOUT_RECHECK, see soldout.go); below zero the
	// memory is off.
	SoldOutRecheck time.Duration
	// AllocationMemory is how old the figures may be that a line
	// allocated among several locations picks its location on, to lock
	// that row only (STOCKHOLD_ALLOCATION_MEMORY, see places.go); below
	// zero every such line locks its pool at every location.
	AllocationMemory time.Duration
	// Strategy is the shop's allocation strategy (STOCKHOLD_STRATEGY): a
	// hold's that names none and whose key has none (empty: priority).
	Strategy Strategy
	// Alert, when set, is told about what a person must look at: a batch
	// that panicked. The wiring raises an alert with it.
	Alert func(ctx context.Context, a stock.Alert)
	// Recorder, when set, is told what the service does, for metrics.
	Recorder holdstats.Recorder
}

// WithDefaults returns c with every zero setting replaced by its default
// from app/config, the one place defaults are written.
func (c Config) WithDefaults() Config {
	d := config.Defaults()
	if c.MaxBatch <= 0 {
		c.MaxBatch = d.BatchSize
	}
	if c.Flights <= 0 {
		c.Flights = d.BatchFlights
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = d.LockTimeout
	}
	if c.ExpiryTick <= 0 {
		c.ExpiryTick = d.ExpiryTick
	}
	if c.SoldOutRecheck == 0 {
		c.SoldOutRecheck = d.SoldOutRecheck
	}
	if c.AllocationMemory == 0 {
		c.AllocationMemory = d.AllocationMemory
	}
	if c.Recorder == nil {
		c.Recorder = holdstats.NopRecorder{}
	}
	return c
}

const (
	// batchTimeout bounds one batch transaction, whatever its callers' own
	// deadlines (they stop waiting sooner; the batch finishes regardless).
	batchTimeout = 30 * time.Second
)

// Service holds stock for orders and hands it back. It carries the stock
// operations (the embedded stock.Service, on the same pool), which tell
// its memory of sold-out pools of their writes (soldOutWrites), so that
// the wiring hands one service around.
type Service struct {
	*stock.Service
	pool        *pgxpool.Pool
	log         *slog.Logger
	cfg         Config
	lockTimeout string
	// stopSaleWait bounds a hold batch's wait for a flip of a stop-sale
	// switch (see stopSaleWait).
	stopSaleWait string
	// expiryLockTimeout is shorter: expiry must never keep a row locked
	// long enough, waiting for another, to make a request time out.
	expiryLockTimeout string
	holds             *batch.Queue[*holdCall]
	changes           *batch.Queue[*changeCall]
	// replays looks up the keys of holds refused from memory, and
	// keysInFlight are the keys of the holds its batches have not
	// answered yet (replay.go).
	replays      *batch.Queue[*keyCall]
	keysInFlight keysInFlight
	// beforeGrant, set by tests only, sees each hold a batch decides.
	beforeGrant func(HoldRequest)
	rec         holdstats.Recorder
	counts      *holdstats.Counts
	lockWaits   holdstats.LockWaits
	// confirmTimes are this process's confirm latencies (TakeConfirmTimes).
	confirmTimes holdstats.ConfirmTimes
	// unitPools are the pools this process has seen hold units: a hold
	// batch reads their units in its first round trip.
	unitPools unitPools
	// recent are the rows of the holds this process granted lately, hot
	// the rows its hold batches locked lately (batch_joined.go).
	recent recentHolds
	hot    *hotRows
	// soldOut answers holds refused for want of any stock from memory
	// (soldout.go).
	soldOut *soldOut
	// places are the figures of pools at several locations a hold batch
	// picks where its lines go on (places.go).
	places *placeMemory
	// bundles are the bundles' definitions holds expand (bundles.go).
	bundles bundleMemory
	// rowBatches is the service whose hold batches the expiry loop hands
	// the due holds of hot rows to: this one, or the one it shares with
	// (ShareWith).
	rowBatches *Service
}

// ShareWith makes s, the job workers' service of a process, share with
// web, its request service: web's memories of sold-out pools and of where
// to allocate (s's releases, expiries and rollbacks forget what they put
// back, in the memories requests use) and web's hot rows, whose due holds
// s's expiry loop hands to web's hold batches, the ones busy with those
// rows.
func (s *Service) ShareWith(web *Service) {
	s.soldOut, s.places, s.hot, s.rowBatches = web.soldOut, web.places, web.hot, web
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *Service {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.WithDefaults()
	if cfg.Serial {
		cfg.MaxBatch = 1
	}
	s := &Service{pool: pool, log: log, cfg: cfg, rec: cfg.Recorder, counts: holdstats.NewCounts(),
		lockTimeout:       fmt.Sprintf("%dms", max(cfg.LockTimeout.Milliseconds(), 1)),
		stopSaleWait:      stopSaleWait(cfg.LockTimeout),
		expiryLockTimeout: fmt.Sprintf("%dms", max(cfg.LockTimeout.Milliseconds()/5, 1)),
	}
	s.Service = stock.New(pool, log, stock.Config{Alert: cfg.Alert}, soldOutWrites{s})
	s.soldOut = newSoldOut(cfg.SoldOutRecheck)
	s.soldOut.read = s.recheckSoldOut
	s.places = newPlaceMemory(cfg.AllocationMemory)
	s.hot, s.rowBatches = &hotRows{}, s
	s.holds = batch.NewQueue("hold", cfg.MaxBatch, cfg.Flights, batchTimeout, s.runHolds, s.panicked)
	s.changes = batch.NewQueue("confirm/release", cfg.MaxBatch, cfg.Flights, batchTimeout, s.runChanges, s.panicked)
	// One lookup at a time: the lookups that wait meanwhile go in the next
	// one, so a sold-out rush sends PostgreSQL as few as it can.
	s.replays = batch.NewQueue("key lookup", max(cfg.MaxBatch, 1000), 1, batchTimeout, s.runKeyLookups, s.panicked)
	return s
}

// panicked reports a batch that panicked: logged with its stack, and
// alerted through Config.Alert.
func (s *Service) panicked(name string, v any, stack []byte) {
	s.log.Error("batch panicked", "batch", name, "panic", fmt.Sprint(v), "stack", string(stack))
	if s.cfg.Alert == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.cfg.Alert(ctx, stock.Alert{
		Kind:    "batch_panicked",
		Subject: "batch:" + name,
		Summary: fmt.Sprintf("A %s batch panicked; its callers got 500 internal_error and the process went on. This is a bug: report it with the stack in the details and the log.", name),
		Details: map[string]any{"batch": name, "panic": fmt.Sprint(v), "stack": string(stack)},
	})
}

// refusedByDatabase reports a change the database refused to write
// (SQLSTATE SH001): the counters, a hold or its lines were not what the
// service decided on, so either the books of a pool are out of balance or
// the service decided wrong. Nothing was written; a person must look.
func (s *Service) refusedByDatabase(ctx context.Context, batch, subject string, err error) {
	s.log.Error("the database refused a decided change", "batch", batch, "subject", subject, "err", err)
	if s.cfg.Alert == nil {
		return
	}
	s.cfg.Alert(ctx, stock.Alert{
		Kind:    "change_refused",
		Subject: batch + ":" + subject,
		Summary: fmt.Sprintf("The database refused a %s the service had decided, and nothing was written: %v. "+
			"Either the pool's counters disagree with its holds (reconcile it; the reconciliation pauses it and says how) or this is a bug to report.", batch, err),
		Details: map[string]any{"batch": batch, "subject": subject, "error": err.Error()},
	})
}

// Line is one (sku, location, pool) of a reservation, quantities summed:
// a stock row the hold took units of.
type Line struct {
	SKU      string `json:"sku"`
	Location string `json:"location"`
	Pool     string `json:"pool"`
	Quantity int64  `json:"quantity"`
	// Units are the units the line holds (or held), for a pool of units
	// with an identity: Quantity of them, in byte order.
	Units []string `json:"units,omitempty"`
	// Bundle, on a component line of a bundle, is the bundle line it was
	// held for (bundles.go); nil on a line of the SKU itself.
	Bundle *BundleLine `json:"bundle,omitempty"`
	// Backordered is how many of Quantity were promised beyond the row's
	// stock and are not on hand yet (backorders.go); ExpectedOn, when the
	// hold was made, the day the delivery that fills the last of them was
	// expected (empty: in transit, or promised below zero).
	Backordered int64  `json:"backordered,omitempty"`
	ExpectedOn  string `json:"expected_on,omitempty"`
}

// BundleLine is the line of a hold request on a bundle that a component
// line was held for: the bundle, how many of it, and the version of its
// definition the hold used.
type BundleLine struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
	Version  int64  `json:"version"`
}

// lineOf is a line as read from the database.
func lineOf(sku, location, pool string, quantity int64, units []string) Line {
	l := Line{SKU: sku, Location: location, Pool: pool, Quantity: quantity}
	if len(units) > 0 {
		l.Units = units
	}
	return l
}

// withBundle is l with the bundle line its columns name (none when sku is
// null).
func withBundle(l Line, sku *string, quantity, version *int64) Line {
	if sku != nil && quantity != nil && version != nil {
		l.Bundle = &BundleLine{SKU: *sku, Quantity: *quantity, Version: *version}
	}
	return l
}

// grantedBundle is the quantity of the bundle a line was granted for, as
// granted: the component's units granted (granted) over what one bundle
// took of it (per, by the definition the line used), or the line's
// bundle quantity as it is now when the definition is not known (nil).
func grantedBundle(quantity *int64, granted int64, per *int64) *int64 {
	if quantity == nil || per == nil || *per <= 0 {
		return quantity
	}
	n := granted / *per
	return &n
}

// promisedLine is a line as read, with what of it is backordered and,
// for its first answer, when that was expected.
func promisedLine(l Line, backordered int64, expected pgtype.Date) Line {
	l.Backordered = backordered
	if expected.Valid {
		l.ExpectedOn = expected.Time.Format(time.DateOnly)
	}
	return l
}

// storedLine is a hold line as read from reservation_lines.
func storedLine(l db.ReservationLine) Line {
	line := withBundle(lineOf(l.Sku, l.Location, l.Pool, l.Quantity, l.Units), l.BundleSku, l.BundleQuantity, l.BundleVersion)
	line.Backordered = l.Backordered
	return line
}

// Item is a SKU's pool in a hold as shops see it: its quantity, and where
// it came from, one location (Location) or, for a line taken from several,
// how much from each (Allocations).
type HeldItem struct {
	SKU      string `json:"sku"`
	Pool     string `json:"pool"`
	Quantity int64  `json:"quantity"`
	Location string `json:"location,omitempty"`
	// Allocations, for a line taken from several locations, says how many
	// units came from each, in the order of its lines (by location id).
	Allocations []Allocation `json:"allocations,omitempty"`
	// Units are the units held (or that were), for a pool of units with
	// an identity.
	Units []string `json:"units,omitempty"`
	// Bundle, for a component of a bundle, is the bundle line of the
	// request it was held for.
	Bundle *BundleLine `json:"bundle,omitempty"`
	// Backordered is how many of Quantity are promised and not on hand
	// yet; ExpectedOn when they were expected as the hold was made (the
	// latest of its locations').
	Backordered int64  `json:"backordered,omitempty"`
	ExpectedOn  string `json:"expected_on,omitempty"`
}

// Allocation is the part of a line taken from one location.
type Allocation struct {
	Location string `json:"location"`
	Quantity int64  `json:"quantity"`
}

// heldItems is lines as shops see them: one item per (sku, pool), naming
// its location, or its allocations when it came from several.
func heldItems(lines []Line) []HeldItem {
	var out []HeldItem
	at := map[string]int{}
	for _, l := range lines {
		k := poolKey(l.SKU, l.Pool)
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, HeldItem{SKU: l.SKU, Pool: l.Pool, Quantity: l.Quantity, Location: l.Location, Units: l.Units, Bundle: l.Bundle,
				Backordered: l.Backordered, ExpectedOn: l.ExpectedOn})
			continue
		}
		it := &out[i]
		it.Backordered += l.Backordered
		it.ExpectedOn = max(it.ExpectedOn, l.ExpectedOn)
		if it.Allocations == nil {
			it.Allocations = []Allocation{{Location: it.Location, Quantity: it.Quantity}}
			it.Location = ""
		}
		it.Allocations = append(it.Allocations, Allocation{Location: l.Location, Quantity: l.Quantity})
		it.Quantity += l.Quantity
		it.Units = append(it.Units, l.Units...)
	}
	return out
}

// Reservation is a hold as shops see it.
type Reservation struct {
	ID            uuid.UUID  `json:"id"`
	Status        HoldStatus `json:"status"`
	OrderRef      *string    `json:"order_ref"`
	Campaign      *string    `json:"campaign"`
	CustomerRef   *string    `json:"customer_ref,omitempty"`
	ExpiresAt     time.Time  `json:"expires_at"`
	CreatedAt     time.Time  `json:"created_at"`
	ConfirmedAt   *time.Time `json:"confirmed_at,omitempty"`
	ReleasedAt    *time.Time `json:"released_at,omitempty"`
	Items         []HeldItem `json:"items"`
	ReleaseReason *string    `json:"release_reason"`
	ReleasedBy    *string    `json:"released_by,omitempty"`
	// ReinstatedFrom names the released or expired hold this one holds the
	// lines of again (see Reinstate); ReinstatedAs, on such a hold, names
	// the hold that did.
	ReinstatedFrom *uuid.UUID `json:"reinstated_from,omitempty"`
	ReinstatedAs   *uuid.UUID `json:"reinstated_as,omitempty"`

	client string
	// lines are the hold's lines, one per stock row.
	lines []Line
}

// Lines are the hold's lines, one per stock row (sku, location, pool) it
// took units of.
func (r Reservation) Lines() []Line { return r.lines }

func newReservation(r db.Reservation, lines []Line) Reservation {
	return Reservation{
		ID:             r.ID,
		Status:         HoldStatus(r.Status),
		OrderRef:       r.OrderRef,
		Campaign:       r.Campaign,
		CustomerRef:    r.CustomerRef,
		ExpiresAt:      r.ExpiresAt,
		CreatedAt:      r.CreatedAt,
		ConfirmedAt:    r.ConfirmedAt,
		ReleasedAt:     r.ReleasedAt,
		Items:          heldItems(lines),
		lines:          lines,
		ReleaseReason:  r.ReleaseReason,
		ReleasedBy:     r.ReleasedBy,
		ReinstatedFrom: reinstatedFrom(r.IdempotencyKey),
		client:         r.Client,
	}
}

// firstAnswer is hold r as its hold request answered it, which is what an
// idempotent replay returns, byte for byte, whatever happened to the hold
// since: held; with the lines it was granted (first: its reserve ledger
// rows, in the order the batch wrote and answered them, which no partial
// release changes); and the expiry it was granted, its creation plus ttl
// (the hold's time to live: the request's, or its campaign's), which no
// extend changes (both are set by the one INSERT, at its transaction's
// now()).
func firstAnswer(r db.Reservation, first []Line, ttl int64) Reservation {
	out := newReservation(r, first)
	out.Status = StatusHeld
	out.ConfirmedAt, out.ReleasedAt, out.ReleaseReason, out.ReleasedBy = nil, nil, nil, nil
	out.ExpiresAt = r.CreatedAt.Add(time.Duration(ttl) * time.Second)
	return out
}

// HoldStatus is a hold's status, as the reservations table's status
// column has it.
type HoldStatus string

// Reservation statuses.
const (
	StatusHeld      HoldStatus = "held"
	StatusConfirmed HoldStatus = "confirmed"
	StatusReleased  HoldStatus = "released"
	StatusExpired   HoldStatus = "expired"
)

// Caller is who asks: an API key's owner, and whether it may act on every
// client's holds (ops) or only on its own (shop). Name is the ledger's actor.
// Locations, when not nil, are the only locations the key's new holds may
// take stock from (a shop key bound to a sales channel): a hold Reinstate
// makes is a new hold, bound like any other. Reads are not bound.
type Caller struct {
	Name      string
	Ops       bool
	Locations []string
}

func (c Caller) maySee(client string) bool { return c.Ops || c.Name == client }

// Get returns reservation id, if the caller may see it.
func (s *Service) Get(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	q := db.New(s.pool)
	r, err := q.ReservationGet(ctx, id)
	if err != nil {
		return Reservation{}, dberr.NotFound(err, "reservation")
	}
	if !by.maySee(r.Client) {
		return Reservation{}, domain.Missing("reservation")
	}
	lines, err := linesOf(ctx, q, r.ID)
	if err != nil {
		return Reservation{}, err
	}
	out := newReservation(r, lines)
	if HoldStatus(r.Status) == StatusReleased || HoldStatus(r.Status) == StatusExpired {
		again, err := q.ReservationGetByKey(ctx, r.Client, reinstateKey(r.ID))
		switch {
		case err == nil:
			out.ReinstatedAs = &again.ID
		case !errors.Is(err, pgx.ErrNoRows):
			return Reservation{}, err
		}
	}
	return out, nil
}

func linesOf(ctx context.Context, q *db.Queries, id uuid.UUID) ([]Line, error) {
	rows, err := q.ReservationLinesGet(ctx, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	lines := make([]Line, len(rows))
	for i, l := range rows {
		lines[i] = storedLine(l)
	}
	return lines, nil
}
