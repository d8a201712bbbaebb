// Package campaigns runs flash sales. A campaign has its own stock pool per
// SKU: at its start the allotments move out of main into the pool (a pair
// of transfer ledger rows each), holds that name the campaign draw only from
// it, and at its end the campaign stops taking holds at once, its unpaid
// holds are rolled back in batches (package rollbacks), what is left moves
// back to main and the campaign's SKUs are reconciled.
package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/enqueue"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
)

// Campaign statuses.
const (
	StatusScheduled  = "scheduled"
	StatusActive     = "active"
	StatusEnded      = "ended"
	StatusRolledBack = "rolled_back"
)

// MaxAllotments bounds the SKUs of one campaign.
const MaxAllotments = 1000

// Service creates, starts and ends campaigns.
type Service struct {
	pool      *pgxpool.Pool
	jobs      enqueue.Inserter
	inv       *inventory.Service
	rollbacks *rollbacks.Service
	alerts    *alerts.Service
}

// New returns a Service. Its transactions that give stock back to main run
// through inv (inventory.Service.InTx), as the service's own writes.
func New(pool *pgxpool.Pool, jobs enqueue.Inserter, inv *inventory.Service, rb *rollbacks.Service, al *alerts.Service) *Service {
	return &Service{pool: pool, jobs: jobs, inv: inv, rollbacks: rb, alerts: al}
}

// CampaignStartArgs starts a campaign at its starts_at.
type CampaignStartArgs struct {
	Campaign string `json:"campaign" river:"unique"`
}

// Kind names the job in river_job.
func (CampaignStartArgs) Kind() string { return "campaign_start" }

// InsertOpts makes the job unique per campaign.
func (CampaignStartArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Validate checks that the job names a campaign.
func (a CampaignStartArgs) Validate() error { return domain.ValidName("campaign", a.Campaign) }

// CampaignEndArgs ends a campaign at its ends_at.
type CampaignEndArgs struct {
	Campaign string `json:"campaign" river:"unique"`
}

// Kind names the job in river_job.
func (CampaignEndArgs) Kind() string { return "campaign_end" }

// InsertOpts makes the job unique per campaign.
func (CampaignEndArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Validate checks that the job names a campaign.
func (a CampaignEndArgs) Validate() error { return domain.ValidName("campaign", a.Campaign) }

// Allotment is how much of a SKU a campaign takes from main, at one
// location (empty: the campaign's, else the default location).
type Allotment struct {
	SKU      string `json:"sku"`
	Location string `json:"location,omitempty"`
	Quantity int64  `json:"quantity"`
	// Units names the units with an identity the campaign carves out of
	// main (Quantity is their number); none: the first Quantity available
	// in seat order, for a SKU of units.
	Units []string `json:"units,omitempty"`
}

// Request asks for a new campaign.
type Request struct {
	ID             string
	StartsAt       time.Time
	EndsAt         time.Time
	HoldTTLSeconds int64
	// MaxPerOrder, when set, caps the units of one SKU a hold may take
	// from the campaign (refused with limit_exceeded).
	MaxPerOrder *int64
	// MaxPerCustomer, when set, caps the units of one SKU that the holds
	// of one customer (their customer_ref) hold or bought from the
	// campaign, over the last CustomerWindowSeconds (nil: the whole
	// campaign).
	MaxPerCustomer, CustomerWindowSeconds *int64
	// Location is where the allotments that name none are carved from;
	// empty means the default location.
	Location   string
	Allotments []Allotment
	Actor      string
}

// Validate checks the campaign against the contract's limits.
func (c Request) Validate() error {
	if err := domain.ValidName("id", c.ID); err != nil {
		return err
	}
	if c.ID == stock.MainPool {
		return domain.Invalid("id %q is the name of the regular pool", c.ID)
	}
	if c.StartsAt.IsZero() || c.EndsAt.IsZero() {
		return domain.Invalid("starts_at and ends_at are required (RFC 3339)")
	}
	if !c.EndsAt.After(c.StartsAt) {
		return domain.Invalid("ends_at must be after starts_at")
	}
	if !c.EndsAt.After(time.Now()) {
		return domain.Invalid("ends_at is in the past")
	}
	if c.HoldTTLSeconds < 1 || c.HoldTTLSeconds > inventory.MaxTTLSeconds {
		return domain.Invalid("hold_ttl_seconds must be from 1 to %d", inventory.MaxTTLSeconds)
	}
	if c.MaxPerOrder != nil && (*c.MaxPerOrder < 1 || *c.MaxPerOrder > inventory.MaxPerOrder) {
		return domain.Invalid("max_per_order must be from 1 to %d (leave it out for no cap)", inventory.MaxPerOrder)
	}
	if err := c.validatePerCustomer(); err != nil {
		return err
	}
	if len(c.Allotments) == 0 || len(c.Allotments) > MaxAllotments {
		return domain.Invalid("allotments must have 1 to %d SKUs", MaxAllotments)
	}
	if c.Location != "" {
		if err := domain.ValidName("location", c.Location); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for i, a := range c.Allotments {
		if err := domain.ValidName(fmt.Sprintf("allotments[%d].sku", i), a.SKU); err != nil {
			return err
		}
		if a.Location != "" {
			if err := domain.ValidName(fmt.Sprintf("allotments[%d].location", i), a.Location); err != nil {
				return err
			}
		}
		at := a.SKU + "\x00" + a.Location
		if seen[at] {
			return domain.Invalid("allotments name SKU %q twice at one location", a.SKU)
		}
		seen[at] = true
		if a.Quantity < 1 || a.Quantity > stock.MaxAdjustment {
			return domain.Invalid("allotments[%d].quantity must be from 1 to %d", i, stock.MaxAdjustment)
		}
		if a.Units == nil {
			continue
		}
		if int64(len(a.Units)) != a.Quantity || len(a.Units) > stock.MaxUnitsPerRequest {
			return domain.Invalid("allotments[%d].units must name quantity (%d) units, at most %d", i, a.Quantity, stock.MaxUnitsPerRequest)
		}
		named := map[string]bool{}
		for j, u := range a.Units {
			if err := domain.ValidName(fmt.Sprintf("allotments[%d].units[%d]", i, j), u); err != nil {
				return err
			}
			if named[u] {
				return domain.Invalid("allotments[%d] names unit %q twice", i, u)
			}
			named[u] = true
		}
	}
	return nil
}

// Pool is a campaign's stock for one SKU at one location, every state.
type Pool struct {
	SKU            string `json:"sku"`
	Location       string `json:"location"`
	Total          int64  `json:"total"`
	Available      int64  `json:"available"`
	Reserved       int64  `json:"reserved"`
	Sold           int64  `json:"sold"`
	QualityControl int64  `json:"quality_control"`
	Damaged        int64  `json:"damaged"`
	SafetyStock    int64  `json:"safety_stock"`
	Incoming       int64  `json:"incoming"`
	Status         string `json:"status"`
}

// Progress is how far a campaign's end rollback got.
type Progress struct {
	rollbacks.Rollback
	// HeldRemaining is how many of the campaign's holds are still held.
	HeldRemaining int32 `json:"held_remaining"`
}

// Campaign is a campaign as operators see it.
type Campaign struct {
	ID             string    `json:"id"`
	Status         string    `json:"status"`
	StartsAt       time.Time `json:"starts_at"`
	EndsAt         time.Time `json:"ends_at"`
	HoldTTLSeconds int64     `json:"hold_ttl_seconds"`
	MaxPerOrder    *int64    `json:"max_per_order"`
	// MaxPerCustomer and CustomerWindowSeconds: see Request.
	MaxPerCustomer        *int64     `json:"max_per_customer,omitempty"`
	CustomerWindowSeconds *int64     `json:"customer_window_seconds,omitempty"`
	CreatedBy             string     `json:"created_by"`
	CreatedAt             time.Time  `json:"created_at"`
	StartedAt             *time.Time `json:"started_at"`
	EndedAt               *time.Time `json:"ended_at"`
	EndedBy               *string    `json:"ended_by"`
	// EndedKey is the API key that ended it early, beside the operator
	// EndedBy names (see domain.WithKeyName); null when it ended on time.
	EndedKey     *string     `json:"ended_key"`
	EndReason    *string     `json:"end_reason"`
	RolledBackAt *time.Time  `json:"rolled_back_at"`
	Allotments   []Allotment `json:"allotments"`
	Pools        []Pool      `json:"pools"`
	Rollback     *Progress   `json:"rollback"`
}

// CreateOnce is CreateTx in a transaction of its own, at most once per key
// (see idempotency.Do).
func (s *Service) CreateOnce(ctx context.Context, key idempotency.Key, c Request) (out Campaign, replayed bool, err error) {
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Campaign, error) { return s.CreateTx(ctx, tx, c) })
}

// CreateTx records a campaign with its allotments and schedules its start
// and end jobs, inside the caller's transaction.
func (s *Service) CreateTx(ctx context.Context, tx pgx.Tx, c Request) (Campaign, error) {
	if err := c.Validate(); err != nil {
		return Campaign{}, err
	}
	q := db.New(tx)
	_, err := q.CampaignCreate(ctx, db.CampaignCreateParams{
		ID: c.ID, StartsAt: c.StartsAt, EndsAt: c.EndsAt, HoldTtlSeconds: c.HoldTTLSeconds, CreatedBy: c.Actor,
		MaxPerOrder: c.MaxPerOrder, MaxPerCustomer: c.MaxPerCustomer, CustomerWindowSeconds: c.CustomerWindowSeconds,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Campaign{}, &domain.Error{Code: domain.CodeConflict, Detail: fmt.Sprintf("campaign %q already exists", c.ID)}
	}
	if err != nil {
		return Campaign{}, fmt.Errorf("create campaign: %w", err)
	}
	allot := slices.Clone(c.Allotments)
	for i := range allot {
		if allot[i].Location == "" {
			allot[i].Location = c.Location
		}
		if allot[i].Location == "" {
			allot[i].Location = stock.DefaultLocation
		}
	}
	slices.SortFunc(allot, func(a, b Allotment) int {
		if d := strings.Compare(a.SKU, b.SKU); d != 0 {
			return d
		}
		return strings.Compare(a.Location, b.Location)
	})
	for i := 1; i < len(allot); i++ {
		if allot[i].SKU == allot[i-1].SKU && allot[i].Location == allot[i-1].Location {
			return Campaign{}, domain.Invalid("allotments name SKU %q twice at %s", allot[i].SKU, allot[i].Location)
		}
	}
	skus := make([]string, len(allot))
	locations := make([]string, len(allot))
	qty := make([]int64, len(allot))
	units := make([][]byte, len(allot))
	for i, a := range allot {
		skus[i], locations[i], qty[i] = a.SKU, a.Location, a.Quantity
		if a.Units != nil {
			units[i], _ = json.Marshal(a.Units)
		}
	}
	if err := stock.RequireLocations(ctx, tx, locations...); err != nil {
		return Campaign{}, err
	}
	if err := q.CampaignAllotmentsInsert(ctx, db.CampaignAllotmentsInsertParams{Campaign: c.ID, Skus: skus, Locations: locations, Quantities: qty, Units: units}); err != nil {
		return Campaign{}, fmt.Errorf("record allotments: %w", err)
	}
	if _, err := s.jobs.InsertTx(ctx, tx, CampaignStartArgs{Campaign: c.ID}, &river.InsertOpts{ScheduledAt: c.StartsAt}); err != nil {
		return Campaign{}, fmt.Errorf("schedule campaign_start: %w", err)
	}
	if _, err := s.jobs.InsertTx(ctx, tx, CampaignEndArgs{Campaign: c.ID}, &river.InsertOpts{ScheduledAt: c.EndsAt}); err != nil {
		return Campaign{}, fmt.Errorf("schedule campaign_end: %w", err)
	}
	return view(ctx, q, c.ID)
}

// Get returns campaign id with its pools and rollback progress.
func (s *Service) Get(ctx context.Context, id string) (Campaign, error) {
	if err := domain.ValidName("campaign id", id); err != nil {
		return Campaign{}, err
	}
	return view(ctx, db.New(s.pool), id)
}

func view(ctx context.Context, q *db.Queries, id string) (Campaign, error) {
	c, err := q.CampaignGet(ctx, id)
	if err != nil {
		return Campaign{}, notFound(err, id)
	}
	out := Campaign{
		ID: c.ID, Status: c.Status, StartsAt: c.StartsAt, EndsAt: c.EndsAt,
		HoldTTLSeconds: c.HoldTtl.Microseconds / 1e6, MaxPerOrder: c.MaxPerOrder, CreatedBy: c.CreatedBy, CreatedAt: c.CreatedAt,
		MaxPerCustomer: c.MaxPerCustomer, CustomerWindowSeconds: c.CustomerWindowSeconds,
		StartedAt: c.StartedAt, EndedAt: c.EndedAt, EndedBy: c.EndedBy, EndedKey: c.EndedKey, EndReason: c.EndReason,
		RolledBackAt: c.RolledBackAt,
		Allotments:   []Allotment{}, Pools: []Pool{},
	}
	allot, err := q.CampaignAllotments(ctx, id)
	if err != nil {
		return Campaign{}, err
	}
	for _, a := range allot {
		out.Allotments = append(out.Allotments, Allotment{SKU: a.Sku, Location: a.Location, Quantity: a.Quantity, Units: allotmentUnits(a.Units)})
	}
	pools, err := q.CampaignPools(ctx, id)
	if err != nil {
		return Campaign{}, err
	}
	for _, p := range pools {
		out.Pools = append(out.Pools, Pool{SKU: p.Sku, Location: p.Location, Total: p.Total, Available: p.Available, Reserved: p.Reserved, Sold: p.Sold,
			QualityControl: p.QualityControl, Damaged: p.Damaged, SafetyStock: p.SafetyStock, Incoming: p.Incoming, Status: p.Status})
	}
	rb, err := q.RollbackLatestForCampaign(ctx, id)
	if err == nil {
		r, err := rollbacks.View(rb)
		if err != nil {
			return Campaign{}, err
		}
		held, err := q.CampaignHeldCount(ctx, &id)
		if err != nil {
			return Campaign{}, err
		}
		out.Rollback = &Progress{Rollback: r, HeldRemaining: held}
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Campaign{}, err
	}
	return out, nil
}

// StartTx moves every allotment from main into the campaign's pool and
// opens the campaign, inside the caller's transaction. All or nothing: when
// main lacks stock for any SKU (or a unit named is not available there) it
// returns insufficient_available naming every short SKU, and moves nothing. A campaign past scheduled is left alone.
func (s *Service) StartTx(ctx context.Context, tx pgx.Tx, id string) error {
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted by hand: nothing to start
	}
	if err != nil {
		return err
	}
	if c.Status != StatusScheduled {
		return nil
	}
	allot, err := q.CampaignAllotments(ctx, id)
	if err != nil {
		return err
	}
	var short []string
	for _, a := range allot {
		err := stock.PoolTransferTx(ctx, tx, stock.PoolTransfer{
			SKU: a.Sku, Location: a.Location, From: stock.MainPool, To: id, Quantity: a.Quantity, Units: allotmentUnits(a.Units),
			Actor: "system:campaign_start", Reason: "campaign " + id + " starts", Ref: id,
		})
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.CodeInsufficientAvailable {
			short = append(short, fmt.Sprintf("%s needs %d%s", a.Sku, a.Quantity, stock.At(a.Location)))
			continue
		}
		if errors.As(err, &de) && (de.Code == domain.CodeUnitUnavailable || de.Code == domain.CodeSerializedPool) {
			short = append(short, fmt.Sprintf("%s: %s", a.Sku, de.Detail))
			continue
		}
		if err != nil {
			return err
		}
	}
	if len(short) > 0 {
		return &domain.Error{Code: domain.CodeInsufficientAvailable,
			Detail: fmt.Sprintf("campaign %q cannot start: main lacks stock (%s)", id, strings.Join(short, ", "))}
	}
	_, err = q.CampaignSetStatus(ctx, db.CampaignSetStatusParams{Status: StatusActive, ID: id})
	return err
}

// Start runs StartTx in its own transaction. When main lacks the stock, it
// raises a critical alert (in a transaction of its own, since the start's
// is rolled back) and returns the error, so the job retries.
func (s *Service) Start(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.StartTx(ctx, tx, id) })
	var de *domain.Error
	if !errors.As(err, &de) {
		return err
	}
	_, aerr := s.alerts.Raise(ctx, alerts.Raise{
		Level: alerts.Critical, Kind: "campaign_start_failed", Subject: "campaign:" + id,
		Details: map[string]any{"campaign": id, "error": de.Detail},
		Action:  "Add stock to main (POST /v1/skus/{sku}/adjustments) or lower the allotments; the start is retried, and the campaign takes no holds until it starts.",
	})
	return errors.Join(err, aerr)
}

// allotmentUnits reads an allotment's named units (a JSON array, or
// null: none).
func allotmentUnits(raw []byte) []string {
	if raw == nil {
		return nil
	}
	var units []string
	if json.Unmarshal(raw, &units) != nil {
		return nil
	}
	return units
}

// notFound turns a campaign that is not there into unknown_campaign, the
// code every route answers a missing campaign with.
func notFound(err error, id string) error {
	return dberr.NotFoundAs(err, &domain.Error{Code: domain.CodeUnknownCampaign, Detail: fmt.Sprintf("campaign %q does not exist", id)})
}

// validatePerCustomer checks the cap per customer and its window.
func (c Request) validatePerCustomer() error {
	switch w := c.CustomerWindowSeconds; {
	case c.MaxPerCustomer != nil && (*c.MaxPerCustomer < 1 || *c.MaxPerCustomer > inventory.MaxPerOrder):
		return domain.Invalid("max_per_customer must be from 1 to %d (leave it out for no cap)", inventory.MaxPerOrder)
	case w != nil && c.MaxPerCustomer == nil:
		return domain.Invalid("customer_window_seconds is the window of max_per_customer: set that too")
	case w != nil && (*w < 1 || *w > stock.MaxCustomerWindowSeconds):
		return domain.Invalid("customer_window_seconds must be from 1 to %d (leave it out to count the whole campaign)", stock.MaxCustomerWindowSeconds)
	}
	return nil
}
