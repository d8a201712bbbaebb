package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// MaxSKUs bounds the SKUs one run is limited to.
const MaxSKUs = 10_000

// MaxFindingsListed bounds the findings of each class a run is shown with;
// the run's counts are complete, and reconcile_findings has every row.
const MaxFindingsListed = 1000

// Run is a reconciliation run as operators see it.
type Run struct {
	ID      int64  `json:"id"`
	Status  string `json:"status"`
	Trigger string `json:"trigger"`
	// SKUs the run was limited to; null means every SKU.
	SKUs []string `json:"skus"`
	// Scope is full, incremental or skus (see ScopeFull); null until the
	// run ends.
	Scope       *string `json:"scope"`
	RowsChecked int32   `json:"rows_checked"`
	// AutoFixed counts the stuck holds released, Retried the jobs
	// re-enqueued, HighRisk the high-risk findings.
	AutoFixed  int32      `json:"auto_fixed"`
	Retried    int32      `json:"retried"`
	HighRisk   int32      `json:"high_risk"`
	Error      *string    `json:"error"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Findings   Findings   `json:"findings"`
}

// Findings are a run's findings by class.
type Findings struct {
	AutoFix  []Finding `json:"auto_fix"`
	Retry    []Finding `json:"retry"`
	HighRisk []Finding `json:"high_risk"`
}

// All returns every finding, high risk first.
func (f Findings) All() []Finding {
	return slices.Concat(f.HighRisk, f.AutoFix, f.Retry)
}

// Finding is one thing a run found and what it did about it.
type Finding struct {
	ID            int64           `json:"id"`
	Class         string          `json:"class"`
	Kind          string          `json:"kind"`
	SKU           *string         `json:"sku"`
	Location      *string         `json:"location"`
	Pool          *string         `json:"pool"`
	ReservationID *uuid.UUID      `json:"reservation_id"`
	JobID         *int64          `json:"job_id"`
	Details       json.RawMessage `json:"details"`
	Action        string          `json:"action"`
	CreatedAt     time.Time       `json:"created_at"`
}

func newRun(r db.ReconcileRun, findings []db.ReconcileFinding) Run {
	out := Run{
		ID: r.ID, Status: r.Status, Trigger: r.Trigger, SKUs: r.Skus, Scope: r.Scope, RowsChecked: r.RowsChecked,
		AutoFixed: r.AutoFixed, Retried: r.Retried, HighRisk: r.HighRisk, Error: r.Error,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		Findings: Findings{AutoFix: []Finding{}, Retry: []Finding{}, HighRisk: []Finding{}},
	}
	for _, f := range findings {
		x := Finding{
			ID: f.ID, Class: f.Class, Kind: f.Kind, SKU: f.Sku, Location: f.Location, Pool: f.Pool, ReservationID: f.ReservationID,
			JobID: f.JobID, Details: f.Details, Action: f.Action, CreatedAt: f.CreatedAt,
		}
		switch f.Class {
		case ClassAutoFix:
			out.Findings.AutoFix = append(out.Findings.AutoFix, x)
		case ClassRetry:
			out.Findings.Retry = append(out.Findings.Retry, x)
		case ClassHighRisk:
			out.Findings.HighRisk = append(out.Findings.HighRisk, x)
		}
	}
	return out
}

// Get returns run id with its findings.
func (s *Service) Get(ctx context.Context, id int64) (Run, error) {
	q := db.New(s.pool)
	row, err := q.ReconcileRunGet(ctx, id)
	if err != nil {
		return Run{}, dberr.NotFound(err, "reconciliation run")
	}
	return s.withFindings(ctx, q, row)
}

// Latest returns the newest run, whatever its status, with its findings.
func (s *Service) Latest(ctx context.Context) (Run, error) {
	q := db.New(s.pool)
	row, err := q.ReconcileRunLatest(ctx)
	if err != nil {
		return Run{}, dberr.NotFound(err, "reconciliation run")
	}
	return s.withFindings(ctx, q, row)
}

func (s *Service) withFindings(ctx context.Context, q *db.Queries, row db.ReconcileRun) (Run, error) {
	findings, err := q.ReconcileFindingsList(ctx, row.ID, MaxFindingsListed)
	if err != nil {
		return Run{}, fmt.Errorf("findings of run %d: %w", row.ID, err)
	}
	return newRun(row, findings), nil
}

// Requested is what asking for a run answers.
type Requested struct {
	RunID int64 `json:"run_id"`
	JobID int64 `json:"job_id"`
}

// RequestOnce is RequestTx in a transaction of its own, at most once per
// key (see idempotency.Do).
func (s *Service) RequestOnce(ctx context.Context, key idempotency.Key, trigger string, skus []string) (out Requested, replayed bool, err error) {
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Requested, error) { return s.RequestTx(ctx, tx, trigger, skus) })
}

// RequestTx records a pending run and enqueues its reconcile job inside the
// caller's transaction: the run exists if and only if its job does. skus
// limits the run to some SKUs; empty means every SKU.
func (s *Service) RequestTx(ctx context.Context, tx pgx.Tx, trigger string, skus []string) (Requested, error) {
	if err := validTrigger(trigger); err != nil {
		return Requested{}, err
	}
	skus, err := normalizeSKUs(skus)
	if err != nil {
		return Requested{}, err
	}
	row, err := db.New(tx).ReconcileRunCreate(ctx, trigger, skus)
	if err != nil {
		return Requested{}, fmt.Errorf("record reconciliation run: %w", err)
	}
	res, err := s.jobs.InsertTx(ctx, tx, ReconcileArgs{RunID: row.ID, SKUs: skus, Trigger: trigger}, nil)
	if err != nil {
		return Requested{}, fmt.Errorf("enqueue reconcile: %w", err)
	}
	return Requested{RunID: row.ID, JobID: res.Job.ID}, nil
}

// normalizeSKUs validates skus and returns them sorted without repeats; no
// SKUs (nil) means every SKU.
func normalizeSKUs(skus []string) ([]string, error) {
	if len(skus) == 0 {
		return nil, nil
	}
	if len(skus) > MaxSKUs {
		return nil, domain.Invalid("skus has %d SKUs, at most %d are allowed", len(skus), MaxSKUs)
	}
	for _, sku := range skus {
		if err := domain.ValidName("sku", sku); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(skus)
	slices.Sort(out)
	return slices.Compact(out), nil
}
