package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// Statuses of a run.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Outcome is a run's status as a person reads it: a run that succeeded
// (it checked everything it was to check) but found books out of balance
// says so, rather than "succeeded", which reads as all is well.
func Outcome(status string, highRisk int32) string {
	if status == StatusSucceeded && highRisk > 0 {
		if highRisk == 1 {
			return "found books out of balance (1 high-risk finding)"
		}
		return fmt.Sprintf("found books out of balance (%d high-risk findings)", highRisk)
	}
	return status
}

// Classes of findings, each with its own action.
const (
	// ClassAutoFix is a stuck hold: released through the normal path.
	ClassAutoFix = "auto_fix"
	// ClassRetry is a failed job whose work is still needed: re-enqueued.
	ClassRetry = "retry"
	// ClassHighRisk is a pool whose counters disagree with its lines or its
	// ledger: paused, and nothing moved.
	ClassHighRisk = "high_risk"
)

// Kinds of findings. The kind says what was found and what became of it.
const (
	KindStuckHold           = "stuck_hold"            // auto_fix: released
	KindStuckHoldsWaiting   = "stuck_holds_waiting"   // auto_fix: left for a person
	KindJobRetried          = "job_retried"           // retry: re-enqueued
	KindJobRetriesExhausted = "job_retries_exhausted" // retry: left for a person
	KindChainResumed        = "chain_resumed"         // retry: a stranded rollback or campaign given a job
	KindCountersVsLines     = "counters_vs_lines"     // high_risk
	KindCountersVsLedger    = "counters_vs_ledger"    // high_risk
	KindCountersVsUnits     = "counters_vs_units"     // high_risk
	// KindIncomingVsTransfers: a row's incoming is not what the transfers
	// in transit to it and the open inbound lines at it have not yet
	// delivered or written off.
	KindIncomingVsTransfers = "incoming_vs_transfers" // high_risk
	// KindBundleVsComponents: a held or confirmed hold's bundle line whose
	// component lines are not what the definition it used says (each
	// component at the bundle's quantity times the component's, one
	// bundle quantity and version on every line). Its lines may still
	// balance its pools' counters, so no pool is paused: the hold is left
	// as it is for a person.
	KindBundleVsComponents = "bundle_vs_components" // high_risk
)

// KindBooksOutOfBalance is the critical alert a high-risk finding raises
// about its pool: paused, nothing moved. Resuming the pool through its
// gate, books balanced, resolves it (Resume).
const KindBooksOutOfBalance = "books_out_of_balance"

// Actor is who reconciliation's releases and pauses are recorded as.
const Actor = "system:reconcile"

// MaxRetries is how many times reconciliation re-enqueues one discarded
// job. River adds an attempt to a job each time it is retried after using
// up its attempts, so a job's max_attempts beyond enqueue.MaxAttempts counts
// its retries (a retry from the job dashboard counts too).
const MaxRetries = 2

// releaseBatch is how many stuck holds one transaction releases.
const releaseBatch = inventory.SweepBatch

// Jobs is what reconciliation needs of River, inside a caller's
// transaction: enqueue a requested run, and retry discarded jobs. A
// *river.Client[pgx.Tx] is one; an insert-only client, never started, is
// enough, so the CLI can run a reconciliation without working jobs.
type Jobs interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobRetryTx(ctx context.Context, tx pgx.Tx, id int64) (*rivertype.JobRow, error)
}

// Config tunes reconciliation.
type Config struct {
	// RepairLimit bounds the stuck holds one run releases per SKU; past it
	// the rest wait for a person, with a finding and a warning alert (many
	// stuck holds mean something is broken, and releasing them all at once
	// would hide it). Zero releases none.
	RepairLimit int
	// StuckGrace is how long past its expiry a hold must still be held before
	// reconciliation calls it stuck. Its expiry job and then the sweeper
	// should have released it by then.
	StuckGrace time.Duration
	// Rollbacks and Campaigns resume stranded chains: rollback requests and
	// campaigns with no job left to carry them on. Both nil: not looked for.
	Rollbacks *rollbacks.Service
	Campaigns CampaignResumer
	// FullEvery is how often a periodic run checks every stock row; in
	// between, periodic runs check only the rows whose ledger moved since
	// the last clean run (see Scopes). Zero makes every run full.
	FullEvery time.Duration
	// DeepEvery is how often a periodic run is deep: every stock row
	// against its whole ledger, trusting no checkpoint (ScopeDeep). Zero:
	// never on its own, only when asked for.
	DeepEvery time.Duration
	Log       *slog.Logger
}

// Scopes of a run: what it checks.
const (
	// ScopeFull checks every stock row: its counters against its lines
	// and against its ledger checkpoint plus the ledger rows after it. It
	// finds what leaves no ledger row (a counter changed by hand, a hold's
	// status changed without its stock).
	ScopeFull = "full"
	// ScopeIncremental checks only the stock rows whose ledger moved since
	// the last clean run's watermark, the xmin of the snapshot it checked:
	// its cost follows the changes, not the catalogue.
	ScopeIncremental = "incremental"
	// ScopeSKUs checks the rows of some SKUs (a campaign's, at its end).
	ScopeSKUs = "skus"
	// ScopeDeep is a full run (or one over some SKUs) that sums each
	// row's whole ledger instead of trusting its checkpoint: it also finds
	// a ledger row changed or deleted behind the append-only trigger, or a
	// checkpoint changed by hand. Its cost follows the whole ledger.
	ScopeDeep = "deep"
)

// validScope checks a scope a caller may ask for ("" leaves it to the
// schedule).
func validScope(scope string) error {
	switch scope {
	case "", ScopeFull, ScopeIncremental, ScopeDeep:
		return nil
	}
	return domain.Invalid("scope must be full, incremental or deep, not %q", scope)
}

// Service runs reconciliations and reports on them.
type Service struct {
	pool   *pgxpool.Pool
	jobs   Jobs
	alerts *alerts.Service
	inv    *inventory.Service
	cfg    Config
	log    *slog.Logger
	// skipped counts After's reconciliations skipped at a lock timeout.
	skipped *skipLog
}

// New returns a Service on pool that raises its alerts through alertSvc and
// releases stuck holds through inv.
func New(pool *pgxpool.Pool, jobs Jobs, alertSvc *alerts.Service, inv *inventory.Service, cfg Config) *Service {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &Service{pool: pool, jobs: jobs, alerts: alertSvc, inv: inv, cfg: cfg, log: log, skipped: &skipLog{}}
}

// Run runs one reconciliation now and returns it with its findings.
// args.RunID names a run recorded when it was asked for (RequestTx), which
// keeps the trigger and SKUs recorded then; zero records a new run with
// args.Trigger and args.SKUs (none: every SKU). args.Scope asks for a full
// or an incremental run (see plan). A run that already succeeded is
// returned as it is, so a duplicated job checks nothing twice.
//
// One run checks at a time (an advisory lock); a second waits for the first
// to finish, then checks the books as they are by then. The checks read one
// REPEATABLE READ snapshot, exact since every change to a stock row commits
// together with its lines and ledger rows; the actions (pauses, releases,
// retries, alerts, findings) each take a short READ COMMITTED transaction
// of their own, so they never fail on a snapshot older than the rows they
// write. A run that fails is marked failed with its error.
func (s *Service) Run(ctx context.Context, args ReconcileArgs) (Run, error) {
	if err := validScope(args.Scope); err != nil {
		return Run{}, err
	}
	q := db.New(s.pool)
	id := args.RunID
	if id == 0 {
		if err := validTrigger(args.Trigger); err != nil {
			return Run{}, err
		}
		skus, err := normalizeSKUs(args.SKUs)
		if err != nil {
			return Run{}, err
		}
		// Recorded even if ctx ends meanwhile, so that the run is then
		// marked failed rather than left pending.
		row, err := q.ReconcileRunCreate(context.WithoutCancel(ctx), args.Trigger, skus)
		if err != nil {
			return Run{}, fmt.Errorf("record reconciliation run: %w", err)
		}
		id = row.ID
	}
	var (
		row    db.ReconcileRun
		runErr error
	)
	err := pgx.BeginFunc(ctx, s.pool, func(lock pgx.Tx) error {
		if err := db.New(lock).ReconcileLock(ctx); err != nil {
			return fmt.Errorf("wait for the reconciliation lock: %w", err)
		}
		started, err := q.ReconcileRunStart(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			row, err = q.ReconcileRunGet(ctx, id)
			return dberr.NotFound(err, fmt.Sprintf("reconciliation run %d", id)) // nil: it succeeded before
		}
		if err != nil {
			return fmt.Errorf("start reconciliation run %d: %w", id, err)
		}
		row, runErr = s.check(ctx, started, args.Scope)
		return nil
	})
	if err != nil && args.RunID == 0 && row.ID == 0 {
		// Never started (the wait for the lock failed): a run of our own
		// making says so; a requested one stays pending for its job's retry.
		msg := err.Error()
		_, ferr := q.ReconcileRunFinish(context.WithoutCancel(ctx), db.ReconcileRunFinishParams{ID: id, Status: StatusFailed, Error: &msg})
		err = errors.Join(err, ferr)
	}
	if err == nil {
		err = runErr
	}
	if err != nil {
		return Run{}, err
	}
	return s.withFindings(ctx, q, row)
}

// check runs the checks and their actions for a started run, then records
// how it ended.
func (s *Service) check(ctx context.Context, run db.ReconcileRun, asked string) (db.ReconcileRun, error) {
	start := time.Now()
	plan, err := s.plan(ctx, run, asked)
	var snap snapshot
	if err == nil {
		snap, err = s.read(ctx, run.Skus, plan)
	}
	if err == nil {
		err = s.act(ctx, run, snap)
	}
	finish := db.ReconcileRunFinishParams{ID: run.ID, Status: StatusSucceeded, RowsChecked: snap.rows,
		Scope: &plan.scope, SinceXmin: plan.since}
	if snap.xmin != 0 {
		finish.SnapshotXmin = &snap.xmin
	}
	if err != nil {
		msg := err.Error()
		finish.Status, finish.Error = StatusFailed, &msg
	}
	// Record the end even when ctx is what failed.
	done, ferr := db.New(s.pool).ReconcileRunFinish(context.WithoutCancel(ctx), finish)
	if err != nil {
		s.log.ErrorContext(ctx, "reconciliation failed", "run_id", run.ID, "err", err)
		return done, errors.Join(fmt.Errorf("reconciliation run %d: %w", run.ID, err), ferr)
	}
	if ferr != nil {
		return done, fmt.Errorf("finish reconciliation run %d: %w", run.ID, ferr)
	}
	s.log.InfoContext(ctx, "reconciliation finished", "run_id", run.ID, "scope", plan.scope, "rows_checked", done.RowsChecked,
		"auto_fixed", done.AutoFixed, "retried", done.Retried, "high_risk", done.HighRisk,
		"took", time.Since(start).Round(time.Millisecond))
	return done, nil
}

// plan is what a run checks and from where.
type plan struct {
	scope string
	// since is the last clean run's watermark; nil means there is none
	// (no clean run yet), so a full run probes each row's ledger from its
	// checkpoint.
	since *uint64
}

// plan decides a run's scope: deep when asked for; the SKUs it was
// limited to; what was asked (asked: ScopeFull or ScopeIncremental, or ""
// for the default); by default a periodic run is deep once the last deep
// run is DeepEvery old, else incremental unless the last full run is
// FullEvery old, and any other run is full. A run with no clean run before
// it to start from is full, or deep when no run over every SKU ever
// succeeded.
//
// That first run is deep because no stock row has a checkpoint to start
// from: a full run would probe each row's whole ledger on every
// partition, row by row, while a deep run sums the ledger in one grouped
// pass. On a year of history (10,000,000 SKUs, 100,200,000 ledger rows)
// the full run had not finished after 18.7 minutes; the deep run took
// 389.6 s. After a run that found books out of balance, the other rows'
// checkpoints stand, and the run is full as before.
func (s *Service) plan(ctx context.Context, run db.ReconcileRun, asked string) (plan, error) {
	if asked == ScopeDeep {
		return plan{scope: ScopeDeep}, nil
	}
	if run.Skus != nil {
		return plan{scope: ScopeSKUs}, nil
	}
	q := db.New(s.pool)
	w, err := q.ReconcileWatermark(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		checked, err := q.ReconcileEverChecked(ctx)
		if err != nil {
			return plan{}, fmt.Errorf("look for an earlier run over every SKU: %w", err)
		}
		if !checked {
			return plan{scope: ScopeDeep}, nil
		}
		return plan{scope: ScopeFull}, nil
	}
	if err != nil {
		return plan{}, fmt.Errorf("read the last clean run's watermark: %w", err)
	}
	p := plan{scope: ScopeFull, since: &w.SnapshotXmin}
	periodic := asked == "" && run.Trigger == TriggerPeriodic
	switch {
	case asked == ScopeIncremental:
		p.scope = ScopeIncremental
	case periodic && s.cfg.DeepEvery > 0 && time.Since(w.LastDeepAt) >= s.cfg.DeepEvery:
		return plan{scope: ScopeDeep}, nil
	case periodic && s.cfg.FullEvery > 0 && time.Since(w.LastFullAt) < s.cfg.FullEvery:
		p.scope = ScopeIncremental
	}
	return p, nil
}

// snapshot is what one run read from the books.
type snapshot struct {
	// xmin is the snapshot's xmin: the run's watermark if it is clean.
	xmin   uint64
	rows   int32
	lines  []db.StockLinesMismatchRow
	ledger []db.StockLedgerCheckRow
	units  []db.StockUnitsMismatchRow
	// transit are the rows whose incoming disagrees with the transfers in
	// transit to them.
	transit []db.StockTransitMismatchRow
	// bundles are the component lines of bundle lines out of step with
	// their definitions.
	bundles []db.BundleLinesMismatchRow
	// stuck are the stuck holds within the repair bound; stuckPerSKU counts
	// all of them.
	stuck       []db.ReservationsStuckRow
	stuckPerSKU []db.ReservationsStuckCountRow
	jobs        []db.JobsDiscardedNeededRow
	// Chains with no job left to run.
	strandedRollbacks []db.RollbacksStrandedRow
	strandedCampaigns []db.CampaignsStrandedRow
}

// read runs every check in one REPEATABLE READ snapshot. It also moves the
// ledger checkpoints of the rows that balanced, in the same snapshot: only
// the holder of the reconciliation lock writes them, so this transaction
// cannot meet a concurrent write to them.
func (s *Service) read(ctx context.Context, skus []string, p plan) (snapshot, error) {
	var snap snapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		// The first statement takes the snapshot every later one reads.
		if snap.xmin, err = q.ReconcileSnapshotXmin(ctx); err != nil {
			return fmt.Errorf("take the snapshot: %w", err)
		}
		if err := s.readBooks(ctx, q, skus, p, &snap); err != nil {
			return err
		}
		var since *uint64
		if p.scope == ScopeIncremental {
			since = p.since
		}
		if snap.units, err = q.StockUnitsMismatch(ctx, since, skus); err != nil {
			return fmt.Errorf("check counters against units: %w", err)
		}
		if snap.transit, err = q.StockTransitMismatch(ctx, skus); err != nil {
			return fmt.Errorf("check incoming against transfers: %w", err)
		}
		if snap.bundles, err = q.BundleLinesMismatch(ctx, since, skus); err != nil {
			return fmt.Errorf("check bundle lines against their definitions: %w", err)
		}
		if p.scope == ScopeDeep {
			if err := readUnitsDeep(ctx, q, skus, &snap); err != nil {
				return err
			}
		}
		grace := s.cfg.StuckGrace.Seconds()
		if snap.stuck, err = q.ReservationsStuck(ctx, int64(s.cfg.RepairLimit), grace, skus); err != nil {
			return fmt.Errorf("find stuck holds: %w", err)
		}
		if snap.stuckPerSKU, err = q.ReservationsStuckCount(ctx, grace, skus); err != nil {
			return fmt.Errorf("count stuck holds: %w", err)
		}
		// Jobs are not per SKU: only a run over every SKU retries them and
		// resumes stranded chains.
		if skus != nil {
			return nil
		}
		if snap.jobs, err = q.JobsDiscardedNeeded(ctx); err != nil {
			return fmt.Errorf("find discarded jobs: %w", err)
		}
		if s.cfg.Rollbacks != nil {
			if snap.strandedRollbacks, err = q.RollbacksStranded(ctx); err != nil {
				return fmt.Errorf("find stranded rollbacks: %w", err)
			}
		}
		if s.cfg.Campaigns != nil {
			if snap.strandedCampaigns, err = q.CampaignsStranded(ctx); err != nil {
				return fmt.Errorf("find stranded campaigns: %w", err)
			}
		}
		if s.cfg.Campaigns != nil && (p.scope == ScopeFull || p.scope == ScopeDeep) {
			holding, err := q.CampaignsHolding(ctx)
			if err != nil {
				return fmt.Errorf("find finished campaigns holding stock: %w", err)
			}
			for _, c := range holding {
				snap.strandedCampaigns = append(snap.strandedCampaigns, db.CampaignsStrandedRow(c))
			}
		}
		return nil
	})
	return snap, err
}

// readUnitsDeep adds to a deep run's units findings the pools with a unit
// its pool's ledger places elsewhere, counts agreeing or not.
func readUnitsDeep(ctx context.Context, q *db.Queries, skus []string, snap *snapshot) error {
	off, err := q.StockUnitsAgainstLedgerDeep(ctx, skus)
	if err != nil {
		return fmt.Errorf("check units against the ledger: %w", err)
	}
	found := make(map[stockKey]bool, len(snap.units))
	for _, u := range snap.units {
		found[stockKey{u.Sku, u.Location, u.Pool}] = true
	}
	for _, u := range off {
		if !found[stockKey{u.Sku, u.Location, u.Pool}] {
			snap.units = append(snap.units, db.StockUnitsMismatchRow(u))
		}
	}
	return nil
}

// readBooks runs the checks of counters against lines and the ledger that
// p's scope calls for.
func (s *Service) readBooks(ctx context.Context, q *db.Queries, skus []string, p plan, snap *snapshot) error {
	var err error
	if p.scope == ScopeIncremental {
		var checked []db.StockLedgerCheckMovedRow
		if checked, err = q.StockLedgerCheckMoved(ctx, *p.since); err != nil {
			return fmt.Errorf("check counters against the ledger: %w", err)
		}
		snap.rows = int32(len(checked))
		for _, l := range checked {
			if !l.Balanced {
				snap.ledger = append(snap.ledger, db.StockLedgerCheckRow(l))
			}
		}
		var lines []db.StockLinesMismatchMovedRow
		if lines, err = q.StockLinesMismatchMoved(ctx, *p.since); err != nil {
			return fmt.Errorf("check counters against lines: %w", err)
		}
		for _, l := range lines {
			snap.lines = append(snap.lines, db.StockLinesMismatchRow(l))
		}
		return nil
	}
	if snap.rows, err = q.StockCount(ctx, skus); err != nil {
		return fmt.Errorf("count stock rows: %w", err)
	}
	if snap.lines, err = q.StockLinesMismatch(ctx, skus); err != nil {
		return fmt.Errorf("check counters against lines: %w", err)
	}
	if p.scope == ScopeDeep {
		var ledger []db.StockLedgerMismatchDeepRow
		if ledger, err = q.StockLedgerMismatchDeep(ctx, skus); err != nil {
			return fmt.Errorf("check counters against the whole ledger: %w", err)
		}
		for _, l := range ledger {
			snap.ledger = append(snap.ledger, db.StockLedgerCheckRow(l))
		}
		return nil
	}
	// A full run that has a watermark (p.since) probes the rows that
	// changed since their checkpoint or whose ledger moved; a run over
	// some SKUs, or the first full run, probes every row.
	if snap.ledger, err = q.StockLedgerCheck(ctx, p.since, skus); err != nil {
		return fmt.Errorf("check counters against the ledger: %w", err)
	}
	return nil
}

// act takes each class's action: high risk first, so that the pools are
// paused as soon as possible and no stuck hold on them is released.
// A class whose action fails does not keep the others from theirs: the
// errors come back joined, and the run is failed.
func (s *Service) act(ctx context.Context, run db.ReconcileRun, snap snapshot) error {
	risky, pauseErr := s.pauseHighRisk(ctx, run.ID, snap)
	return errors.Join(pauseErr,
		s.recordBundles(ctx, run.ID, snap.bundles),
		s.releaseStuck(ctx, run.ID, snap, risky),
		s.retryJobs(ctx, run.ID, snap.jobs),
		s.resumeChains(ctx, run.ID, snap))
}

func validTrigger(t string) error {
	switch t {
	case TriggerPeriodic, TriggerHTTP, TriggerCLI, TriggerCampaignEnd,
		TriggerResume, TriggerRepair, TriggerRollback, TriggerAdjustment:
		return nil
	}
	return domain.Invalid("trigger must be periodic, http, cli, campaign_end, resume, repair, rollback or adjustment, not %q", t)
}

// UnknownSKUs returns the SKUs of skus that have no stock row, in the
// order given: a run limited to them would check nothing, which a person
// who mistyped a SKU should hear rather than read "the books balance".
func (s *Service) UnknownSKUs(ctx context.Context, skus []string) ([]string, error) {
	rows, err := db.New(s.pool).StockListBySKUs(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("look up SKUs: %w", err)
	}
	known := make(map[string]bool, len(rows))
	for _, r := range rows {
		known[r.Sku] = true
	}
	var unknown []string
	for _, sku := range skus {
		if !known[sku] {
			unknown = append(unknown, sku)
		}
	}
	return unknown, nil
}
