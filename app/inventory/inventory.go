// Package inventory owns stock and holds: the counters of every (sku, pool),
// the hold / confirm / release state machine, and the ledger rows that
// explain every unit. Each change happens in one transaction together with
// its ledger rows and the River jobs it needs.
package inventory

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/db"
)

// MainPool is the pool of regular stock; campaign pools are named after
// their campaign.
const MainPool = "main"

// Limits on requests, from the API contract.
const (
	MaxQuantity     = 1_000_000
	MaxLines        = 100
	MaxAdjustment   = 1_000_000_000
	MaxTTLSeconds   = 604_800
	DefaultTTL      = 900 * time.Second
	MaxNameLength   = 64
	MaxTextLength   = 500
	MaxOrderRefSize = 255
)

// JobInserter inserts River jobs inside a caller's transaction. A
// *river.Client[pgx.Tx] is one; an insert-only client (no queues, never
// started) is enough.
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// Config tunes the service.
type Config struct {
	// Coalesce turns on the per-row combiner for single-SKU holds. Off, every
	// hold takes the plain path.
	Coalesce bool
	// CoalesceWindow is how long the combiner waits for company when a
	// batch would hold a single request.
	CoalesceWindow time.Duration
	// CoalesceMaxBatch bounds the holds one transaction grants.
	CoalesceMaxBatch int
}

// Service holds stock for orders and hands it back.
type Service struct {
	pool     *pgxpool.Pool
	jobs     JobInserter
	log      *slog.Logger
	combiner *combiner
}

// New returns a Service on pool that inserts its jobs with jobs.
func New(pool *pgxpool.Pool, jobs JobInserter, log *slog.Logger, cfg Config) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{pool: pool, jobs: jobs, log: log}
	if cfg.Coalesce {
		s.combiner = newCombiner(s, cfg.CoalesceWindow, cfg.CoalesceMaxBatch)
	}
	return s
}

// ReleaseHoldArgs is the job that expires one hold at its expires_at. It is
// unique per hold, and harmless when the hold has already ended.
type ReleaseHoldArgs struct {
	ReservationID uuid.UUID `json:"reservation_id" river:"unique"`
}

// Kind names the job in river_job.
func (ReleaseHoldArgs) Kind() string { return "release_hold" }

// InsertOpts makes the job unique per hold with at most three attempts.
func (ReleaseHoldArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Line is one (sku, pool) of a reservation, quantities summed.
type Line struct {
	SKU      string `json:"sku"`
	Pool     string `json:"pool"`
	Quantity int64  `json:"quantity"`
}

// Reservation is a hold as shops see it.
type Reservation struct {
	ID            uuid.UUID  `json:"id"`
	Status        string     `json:"status"`
	OrderRef      *string    `json:"order_ref"`
	Campaign      *string    `json:"campaign"`
	ExpiresAt     time.Time  `json:"expires_at"`
	CreatedAt     time.Time  `json:"created_at"`
	ConfirmedAt   *time.Time `json:"confirmed_at,omitempty"`
	ReleasedAt    *time.Time `json:"released_at,omitempty"`
	Items         []Line     `json:"items"`
	ReleaseReason *string    `json:"release_reason"`
	ReleasedBy    *string    `json:"released_by,omitempty"`

	client string
}

func newReservation(r db.Reservation, lines []Line) Reservation {
	return Reservation{
		ID:            r.ID,
		Status:        r.Status,
		OrderRef:      r.OrderRef,
		Campaign:      r.Campaign,
		ExpiresAt:     r.ExpiresAt.UTC(),
		CreatedAt:     r.CreatedAt.UTC(),
		ConfirmedAt:   UTC(r.ConfirmedAt),
		ReleasedAt:    UTC(r.ReleasedAt),
		Items:         lines,
		ReleaseReason: r.ReleaseReason,
		ReleasedBy:    r.ReleasedBy,
		client:        r.Client,
	}
}

// firstAnswer is the reservation as its hold answered it, which is what an
// idempotent replay returns whatever happened to the hold since.
func (r Reservation) firstAnswer() Reservation {
	r.Status = StatusHeld
	r.ConfirmedAt, r.ReleasedAt, r.ReleaseReason, r.ReleasedBy = nil, nil, nil, nil
	return r
}

// UTC returns t in UTC (nil stays nil): the API answers in UTC whatever
// the server's time zone.
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Reservation statuses.
const (
	StatusHeld      = "held"
	StatusConfirmed = "confirmed"
	StatusReleased  = "released"
	StatusExpired   = "expired"
)

// Caller is who asks: an API key's owner, and whether it may act on every
// client's holds (ops) or only on its own (shop). Name is the ledger's actor.
type Caller struct {
	Name string
	Ops  bool
}

func (c Caller) maySee(client string) bool { return c.Ops || c.Name == client }

// Get returns reservation id, if the caller may see it.
func (s *Service) Get(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	q := db.New(s.pool)
	r, err := q.ReservationGet(ctx, id)
	if err != nil {
		return Reservation{}, notFound(err, "reservation")
	}
	if !by.maySee(r.Client) {
		return Reservation{}, ErrNotFound("reservation")
	}
	lines, err := linesOf(ctx, q, r.ID)
	if err != nil {
		return Reservation{}, err
	}
	return newReservation(r, lines), nil
}

func linesOf(ctx context.Context, q *db.Queries, id uuid.UUID) ([]Line, error) {
	rows, err := q.ReservationLinesGet(ctx, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	lines := make([]Line, len(rows))
	for i, l := range rows {
		lines[i] = Line{SKU: l.Sku, Pool: l.Pool, Quantity: l.Quantity}
	}
	return lines, nil
}
