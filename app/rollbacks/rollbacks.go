// Package rollbacks hands held stock back in bulk, for operators (manual
// rollback by hold ids, by campaign, or by a SKU's pool held before a time)
// and for the end of a campaign. Every request is a rollback_requests row
// saying who asked, why, what, and how far it got; the work is done by a
// chain of rollback_batch jobs of at most BatchSize holds each, with a pause
// between them so regular traffic still gets the row locks. Each batch is one
// transaction that also enqueues the next, so a crash anywhere resumes where
// the rows say it stopped, and the release being conditional, nothing is
// released twice.
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
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/inventory"
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
	jobs  inventory.JobInserter
	pause time.Duration
}

// New returns a Service whose batches are pause apart.
func New(pool *pgxpool.Pool, jobs inventory.JobInserter, pause time.Duration) *Service {
	return &Service{pool: pool, jobs: jobs, pause: pause}
}

// Scope says which holds a rollback releases: exactly one of hold ids, a
// campaign, or a SKU's pool held before a time.
type Scope struct {
	ReservationIDs []uuid.UUID `json:"reservation_ids,omitempty"`
	Campaign       string      `json:"campaign,omitempty"`
	SKU            string      `json:"sku,omitempty"`
	Pool           string      `json:"pool,omitempty"`
	HeldBefore     *time.Time  `json:"held_before,omitempty"`
}

// Validate checks that exactly one scope is set, and well formed.
func (s Scope) Validate() error {
	n := 0
	if len(s.ReservationIDs) > 0 {
		n++
		if len(s.ReservationIDs) > MaxIDs {
			return inventory.Invalid("reservation_ids has %d ids, at most %d are allowed", len(s.ReservationIDs), MaxIDs)
		}
	}
	if s.Campaign != "" {
		n++
		if err := inventory.ValidName("campaign", s.Campaign); err != nil {
			return err
		}
	}
	if s.SKU != "" {
		n++
		if err := inventory.ValidName("sku", s.SKU); err != nil {
			return err
		}
	}
	if s.SKU == "" && (s.Pool != "" || s.HeldBefore != nil) {
		return inventory.Invalid("pool and held_before go with sku")
	}
	if s.Pool != "" {
		if err := inventory.ValidName("pool", s.Pool); err != nil {
			return err
		}
	}
	if n != 1 {
		return inventory.Invalid("give exactly one scope: reservation_ids, campaign, or sku (with optional pool and held_before)")
	}
	return nil
}

// normalized fills the defaults of a SKU scope (pool main, held before now)
// so that running the request later, or again, releases the same holds.
func (s Scope) normalized(now time.Time) Scope {
	if s.SKU != "" {
		if s.Pool == "" {
			s.Pool = inventory.MainPool
		}
		if s.HeldBefore == nil {
			t := now.UTC()
			s.HeldBefore = &t
		}
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
}

// Validate checks who, why and what.
func (r Request) Validate() error {
	if r.Operator == "" {
		return inventory.Invalid("operator is required: who asks for this rollback")
	}
	if err := inventory.ValidName("operator", r.Operator); err != nil {
		return err
	}
	if r.Reason == "" {
		return inventory.Invalid("reason is required: why these holds are rolled back")
	}
	if err := inventory.ValidText("reason", r.Reason, inventory.MaxTextLength); err != nil {
		return err
	}
	return r.Scope.Validate()
}

// Rollback is a rollback request as operators see it.
type Rollback struct {
	ID            int64      `json:"id"`
	Status        string     `json:"status"`
	Operator      string     `json:"operator"`
	Reason        string     `json:"reason"`
	Scope         Scope      `json:"scope"`
	DryRun        bool       `json:"dry_run"`
	Source        string     `json:"source"`
	ReleasedCount int32      `json:"released_count"`
	ReleasedUnits int64      `json:"released_units"`
	MatchedCount  *int32     `json:"matched_count,omitempty"`
	MatchedUnits  *int64     `json:"matched_units,omitempty"`
	Batches       int32      `json:"batches"`
	JobID         *int64     `json:"job_id"`
	Error         *string    `json:"error"`
	CreatedAt     time.Time  `json:"created_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
}

// View turns a rollback_requests row into its Rollback.
func View(r db.RollbackRequest) (Rollback, error) { return newRollback(r) }

func newRollback(r db.RollbackRequest) (Rollback, error) {
	var scope Scope
	if err := json.Unmarshal(r.Scope, &scope); err != nil {
		return Rollback{}, fmt.Errorf("rollback %d scope: %w", r.ID, err)
	}
	return Rollback{
		ID: r.ID, Status: r.Status, Operator: r.Operator, Reason: r.Reason, Scope: scope, DryRun: r.DryRun,
		Source: r.Source, ReleasedCount: r.ReleasedCount, ReleasedUnits: r.ReleasedUnits,
		MatchedCount: r.MatchedCount, MatchedUnits: r.MatchedUnits, Batches: r.Batches, JobID: r.JobID,
		Error: r.Error, CreatedAt: r.CreatedAt.UTC(), StartedAt: inventory.UTC(r.StartedAt), FinishedAt: inventory.UTC(r.FinishedAt),
	}, nil
}

// Done reports whether the request has finished, either way.
func (r Rollback) Done() bool { return r.Status == StatusSucceeded || r.Status == StatusFailed }

// ManualRollbackArgs is the job an operator enqueues: through the API or
// the CLI (which also create the request row and set RollbackID), or with a
// plain SQL insert into river_job carrying the same fields as the body of
// POST /v1/rollbacks (the worker creates the row).
type ManualRollbackArgs struct {
	RollbackID     int64       `json:"rollback_id,omitempty"`
	Operator       string      `json:"operator"`
	Reason         string      `json:"reason"`
	DryRun         bool        `json:"dry_run"`
	ReservationIDs []uuid.UUID `json:"reservation_ids,omitempty"`
	Campaign       string      `json:"campaign,omitempty"`
	SKU            string      `json:"sku,omitempty"`
	Pool           string      `json:"pool,omitempty"`
	HeldBefore     *time.Time  `json:"held_before,omitempty"`
}

// Kind names the job in river_job.
func (ManualRollbackArgs) Kind() string { return "manual_rollback" }

// InsertOpts gives the job three attempts.
func (ManualRollbackArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }

// RollbackBatchArgs is one link of a rollback's chain of batches.
type RollbackBatchArgs struct {
	RollbackID int64 `json:"rollback_id"`
	// NotBefore is when the batch may start: the pause after the previous
	// batch, which gives regular traffic the row locks in between.
	NotBefore time.Time `json:"not_before"`
}

// Kind names the job in river_job.
func (RollbackBatchArgs) Kind() string { return "rollback_batch" }

// InsertOpts gives the job three attempts.
func (RollbackBatchArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }

// Created is what creating a rollback answers.
type Created struct {
	RollbackID int64 `json:"rollback_id"`
	JobID      int64 `json:"job_id"`
}

// CreateTx records a manual rollback request and enqueues its
// manual_rollback job inside the caller's transaction.
func (s *Service) CreateTx(ctx context.Context, tx pgx.Tx, req Request) (Created, error) {
	return s.record(ctx, tx, req, func(id int64) (int64, error) {
		res, err := s.jobs.InsertTx(ctx, tx, ManualRollbackArgs{
			RollbackID: id, Operator: req.Operator, Reason: req.Reason, DryRun: req.DryRun,
			ReservationIDs: req.Scope.ReservationIDs, Campaign: req.Scope.Campaign,
			SKU: req.Scope.SKU, Pool: req.Scope.Pool, HeldBefore: req.Scope.HeldBefore,
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
		return s.enqueueBatch(ctx, tx, id, time.Time{})
	})
}

// record validates req, records it, and enqueues the job that starts it,
// whose id the request keeps.
func (s *Service) record(ctx context.Context, tx pgx.Tx, req Request, enqueue func(id int64) (int64, error)) (Created, error) {
	if err := req.Validate(); err != nil {
		return Created{}, err
	}
	req.Scope = req.Scope.normalized(time.Now())
	q := db.New(tx)
	row, err := insert(ctx, q, req, nil)
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

func insert(ctx context.Context, q *db.Queries, req Request, jobID *int64) (db.RollbackRequest, error) {
	scope, err := json.Marshal(req.Scope)
	if err != nil {
		return db.RollbackRequest{}, err
	}
	row, err := q.RollbackCreate(ctx, db.RollbackCreateParams{
		Operator: req.Operator, Reason: req.Reason, Scope: scope, DryRun: req.DryRun, Source: req.Source, JobID: jobID,
	})
	if err != nil {
		return db.RollbackRequest{}, fmt.Errorf("record rollback request: %w", err)
	}
	return row, nil
}

func (s *Service) enqueueBatch(ctx context.Context, tx pgx.Tx, id int64, notBefore time.Time) (int64, error) {
	res, err := s.jobs.InsertTx(ctx, tx, RollbackBatchArgs{RollbackID: id, NotBefore: notBefore}, nil)
	if err != nil {
		return 0, fmt.Errorf("enqueue rollback_batch: %w", err)
	}
	return res.Job.ID, nil
}

// Get returns rollback request id.
func (s *Service) Get(ctx context.Context, id int64) (Rollback, error) {
	row, err := db.New(s.pool).RollbackGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Rollback{}, inventory.ErrNotFound("rollback")
	}
	if err != nil {
		return Rollback{}, err
	}
	return newRollback(row)
}

// ErrRefused marks a manual_rollback job that can never succeed (no
// operator, no reason, no valid scope): the worker cancels it with an alert
// instead of retrying.
var ErrRefused = errors.New("manual rollback refused")

// AcceptTx is the manual_rollback job's first step, inside the job's
// transaction: it finds (or, for a job inserted with plain SQL, records) the
// request, then runs a dry run to completion or enqueues the first batch.
// A job that cannot be accepted returns an error wrapping ErrRefused.
func (s *Service) AcceptTx(ctx context.Context, tx pgx.Tx, jobID int64, args ManualRollbackArgs) (Rollback, error) {
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
			req := Request{
				Operator: args.Operator, Reason: args.Reason, DryRun: args.DryRun, Source: SourceSQL,
				Scope: Scope{ReservationIDs: args.ReservationIDs, Campaign: args.Campaign, SKU: args.SKU, Pool: args.Pool, HeldBefore: args.HeldBefore},
			}
			if verr := req.Validate(); verr != nil {
				return Rollback{}, fmt.Errorf("%w: %v", ErrRefused, verr)
			}
			req.Scope = req.Scope.normalized(time.Now())
			row, err = insert(ctx, q, req, &jobID)
		}
	}
	if err != nil {
		return Rollback{}, err
	}
	if row.Status != StatusPending {
		return newRollback(row) // accepted before: a retried job
	}
	if row.DryRun {
		return s.dryRunTx(ctx, q, row)
	}
	if _, err := s.enqueueBatch(ctx, tx, row.ID, time.Time{}); err != nil {
		return Rollback{}, err
	}
	row, err = q.RollbackMarkRunning(ctx, row.ID)
	if err != nil {
		return Rollback{}, err
	}
	return newRollback(row)
}

// dryRunTx counts what the rollback would release and finishes it without
// touching stock.
func (s *Service) dryRunTx(ctx context.Context, q *db.Queries, row db.RollbackRequest) (Rollback, error) {
	r, err := newRollback(row)
	if err != nil {
		return Rollback{}, err
	}
	n, err := count(ctx, q, r.Scope)
	if err != nil {
		return Rollback{}, err
	}
	row, err = q.RollbackFinish(ctx, db.RollbackFinishParams{
		Status: StatusSucceeded, ID: row.ID, MatchedCount: &n.Holds, MatchedUnits: &n.Units,
	})
	if err != nil {
		return Rollback{}, err
	}
	return newRollback(row)
}

func count(ctx context.Context, q *db.Queries, s Scope) (db.RollbackScopeCountRow, error) {
	p := db.RollbackScopeCountParams{Ids: s.ReservationIDs}
	if s.Campaign != "" {
		p.Campaign = &s.Campaign
	}
	if s.SKU != "" {
		p.Sku, p.Pool, p.HeldBefore = &s.SKU, &s.Pool, s.HeldBefore
	}
	return q.RollbackScopeCount(ctx, p)
}

// Batch is what one rollback_batch did.
type Batch struct {
	Rollback Rollback
	Released int
	// Finished means this batch found nothing in scope held any more and
	// marked the request succeeded. A batch of a request that had already
	// finished does nothing and reports false.
	Finished bool
}

// BatchTx releases the next BatchSize holds of rollback id inside the
// caller's transaction, records the progress, and either enqueues the next
// batch (pause from now) or, when nothing in scope is held any more, marks
// the request succeeded. A finished request is left alone, so a retried or
// duplicated batch job changes nothing.
func (s *Service) BatchTx(ctx context.Context, tx pgx.Tx, id int64) (Batch, error) {
	q := db.New(tx)
	row, err := q.RollbackLock(ctx, id)
	if err != nil {
		return Batch{}, fmt.Errorf("lock rollback %d: %w", id, err)
	}
	r, err := newRollback(row)
	if err != nil || r.Done() {
		return Batch{Rollback: r}, err
	}
	ids, err := nextBatch(ctx, q, r.Scope)
	if err != nil {
		return Batch{}, err
	}
	how := inventory.Release{Status: inventory.StatusReleased, Kind: "rollback", Actor: r.Operator, Reason: r.Reason}
	released, err := inventory.ReleaseTx(ctx, tx, ids, how)
	if err != nil {
		return Batch{}, err
	}
	var units int64
	if len(released) > 0 {
		sums, err := q.ReservationLinesSummed(ctx, released)
		if err != nil {
			return Batch{}, err
		}
		for _, s := range sums {
			units += s.Quantity
		}
	}
	row, err = q.RollbackProgress(ctx, int32(len(released)), units, id)
	if err != nil {
		return Batch{}, err
	}
	left, err := count(ctx, q, r.Scope)
	if err != nil {
		return Batch{}, err
	}
	done := left.Holds == 0
	if done {
		row, err = q.RollbackFinish(ctx, db.RollbackFinishParams{Status: StatusSucceeded, ID: id})
	} else {
		// Some left: a full batch, or holds a confirm or release had
		// locked. Either way, the next batch (after the pause) sees them.
		_, err = s.enqueueBatch(ctx, tx, id, time.Now().Add(s.pause))
	}
	if err != nil {
		return Batch{}, err
	}
	r, err = newRollback(row)
	return Batch{Rollback: r, Released: len(released), Finished: done}, err
}

func nextBatch(ctx context.Context, q *db.Queries, s Scope) ([]uuid.UUID, error) {
	switch {
	case len(s.ReservationIDs) > 0:
		return q.ReservationsHeldByIDs(ctx, s.ReservationIDs, BatchSize)
	case s.Campaign != "":
		return q.ReservationsHeldByCampaign(ctx, &s.Campaign, BatchSize)
	case s.SKU != "":
		return q.ReservationsHeldBySKU(ctx, db.ReservationsHeldBySKUParams{
			HeldBefore: *s.HeldBefore, Sku: s.SKU, Pool: s.Pool, Lim: BatchSize,
		})
	}
	return nil, fmt.Errorf("rollback scope is empty")
}

// FailTx marks a rollback request failed with why (its job was given up).
func FailTx(ctx context.Context, tx pgx.Tx, id int64, why string) error {
	_, err := db.New(tx).RollbackFinish(ctx, db.RollbackFinishParams{Status: StatusFailed, Error: &why, ID: id})
	return err
}

// ReopenTx sets failed rollback request id back to running, inside the
// caller's transaction, and reports whether it was failed. Reconciliation
// calls it when it retries the request's discarded batch job: a batch of a
// finished request does nothing, so without it the retry would be empty.
func ReopenTx(ctx context.Context, tx pgx.Tx, id int64) (bool, error) {
	n, err := db.New(tx).RollbackReopen(ctx, id)
	if err != nil {
		return false, fmt.Errorf("reopen rollback %d: %w", id, err)
	}
	return n == 1, nil
}
