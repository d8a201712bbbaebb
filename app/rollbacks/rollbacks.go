// Package rollbacks hands held stock back in bulk, for operators (manual
// rollback by hold ids, by campaign, or by a SKU's pool held before a time)
// and for the end of a campaign. Every request is a rollback_requests row
// saying who asked, why, what, when, and how far it got; the work is done by
// a chain of rollback_batch jobs of at most BatchSize holds each, with a
// pause between them so regular traffic still gets the row locks. Each batch
// is one transaction that also enqueues the next, due after the pause, so a
// crash anywhere resumes where the rows say it stopped, and the release
// being conditional, nothing is released twice.
//
// A rollback never touches a hold created at or after the instant it was
// requested (requested_at), whatever its scope: its chain ends once nothing
// held before that instant is left, however many holds arrive meanwhile.
package rollbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/enqueue"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// BatchSize is the most holds one rollback_batch releases.
const BatchSize = 100

// MaxIDs bounds a rollback by hold ids.
const MaxIDs = 10_000

// Sources of rollback requests.
const (
	SourceHTTP        = "http"
	SourceCLI         = "cli"
	SourceSQL         = "sql"
	SourceCampaignEnd = "campaign_end"
)

// Statuses of rollback requests.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Service creates and runs rollbacks.
type Service struct {
	pool  *pgxpool.Pool
	jobs  enqueue.Inserter
	inv   *inventory.Service
	pause time.Duration
}

// New returns a Service that releases holds through inv, in batches pause
// apart.
func New(pool *pgxpool.Pool, jobs enqueue.Inserter, inv *inventory.Service, pause time.Duration) *Service {
	return &Service{pool: pool, jobs: jobs, inv: inv, pause: pause}
}

// Scope says which holds a rollback releases: exactly one of hold ids, a
// campaign, a SKU's pool (at one location, or all) held before a time, or
// every hold with a line at one location held before a time. Whatever the scope, only
// holds created before the request are released, and before Cutoff when it
// is set: the real run of a dry run carries the dry run's cut-off, so it
// releases what the dry run counted and no hold made since.
type Scope struct {
	ReservationIDs []uuid.UUID `json:"reservation_ids,omitempty"`
	Campaign       string      `json:"campaign,omitempty"`
	SKU            string      `json:"sku,omitempty"`
	Pool           string      `json:"pool,omitempty"`
	// Location narrows a SKU's scope to its lines at that location, or,
	// without a SKU, is the scope: every hold with a line there.
	Location   string     `json:"location,omitempty"`
	HeldBefore *time.Time `json:"held_before,omitempty"`
	// Cutoff, for any scope, moves the cut-off earlier than the request:
	// no hold created at or after it is touched.
	Cutoff *time.Time `json:"cutoff,omitempty"`
}

// Validate checks that exactly one scope is set, and well formed. A list of
// ids that is given counts as a scope even when empty (and is refused), so
// that `"reservation_ids": []` next to a SKU is ambiguous rather than
// silently ignored.
func (s Scope) Validate() error {
	n := 0
	if s.ReservationIDs != nil {
		n++
		if len(s.ReservationIDs) == 0 {
			return domain.Invalid("reservation_ids is empty: give at least one hold id")
		}
		if len(s.ReservationIDs) > MaxIDs {
			return domain.Invalid("reservation_ids has %d ids, at most %d are allowed", len(s.ReservationIDs), MaxIDs)
		}
	}
	if s.Campaign != "" {
		n++
		if err := domain.ValidName("campaign", s.Campaign); err != nil {
			return err
		}
	}
	if s.SKU != "" {
		n++
		if err := domain.ValidName("sku", s.SKU); err != nil {
			return err
		}
	}
	if s.Location != "" {
		if err := domain.ValidName("location", s.Location); err != nil {
			return err
		}
		if s.SKU == "" {
			n++
		}
	}
	if s.SKU == "" && s.Pool != "" {
		return domain.Invalid("pool goes with sku")
	}
	if s.SKU == "" && s.Location == "" && s.HeldBefore != nil {
		return domain.Invalid("held_before goes with sku or location")
	}
	if s.Pool != "" {
		if err := domain.ValidName("pool", s.Pool); err != nil {
			return err
		}
	}
	if n != 1 {
		return domain.Invalid("give exactly one scope: reservation_ids, campaign, sku (with optional pool, location and held_before), or location (with optional held_before)")
	}
	return nil
}

// validAt checks that held_before and cutoff are not later than the
// instant the rollback is requested: a rollback never reaches holds made
// after it.
func (s Scope) validAt(requested time.Time) error {
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"held_before", s.HeldBefore}, {"cutoff", s.Cutoff}} {
		if t.at != nil && t.at.After(requested) {
			return domain.Invalid("%s %s is later than now (%s): a rollback never touches holds made after it was requested",
				t.name, t.at.UTC().Format(time.RFC3339Nano), requested.UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}

// lines is the lines of a hold the scope hands back: a SKU's pool's (at
// its location, when given) or a location's, for those scopes; every line
// (whole holds) for hold ids and a campaign.
func (s Scope) lines() inventory.LineScope {
	if s.SKU == "" && s.Location == "" {
		return inventory.LineScope{}
	}
	return inventory.LineScope{SKU: s.SKU, Pool: s.Pool, Location: s.Location}
}

// requireLocation refuses a scope naming a location that does not exist
// (422 unknown_location): it could match nothing, and is most likely a
// typo.
func requireLocation(ctx context.Context, tx pgx.Tx, s Scope) error {
	if s.Location == "" {
		return nil
	}
	return stock.RequireLocations(ctx, tx, s.Location)
}

// normalized fills the pool of a SKU scope (main by default).
func (s Scope) normalized() Scope {
	if s.SKU != "" && s.Pool == "" {
		s.Pool = stock.MainPool
	}
	return s
}

// Request asks to roll holds back.
type Request struct {
	Operator string
	Reason   string
	Scope    Scope
	DryRun   bool
	Source   string
	// RequestedAt is when it was requested, its cut-off; nil: the
	// transaction's start.
	RequestedAt *time.Time
}

// Validate checks who, why and what.
func (r Request) Validate() error {
	if r.Operator == "" {
		return domain.Invalid("operator is required: who asks for this rollback")
	}
	if err := domain.ValidName("operator", r.Operator); err != nil {
		return err
	}
	if r.Reason == "" {
		return domain.Invalid("reason is required: why these holds are rolled back")
	}
	if err := domain.ValidText("reason", r.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	return r.Scope.Validate()
}

// Rollback is a rollback request as operators see it.
type Rollback struct {
	ID       int64  `json:"id"`
	Status   string `json:"status"`
	Operator string `json:"operator"`
	// OperatorKey is the API key that asked, beside the operator it
	// claimed (see domain.WithKeyName); null for a plain SQL job or a
	// campaign's end on time.
	OperatorKey *string `json:"operator_key"`
	Reason      string  `json:"reason"`
	Scope       Scope   `json:"scope"`
	DryRun      bool    `json:"dry_run"`
	Source      string  `json:"source"`
	// RequestedAt is the cut-off: no hold created at or after it is touched.
	RequestedAt   time.Time `json:"requested_at"`
	ReleasedCount int32     `json:"released_count"`
	ReleasedUnits int64     `json:"released_units"`
	MatchedCount  *int32    `json:"matched_count,omitempty"`
	MatchedUnits  *int64    `json:"matched_units,omitempty"`
	Batches       int32     `json:"batches"`
	JobID         *int64    `json:"job_id"`
	Error         *string   `json:"error"`
	// Resumes counts the times its stranded chain of jobs was resumed.
	Resumes    int32      `json:"resumes"`
	ResumedAt  *time.Time `json:"resumed_at"`
	ResumedBy  *string    `json:"resumed_by"`
	ResumedKey *string    `json:"resumed_key"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// ReconciliationRunID is the reconciliation of the SKUs a manual
	// rollback covered, asked for when its last batch finished (GET
	// /v1/reconciliations/{id}); null before, and for dry runs and
	// campaign ends (whose own reconciliation follows the campaign).
	ReconciliationRunID *int64 `json:"reconciliation_run_id"`
}

// View turns a rollback_requests row into its Rollback.
func View(r db.RollbackRequest) (Rollback, error) { return newRollback(r) }

func newRollback(r db.RollbackRequest) (Rollback, error) {
	var scope Scope
	if err := json.Unmarshal(r.Scope, &scope); err != nil {
		return Rollback{}, fmt.Errorf("rollback %d scope: %w", r.ID, err)
	}
	return Rollback{
		ID: r.ID, Status: r.Status, Operator: r.Operator, OperatorKey: r.OperatorKey, Reason: r.Reason, Scope: scope, DryRun: r.DryRun,
		Source: r.Source, RequestedAt: r.RequestedAt, ReleasedCount: r.ReleasedCount, ReleasedUnits: r.ReleasedUnits,
		MatchedCount: r.MatchedCount, MatchedUnits: r.MatchedUnits, Batches: r.Batches, JobID: r.JobID,
		Error: r.Error, Resumes: r.Resumes, ResumedAt: r.ResumedAt, ResumedBy: r.ResumedBy, ResumedKey: r.ResumedKey,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, ReconciliationRunID: r.ReconcileRunID,
	}, nil
}

// Done reports whether the request has finished, either way.
func (r Rollback) Done() bool { return r.Status == StatusSucceeded || r.Status == StatusFailed }

// Cutoff is the instant before which a hold must have been created to be in
// the rollback's reach: when it was requested, or its held_before or its
// cutoff, whichever is earliest.
func (r Rollback) Cutoff() time.Time {
	cut := r.RequestedAt
	for _, t := range []*time.Time{r.Scope.HeldBefore, r.Scope.Cutoff} {
		if t != nil && t.Before(cut) {
			cut = *t
		}
	}
	return cut
}

// Created is what creating a rollback answers.
type Created struct {
	RollbackID int64 `json:"rollback_id"`
	JobID      int64 `json:"job_id"`
}

// Create is CreateTx in a transaction of its own.
func (s *Service) Create(ctx context.Context, req Request) (out Created, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out, err = s.CreateTx(ctx, tx, req)
		return err
	})
	return out, err
}

// CreateOnce is CreateTx in a transaction of its own, at most once per key
// (see idempotency.Do).
func (s *Service) CreateOnce(ctx context.Context, key idempotency.Key, req Request) (out Created, replayed bool, err error) {
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Created, error) { return s.CreateTx(ctx, tx, req) })
}

// CreateTx records a manual rollback request and enqueues its
// manual_rollback job inside the caller's transaction.
func (s *Service) CreateTx(ctx context.Context, tx pgx.Tx, req Request) (Created, error) {
	return s.record(ctx, tx, req, func(id int64) (int64, error) {
		res, err := s.jobs.InsertTx(ctx, tx, ManualRollbackArgs{
			RollbackID: id, Operator: req.Operator, Reason: req.Reason, DryRun: req.DryRun, Scope: req.Scope,
		}, nil)
		if err != nil {
			return 0, fmt.Errorf("enqueue manual_rollback: %w", err)
		}
		return res.Job.ID, nil
	})
}

// StartTx records a rollback that starts at once (a campaign's end) and
// enqueues its first batch inside the caller's transaction.
func (s *Service) StartTx(ctx context.Context, tx pgx.Tx, req Request) (Created, error) {
	return s.record(ctx, tx, req, func(id int64) (int64, error) {
		job, err := s.enqueueBatch(ctx, tx, id, 0)
		return job.ID, err
	})
}

// record validates req, records it (requested now: the transaction's start),
// and enqueues the job that starts it, whose id the request keeps.
func (s *Service) record(ctx context.Context, tx pgx.Tx, req Request, enqueue func(id int64) (int64, error)) (Created, error) {
	if err := req.Validate(); err != nil {
		return Created{}, err
	}
	if err := req.Scope.validAt(time.Now()); err != nil {
		return Created{}, err
	}
	if err := requireLocation(ctx, tx, req.Scope); err != nil {
		return Created{}, err
	}
	req.Scope = req.Scope.normalized()
	q := db.New(tx)
	row, err := insert(ctx, q, req, nil, req.RequestedAt)
	if err != nil {
		return Created{}, err
	}
	jobID, err := enqueue(row.ID)
	if err != nil {
		return Created{}, err
	}
	if err := q.RollbackSetJob(ctx, &jobID, row.ID); err != nil {
		return Created{}, err
	}
	return Created{RollbackID: row.ID, JobID: jobID}, nil
}

// insert records req; requestedAt nil means now.
func insert(ctx context.Context, q *db.Queries, req Request, jobID *int64, requestedAt *time.Time) (db.RollbackRequest, error) {
	scope, err := json.Marshal(req.Scope)
	if err != nil {
		return db.RollbackRequest{}, err
	}
	row, err := q.RollbackCreate(ctx, db.RollbackCreateParams{
		Operator: req.Operator, OperatorKey: domain.KeyName(ctx), Reason: req.Reason, Scope: scope, DryRun: req.DryRun, Source: req.Source,
		JobID: jobID, RequestedAt: requestedAt,
	})
	if err != nil {
		return db.RollbackRequest{}, fmt.Errorf("record rollback request: %w", err)
	}
	return row, nil
}

// Get returns rollback request id.
func (s *Service) Get(ctx context.Context, id int64) (Rollback, error) {
	row, err := db.New(s.pool).RollbackGet(ctx, id)
	if err != nil {
		return Rollback{}, dberr.NotFound(err, "rollback")
	}
	return newRollback(row)
}

// ErrRefused marks a manual_rollback job that can never succeed (no
// operator, no reason, no valid scope, a held_before after the job was
// enqueued): the worker cancels it with an alert instead of retrying.
var ErrRefused = errors.New("manual rollback refused")

// Accept is AcceptTx in a transaction of its own: what the
// manual_rollback job does.
func (s *Service) Accept(ctx context.Context, jobID int64, enqueuedAt time.Time, args ManualRollbackArgs) (out Rollback, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out, err = s.AcceptTx(ctx, tx, jobID, enqueuedAt, args)
		return err
	})
	return out, err
}

// AcceptTx is the manual_rollback job's step, inside the job's
// transaction: it finds (or, for a job inserted with plain SQL, records) the
// request, then runs a dry run to completion or enqueues the first batch.
// jobID and enqueuedAt are the job's id and creation time; for a plain SQL
// job, enqueuedAt is the instant the rollback was requested (its cut-off).
// A job that cannot be accepted returns an error wrapping ErrRefused.
//
// A request accepted before (the job retried, from the dashboard say) is
// carried on: if its chain of batches was stranded, a new batch is enqueued.
func (s *Service) AcceptTx(ctx context.Context, tx pgx.Tx, jobID int64, enqueuedAt time.Time, args ManualRollbackArgs) (Rollback, error) {
	q := db.New(tx)
	var (
		row db.RollbackRequest
		err error
	)
	switch {
	case args.RollbackID != 0:
		row, err = q.RollbackLock(ctx, args.RollbackID)
		if errors.Is(err, pgx.ErrNoRows) {
			return Rollback{}, fmt.Errorf("%w: rollback request %d does not exist", ErrRefused, args.RollbackID)
		}
	default:
		row, err = q.RollbackGetByJob(ctx, &jobID)
		if errors.Is(err, pgx.ErrNoRows) {
			req := args.request()
			if verr := req.Validate(); verr != nil {
				return Rollback{}, fmt.Errorf("%w: %v", ErrRefused, verr)
			}
			if verr := req.Scope.validAt(enqueuedAt); verr != nil {
				return Rollback{}, fmt.Errorf("%w: %v", ErrRefused, verr)
			}
			if verr := requireLocation(ctx, tx, req.Scope); verr != nil {
				var de *domain.Error
				if !errors.As(verr, &de) {
					return Rollback{}, verr
				}
				return Rollback{}, fmt.Errorf("%w: %v", ErrRefused, verr)
			}
			req.Scope = req.Scope.normalized()
			row, err = insert(ctx, q, req, &jobID, &enqueuedAt)
		}
	}
	if err != nil {
		return Rollback{}, err
	}
	accepted := row.Status != StatusPending
	row, _, resumed, err := s.carryOnTx(ctx, tx, row, jobID)
	if err != nil {
		return Rollback{}, err
	}
	if accepted && resumed {
		if row, err = q.RollbackResumed(ctx, "system:manual_rollback", nil, row.ID); err != nil {
			return Rollback{}, err
		}
	}
	return newRollback(row)
}

// dryRunTx counts what the rollback would release and finishes it without
// touching stock.
func dryRunTx(ctx context.Context, q *db.Queries, row db.RollbackRequest) (db.RollbackRequest, error) {
	r, err := newRollback(row)
	if err != nil {
		return db.RollbackRequest{}, err
	}
	n, err := count(ctx, q, r)
	if err != nil {
		return db.RollbackRequest{}, err
	}
	return q.RollbackFinish(ctx, db.RollbackFinishParams{
		Status: StatusSucceeded, ID: row.ID, MatchedCount: &n.Holds, MatchedUnits: &n.Units,
	})
}

// count says how many holds in r's scope, created before its cut-off, are
// still held.
func count(ctx context.Context, q *db.Queries, r Rollback) (db.RollbackScopeCountRow, error) {
	s := r.Scope
	p := db.RollbackScopeCountParams{Cutoff: r.Cutoff(), Ids: s.ReservationIDs}
	if s.Campaign != "" {
		p.Campaign = &s.Campaign
	}
	if s.SKU != "" {
		p.Sku, p.Pool = &s.SKU, &s.Pool
	}
	if s.Location != "" {
		p.Location = &s.Location
	}
	return q.RollbackScopeCount(ctx, p)
}

// FailTx marks a rollback request failed with why (its job was given up).
func FailTx(ctx context.Context, tx pgx.Tx, id int64, why string) error {
	_, err := db.New(tx).RollbackFinish(ctx, db.RollbackFinishParams{Status: StatusFailed, Error: &why, ID: id})
	return err
}

// Fail is FailTx in a transaction of its own.
func (s *Service) Fail(ctx context.Context, id int64, why string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return FailTx(ctx, tx, id, why) })
}

// ReopenTx sets failed rollback request id back to running, inside the
// caller's transaction, and reports whether it was failed. Reconciliation
// calls it when it retries the request's discarded batch job.
func ReopenTx(ctx context.Context, tx pgx.Tx, id int64) (bool, error) {
	n, err := db.New(tx).RollbackReopen(ctx, id)
	if err != nil {
		return false, fmt.Errorf("reopen rollback %d: %w", id, err)
	}
	return n == 1, nil
}
