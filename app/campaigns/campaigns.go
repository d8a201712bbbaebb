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
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
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
	if c.ID == inventory.MainPool {
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
		if a.Quantity < 1 || a.Quantity > inventory.MaxAdjustment {
			return domain.Invalid("allotments[%d].quantity must be from 1 to %d", i, inventory.MaxAdjustment)
		}
		if a.Units == nil {
			continue
		}
		if int64(len(a.Units)) != a.Quantity || len(a.Units) > inventory.MaxUnitsPerRequest {
			return domain.Invalid("allotments[%d].units must name quantity (%d) units, at most %d", i, a.Quantity, inventory.MaxUnitsPerRequest)
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
	ID             string     `json:"id"`
	Status         string     `json:"status"`
	StartsAt       time.Time  `json:"starts_at"`
	EndsAt         time.Time  `json:"ends_at"`
	HoldTTLSeconds int64      `json:"hold_ttl_seconds"`
	MaxPerOrder    *int64     `json:"max_per_order"`
	CreatedBy      string     `json:"created_by"`
	CreatedAt      time.Time  `json:"created_at"`
	StartedAt      *time.Time `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at"`
	EndedBy        *string    `json:"ended_by"`
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
		MaxPerOrder: c.MaxPerOrder,
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
			allot[i].Location = inventory.DefaultLocation
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
	if err := inventory.RequireLocations(ctx, tx, locations...); err != nil {
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
		err := inventory.PoolTransferTx(ctx, tx, inventory.PoolTransfer{
			SKU: a.Sku, Location: a.Location, From: inventory.MainPool, To: id, Quantity: a.Quantity, Units: allotmentUnits(a.Units),
			Actor: "system:campaign_start", Reason: "campaign " + id + " starts", Ref: id,
		})
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.CodeInsufficientAvailable {
			short = append(short, fmt.Sprintf("%s needs %d%s", a.Sku, a.Quantity, inventory.At(a.Location)))
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

// EndTx closes a campaign at once, inside the caller's transaction: it
// stops taking holds (its pools are paused in this same transaction, so a
// hold either committed before or is refused), and its unpaid holds start
// rolling back; its campaign_start or campaign_end job still waiting is
// cancelled. Ending an ended campaign answers its existing rollback, and
// resumes its end if that was stranded (see ResumeTx).
func (s *Service) EndTx(ctx context.Context, tx pgx.Tx, id, operator, reason string) (rollbacks.Created, error) {
	if operator == "" {
		operator = "system:campaign_end"
	} else if err := domain.ValidName("operator", operator); err != nil {
		return rollbacks.Created{}, err
	}
	if reason == "" {
		reason = "campaign " + id + " ended"
	} else if err := domain.ValidText("reason", reason, domain.MaxTextLength); err != nil {
		return rollbacks.Created{}, err
	}
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if err != nil {
		return rollbacks.Created{}, notFound(err, id)
	}
	if c.Status == StatusEnded || c.Status == StatusRolledBack {
		rb, err := q.RollbackLatestForCampaign(ctx, id)
		if err != nil {
			return rollbacks.Created{}, fmt.Errorf("campaign %s ended without a rollback: %w", id, err)
		}
		if c.Status == StatusEnded {
			// Ending again (or a retried campaign_end job) carries a
			// stranded end on: its rollback, or the finish.
			if _, _, err := s.carryOnEndTx(ctx, tx, id, rb, operator); err != nil {
				return rollbacks.Created{}, err
			}
		}
		return rollbacks.Created{RollbackID: rb.ID, JobID: domain.Value(rb.JobID)}, nil
	}
	if _, err := q.CampaignSetStatus(ctx, db.CampaignSetStatusParams{
		Status: StatusEnded, EndedBy: &operator, EndReason: &reason, EndedKey: domain.KeyName(ctx), ID: id,
	}); err != nil {
		return rollbacks.Created{}, err
	}
	// Its scheduled start or end has nothing left to do: it leaves the
	// job backlog with the campaign (the job running this end, if any,
	// is running, not waiting, and finishes as usual).
	if _, err := q.CampaignStepJobsCancel(ctx, id); err != nil {
		return rollbacks.Created{}, fmt.Errorf("cancel campaign %s's scheduled steps: %w", id, err)
	}
	pools, err := q.CampaignPools(ctx, id)
	if err != nil {
		return rollbacks.Created{}, err
	}
	for _, p := range pools {
		err := inventory.PauseTx(ctx, tx, inventory.SwitchRequest{SKU: p.Sku, Location: p.Location, Pool: id, Actor: operator, Reason: "campaign " + id + " ended"})
		if err != nil {
			return rollbacks.Created{}, err
		}
	}
	// Its rollback's cut-off is now, its pools paused, not the
	// transaction's start: a hold batch that locked a pool before the pause
	// began after this transaction did, and committed; every hold of the
	// campaign is in reach, and none can come after.
	now, err := q.DatabaseClock(ctx)
	if err != nil {
		return rollbacks.Created{}, err
	}
	return s.rollbacks.StartTx(ctx, tx, rollbacks.Request{
		Operator: operator, Reason: reason, Scope: rollbacks.Scope{Campaign: id}, Source: rollbacks.SourceCampaignEnd, RequestedAt: &now,
	})
}

// End is EndTx in its own transaction (through inventory's InTx: ending
// again may finish a stranded end, giving stock back to main).
func (s *Service) End(ctx context.Context, id, operator, reason string) (rollbacks.Created, error) {
	var out rollbacks.Created
	err := s.inv.InTx(ctx, func(tx pgx.Tx) (err error) {
		out, err = s.EndTx(ctx, tx, id, operator, reason)
		return err
	})
	return out, err
}

// RollbackBatch runs one batch of rollback id (the rollback_batch job
// jobID) in a transaction of its own, whatever the rollback's source. The
// last batch of a campaign's end also finishes the campaign (FinishTx), in
// that same transaction: a campaign is rolled_back if and only if its last
// unpaid hold was released. The transaction locks a campaign's end's
// campaign before its rollback, as EndTx and ResumeTx do (the finish locks
// it, and an end that carries the rollback on locks the rollback after
// it), and runs through inventory's InTx, as the service's own writes: the
// finish gives stock back to main.
func (s *Service) RollbackBatch(ctx context.Context, id, jobID int64) (b rollbacks.Batch, err error) {
	err = s.inv.InTx(ctx, func(tx pgx.Tx) error {
		if err := lockCampaignOf(ctx, tx, id); err != nil {
			return err
		}
		if b, err = s.rollbacks.BatchTx(ctx, tx, id, jobID); err != nil {
			return err
		}
		if b.Finished && b.Rollback.Source == rollbacks.SourceCampaignEnd {
			return s.FinishTx(ctx, tx, b.Rollback.Scope.Campaign, b.Rollback.Operator)
		}
		if b.Finished && b.Rollback.ReconciliationRunID == nil {
			id, err := s.reconcileRollbackTx(ctx, tx, b.Rollback)
			b.Rollback.ReconciliationRunID = id
			return err
		}
		return nil
	})
	return b, err
}

// lockCampaignOf locks the campaign whose end rollback id is (nothing for
// another rollback, or one that does not exist: BatchTx answers that).
func lockCampaignOf(ctx context.Context, tx pgx.Tx, id int64) error {
	q := db.New(tx)
	row, err := q.RollbackGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read rollback %d: %w", id, err)
	}
	if row.Source != rollbacks.SourceCampaignEnd {
		return nil
	}
	r, err := rollbacks.View(row)
	if err != nil {
		return err
	}
	if _, err := q.CampaignLock(ctx, r.Scope.Campaign); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("lock campaign %s: %w", r.Scope.Campaign, err)
	}
	return nil
}

// reconcileRollbackTx asks, in a manual rollback's last batch, for the
// second reconciliation that follows it: a run of the SKUs its scope
// covered, recorded on the request. It returns the run's id (nil when the
// scope covers no SKU).
func (s *Service) reconcileRollbackTx(ctx context.Context, tx pgx.Tx, r rollbacks.Rollback) (*int64, error) {
	q := db.New(tx)
	sc := r.Scope
	skus, err := q.RollbackSKUs(ctx, sc.ReservationIDs, domain.Optional(sc.Campaign), domain.Optional(sc.SKU))
	if err != nil {
		return nil, fmt.Errorf("list the SKUs of rollback %d: %w", r.ID, err)
	}
	if len(skus) == 0 {
		return nil, nil
	}
	run, err := q.ReconcileRunCreate(ctx, reconcile.TriggerRollback, skus)
	if err != nil {
		return nil, fmt.Errorf("record the reconciliation of rollback %d: %w", r.ID, err)
	}
	if _, err := s.jobs.InsertTx(ctx, tx, reconcile.ReconcileArgs{RunID: run.ID}, nil); err != nil {
		return nil, fmt.Errorf("enqueue the reconciliation of rollback %d: %w", r.ID, err)
	}
	if err := q.RollbackReconcileSet(ctx, &run.ID, r.ID); err != nil {
		return nil, err
	}
	return &run.ID, nil
}

// FinishTx completes a campaign whose unpaid holds are all rolled back,
// inside the last rollback batch's transaction: everything left on hand in
// its pools (available, quality control, damaged, safety stock) moves back
// to main at the same location, each state to the same state
// (inventory.GiveBackTx), the campaign becomes rolled_back, and a
// reconciliation of its SKUs is enqueued. Units sold stay in the pool, as
// the record of the sale; units in transit to or from a pool land in main
// when their transfer is received or cancelled.
func (s *Service) FinishTx(ctx context.Context, tx pgx.Tx, id, actor string) error {
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if err != nil {
		return fmt.Errorf("lock campaign %s: %w", id, err)
	}
	if c.Status != StatusEnded {
		return nil
	}
	skus, _, err := giveBackTx(ctx, tx, id, actor, "campaign "+id+" ended: remainder back to main")
	if err != nil {
		return err
	}
	if _, err := q.CampaignSetStatus(ctx, db.CampaignSetStatusParams{Status: StatusRolledBack, ID: id}); err != nil {
		return err
	}
	if len(skus) > 0 {
		if _, err := s.jobs.InsertTx(ctx, tx, reconcile.ReconcileArgs{SKUs: skus, Trigger: reconcile.TriggerCampaignEnd}, nil); err != nil {
			return fmt.Errorf("enqueue reconcile: %w", err)
		}
	}
	return nil
}

// ResumeTx gives campaign id's next step a job when it has none, inside the
// caller's transaction: a scheduled campaign gets a campaign_start job (due
// at its start), an active one a campaign_end job (due at its end), and an
// ended one has its rollback resumed (rollbacks.Service.ResumeTx) or, when
// that succeeded but the campaign was never finished, is finished now (its
// remainder back to main). A rolled-back campaign whose pools still hold
// stock on hand (reconciliation's CampaignsHolding finds those) gives it
// back to main. A campaign whose step has a live job is left alone. It
// returns what it did in words (empty when nothing) and the job that
// carries the campaign on, if any. by says who resumes it.
func (s *Service) ResumeTx(ctx context.Context, tx pgx.Tx, id, by string) (string, *int64, error) {
	q := db.New(tx)
	c, err := q.CampaignLock(ctx, id)
	if err := notFound(err, id); err != nil {
		return "", nil, fmt.Errorf("lock campaign %s: %w", id, err)
	}
	switch c.Status {
	case StatusScheduled:
		return s.scheduleStepTx(ctx, tx, id, CampaignStartArgs{Campaign: id}, c.StartsAt)
	case StatusActive:
		return s.scheduleStepTx(ctx, tx, id, CampaignEndArgs{Campaign: id}, c.EndsAt)
	case StatusEnded:
		rb, err := q.RollbackLatestForCampaign(ctx, id)
		if err != nil {
			return "", nil, fmt.Errorf("campaign %s ended without a rollback: %w", id, err)
		}
		return s.carryOnEndTx(ctx, tx, id, rb, by)
	case StatusRolledBack:
		// Finished, its pools should hold nothing on hand: what a write
		// around the service left there goes back to main.
		_, gave, err := giveBackTx(ctx, tx, id, by, "campaign "+id+" is finished: what its pool still held back to main")
		if err != nil || len(gave) == 0 {
			return "", nil, err
		}
		return "gave back to main what its pools still held on hand (" + strings.Join(gave, "; ") + ")", nil, nil
	}
	return "", nil, nil
}

// scheduleStepTx enqueues args (a campaign_start or campaign_end job), due
// at at, unless the campaign already has a live job of that kind.
func (s *Service) scheduleStepTx(ctx context.Context, tx pgx.Tx, id string, args river.JobArgs, at time.Time) (string, *int64, error) {
	live, err := db.New(tx).CampaignLiveJob(ctx, args.Kind(), id)
	if err == nil {
		return "", &live, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", nil, fmt.Errorf("find the live %s job of campaign %s: %w", args.Kind(), id, err)
	}
	var opts *river.InsertOpts
	if at.After(time.Now()) {
		opts = &river.InsertOpts{ScheduledAt: at}
	}
	res, err := s.jobs.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return "", nil, fmt.Errorf("enqueue %s: %w", args.Kind(), err)
	}
	if res.UniqueSkippedAsDuplicate {
		return "", nil, fmt.Errorf("campaign %s: %s job %d (%s) stands in the way of a new one; delete it, then resume again",
			id, args.Kind(), res.Job.ID, res.Job.State)
	}
	return fmt.Sprintf("%s job %d enqueued, due %s", args.Kind(), res.Job.ID, res.Job.ScheduledAt.UTC().Format(time.RFC3339)), &res.Job.ID, nil
}

// carryOnEndTx carries an ended campaign on: its rollback rb is resumed
// when stranded, or, once it succeeded, the campaign is finished.
func (s *Service) carryOnEndTx(ctx context.Context, tx pgx.Tx, id string, rb db.RollbackRequest, by string) (string, *int64, error) {
	if rb.Status != rollbacks.StatusSucceeded {
		r, err := s.rollbacks.ResumeTx(ctx, tx, rb.ID, by)
		if err != nil || !r.Resumed {
			return "", r.JobID, err
		}
		return fmt.Sprintf("rollback %d resumed (%s)", rb.ID, r.Status), r.JobID, nil
	}
	if err := s.FinishTx(ctx, tx, id, by); err != nil {
		return "", nil, err
	}
	return "finished: its remainder moved back to main", nil, nil
}

// giveBackTx moves what the pools of campaign id hold on hand back to main
// (inventory.GiveBackTx), every row it changes locked first in the one
// lock order (inventory.LockGiveBackTx), and returns the campaign's SKUs
// and, per pool that gave anything, what it gave.
func giveBackTx(ctx context.Context, tx pgx.Tx, id, actor, reason string) ([]string, []string, error) {
	if err := inventory.LockGiveBackTx(ctx, tx, id); err != nil {
		return nil, nil, err
	}
	pools, err := db.New(tx).CampaignPools(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var skus, gave []string
	for _, p := range pools {
		if len(skus) == 0 || skus[len(skus)-1] != p.Sku {
			skus = append(skus, p.Sku)
		}
		moved, err := inventory.GiveBackTx(ctx, tx, inventory.GiveBack{SKU: p.Sku, Location: p.Location, Pool: id, Actor: actor, Reason: reason, Ref: id})
		if err != nil {
			return nil, nil, err
		}
		if !moved.Zero() {
			gave = append(gave, fmt.Sprintf("%s%s: %s", p.Sku, inventory.At(p.Location), moved))
		}
	}
	return skus, gave, nil
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
