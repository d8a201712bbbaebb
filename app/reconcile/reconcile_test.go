package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/jobs"
)

var quiet = slog.New(slog.DiscardHandler)

type bundle struct {
	pool      *pgxpool.Pool
	inv       *inventory.Service
	alerts    *alerts.Service
	rollbacks *rollbacks.Service
	inserter  *river.Client[pgx.Tx]
}

type setupOpts struct {
	repairLimit int
	grace       time.Duration
}

// setup returns a reconciliation service on a fresh database (no River
// worker runs: jobs stay where the test puts them) and its collaborators.
func setup(t *testing.T, opts *setupOpts) (*reconcile.Service, *bundle) {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{repairLimit: 100, grace: time.Minute}
	}
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.NewServices(config.Defaults(), pool, inserter, quiet)
	b := &bundle{pool: pool, inv: deps.Inventory, alerts: deps.Alerts, rollbacks: deps.Rollbacks, inserter: inserter}
	svc := reconcile.New(pool, inserter, b.alerts, b.inv, reconcile.Config{RepairLimit: opts.repairLimit, StuckGrace: opts.grace, Log: quiet})
	return svc, b
}

func run(t *testing.T, svc *reconcile.Service, skus ...string) reconcile.Run {
	t.Helper()
	r, err := svc.Run(context.Background(), reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, SKUs: skus})
	require.NoError(t, err)
	require.Equal(t, reconcile.StatusSucceeded, r.Status)
	return r
}

func (b *bundle) hold(t *testing.T, key, sku string, q int64) uuid.UUID {
	t.Helper()
	return dbtest.Hold(t, b.pool, sku, &dbtest.HoldOptions{Key: key, Quantity: q})
}

// strand makes a hold stuck: it expired age ago and nothing released it
// (no expiry loop runs here).
func (b *bundle) strand(t *testing.T, id uuid.UUID, age time.Duration) {
	t.Helper()
	ctx := context.Background()
	tag, err := b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - $2::interval WHERE id = $1`, id, age.String())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

func (b *bundle) stock(t *testing.T, sku, pool string) db.Stock {
	t.Helper()
	row, err := db.New(b.pool).StockGet(context.Background(), sku, "default", pool)
	require.NoError(t, err)
	return row
}

func (b *bundle) status(t *testing.T, id uuid.UUID) string {
	t.Helper()
	r, err := b.inv.Get(context.Background(), id, inventory.Caller{Ops: true})
	require.NoError(t, err)
	return string(r.Status)
}

func (b *bundle) openAlert(t *testing.T, kind, subject string) (alerts.Alert, bool) {
	t.Helper()
	list, err := b.alerts.List(context.Background(), alerts.StatusOpen, alerts.MaxList)
	require.NoError(t, err)
	for _, a := range list {
		if a.Kind == kind && a.Subject == subject {
			return a, true
		}
	}
	return alerts.Alert{}, false
}

func counters(s db.Stock) [4]int64 { return [4]int64{s.Total, s.Available, s.Reserved, s.Sold} }

func details(t *testing.T, f reconcile.Finding) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(f.Details, &m))
	return m
}

func TestCleanBooksFindNothingAndCheckpointsAdvance(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 100)
	dbtest.StockIn(t, b.pool, "B1", 10)
	kept := b.hold(t, "k1", "A1", 3)
	sold := b.hold(t, "k2", "A1", 2)
	_, err := b.inv.Confirm(ctx, sold, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	gone := b.hold(t, "k3", "B1", 4)
	_, err = b.inv.Release(ctx, gone, inventory.Caller{Name: "shop"}, "changed my mind")
	require.NoError(t, err)

	r := run(t, svc)
	require.EqualValues(t, 2, r.RowsChecked)
	require.Empty(t, r.Findings.All())
	require.Zero(t, r.HighRisk+r.AutoFixed+r.Retried)
	require.NotNil(t, r.StartedAt)
	require.NotNil(t, r.FinishedAt)

	q := db.New(b.pool)
	cp, err := q.LedgerCheckpointGet(ctx, "A1", "default", "main")
	require.NoError(t, err)
	a1 := b.stock(t, "A1", "main")
	require.Equal(t, a1.Version, cp.StockVersion, "a clean row's checkpoint moves to its version")
	require.Equal(t, [4]int64{cp.Total, cp.Available, cp.Reserved, cp.Sold}, counters(a1))

	// More movements: the next run sums only the ledger rows after the
	// checkpoint, and still balances.
	_, err = b.inv.Release(ctx, kept, inventory.Caller{Name: "shop"}, "")
	require.NoError(t, err)
	b.hold(t, "k4", "A1", 7)
	r = run(t, svc)
	require.Empty(t, r.Findings.All())
	cp2, err := q.LedgerCheckpointGet(ctx, "A1", "default", "main")
	require.NoError(t, err)
	a1 = b.stock(t, "A1", "main")
	require.Greater(t, cp2.StockVersion, cp.StockVersion)
	require.Equal(t, a1.Version, cp2.StockVersion)
	require.Equal(t, [4]int64{cp2.Total, cp2.Available, cp2.Reserved, cp2.Sold}, counters(a1))
	dbtest.RequireInvariants(t, b.pool)
}

func TestCorruptedCountersPausePoolAndMoveNothing(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B1", 10)
	stuck := b.hold(t, "stuck", "A1", 2)
	b.strand(t, stuck, time.Hour)
	b.hold(t, "b", "B1", 1)

	// A unit sold with no hold and no ledger row: every CHECK still holds.
	_, err := b.pool.Exec(ctx, `UPDATE stock SET available = available - 1, sold = sold + 1 WHERE sku = 'A1' AND pool = 'main'`)
	require.NoError(t, err)
	before := counters(b.stock(t, "A1", "main"))

	r := run(t, svc)
	require.EqualValues(t, 2, r.HighRisk, "lines and ledger both disagree")
	kinds := map[string]reconcile.Finding{}
	for _, f := range r.Findings.HighRisk {
		require.Equal(t, "A1", *f.SKU)
		require.Equal(t, "main", *f.Pool)
		require.Equal(t, "paused; no stock moved", f.Action)
		kinds[f.Kind] = f
	}
	require.Contains(t, kinds, reconcile.KindCountersVsLines)
	require.Contains(t, kinds, reconcile.KindCountersVsLedger)
	lines := details(t, kinds[reconcile.KindCountersVsLines])
	require.EqualValues(t, 1, lines["counters"].(map[string]any)["sold"])
	require.EqualValues(t, 0, lines["lines"].(map[string]any)["confirmed"])

	a1 := b.stock(t, "A1", "main")
	require.Equal(t, stock.StockPaused, a1.Status)
	require.Contains(t, *a1.PausedReason, fmt.Sprintf("reconciliation run %d", r.ID))
	require.Equal(t, before, counters(a1), "no stock moved")
	require.Equal(t, string(inventory.StatusHeld), b.status(t, stuck), "a stuck hold on a high-risk pool is not released")
	require.Zero(t, r.AutoFixed)
	require.Len(t, r.Findings.AutoFix, 1)
	require.Equal(t, reconcile.KindStuckHoldsWaiting, r.Findings.AutoFix[0].Kind)
	require.EqualValues(t, 1, details(t, r.Findings.AutoFix[0])["on_high_risk_pool"])

	a, ok := b.openAlert(t, "books_out_of_balance", "sku:A1/main")
	require.True(t, ok)
	require.Equal(t, alerts.Critical, a.Level)
	require.Equal(t, "A1", *a.SKU)
	require.Equal(t, "main", *a.Pool)
	var ad map[string]any
	require.NoError(t, json.Unmarshal(a.Details, &ad))
	require.Contains(t, ad, "lines")
	require.Contains(t, ad, "ledger")
	// The difference per counter, and the holds the pool's books touch.
	require.Equal(t, map[string]any{"reserved": 0.0, "sold": 1.0}, ad["lines"].(map[string]any)["difference"])
	require.Equal(t, map[string]any{"total": 0.0, "available": -1.0, "reserved": 0.0, "sold": 1.0,
		"quality_control": 0.0, "damaged": 0.0, "safety_stock": 0.0, "incoming": 0.0, "short": 0.0}, ad["ledger"].(map[string]any)["difference"])
	affected := ad["affected_holds"].([]any)
	require.Len(t, affected, 1)
	require.Equal(t, stuck.String(), affected[0].(map[string]any)["id"])
	require.Equal(t, "held", affected[0].(map[string]any)["status"])

	b1 := b.stock(t, "B1", "main")
	require.Equal(t, stock.StockOnSale, b1.Status, "a clean pool stays on sale")
	_, ok = b.openAlert(t, "books_out_of_balance", "sku:B1/main")
	require.False(t, ok)

	// A second run finds it again, leaves it paused, and pauses nothing twice.
	r = run(t, svc)
	require.EqualValues(t, 2, r.HighRisk)
	require.Contains(t, r.Findings.HighRisk[0].Action, "left paused")
	var pauses int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM ledger WHERE sku = 'A1' AND kind = 'pause'`).Scan(&pauses))
	require.Equal(t, 1, pauses)
	require.Equal(t, before, counters(b.stock(t, "A1", "main")))
	a, _ = b.openAlert(t, "books_out_of_balance", "sku:A1/main")
	require.EqualValues(t, 2, a.Occurrences)
}

func TestCorruptedLedgerIsHighRisk(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	b.hold(t, "k", "A1", 2)
	require.Empty(t, run(t, svc).Findings.All())
	cp, err := db.New(b.pool).LedgerCheckpointGet(ctx, "A1", "default", "main")
	require.NoError(t, err)

	// A movement in the ledger that never reached the counters.
	a1 := b.stock(t, "A1", "main")
	_, err = b.pool.Exec(ctx, `
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
		VALUES ('A1', 'main', 'adjust', 5, 5, 0, 0, $1, 'mallory')`, a1.Version+1)
	require.NoError(t, err)

	r := run(t, svc)
	require.EqualValues(t, 1, r.HighRisk)
	f := r.Findings.HighRisk[0]
	require.Equal(t, reconcile.KindCountersVsLedger, f.Kind, "the lines still agree")
	d := details(t, f)
	require.EqualValues(t, 10, d["counters"].(map[string]any)["total"])
	require.EqualValues(t, 15, d["ledger"].(map[string]any)["total"])
	require.EqualValues(t, cp.StockVersion, d["checkpoint_version"])
	require.Equal(t, stock.StockPaused, b.stock(t, "A1", "main").Status)
	require.Equal(t, counters(a1), counters(b.stock(t, "A1", "main")))

	cp2, err := db.New(b.pool).LedgerCheckpointGet(ctx, "A1", "default", "main")
	require.NoError(t, err)
	require.Equal(t, cp.StockVersion, cp2.StockVersion, "an unbalanced row's checkpoint stays")
}

func TestStuckHoldIsReleasedOnce(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	stuck := b.hold(t, "stuck", "A1", 3)
	b.strand(t, stuck, time.Hour)
	recent := b.hold(t, "recent", "A1", 1)
	b.strand(t, recent, time.Second) // expired, but within the grace
	live := b.hold(t, "live", "A1", 1)

	r := run(t, svc)
	require.EqualValues(t, 1, r.AutoFixed)
	require.Len(t, r.Findings.AutoFix, 1)
	f := r.Findings.AutoFix[0]
	require.Equal(t, reconcile.KindStuckHold, f.Kind)
	require.Equal(t, stuck, *f.ReservationID)
	require.Equal(t, "A1", *f.SKU)
	require.Equal(t, "expired", details(t, f)["status"])
	require.Equal(t, string(inventory.StatusExpired), b.status(t, stuck))
	require.Equal(t, string(inventory.StatusHeld), b.status(t, recent))
	require.Equal(t, string(inventory.StatusHeld), b.status(t, live))

	var actor, kind string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT actor, kind FROM ledger WHERE reservation_id = $1 AND delta_reserved < 0`, stuck).Scan(&actor, &kind))
	require.Equal(t, reconcile.Actor, actor)
	require.Equal(t, "expire", kind)

	r = run(t, svc)
	require.Empty(t, r.Findings.All(), "released once")
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM ledger WHERE reservation_id = $1 AND kind = 'expire'`, stuck).Scan(&n))
	require.Equal(t, 1, n)
	require.EqualValues(t, 2, b.stock(t, "A1", "main").Reserved)
	dbtest.RequireInvariants(t, b.pool)
}

func TestRepairLimitBoundsReleasesPerSKU(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, &setupOpts{repairLimit: 2, grace: time.Minute})
	dbtest.StockIn(t, b.pool, "A1", 100)
	dbtest.StockIn(t, b.pool, "B1", 100)
	var ids []uuid.UUID
	for i := range 5 {
		id := b.hold(t, fmt.Sprint("a", i), "A1", 1)
		b.strand(t, id, time.Duration(10-i)*time.Hour) // a0 expired first
		ids = append(ids, id)
	}
	other := b.hold(t, "b", "B1", 1)
	b.strand(t, other, time.Hour)

	r := run(t, svc)
	require.EqualValues(t, 3, r.AutoFixed, "2 of A1, 1 of B1")
	for i, id := range ids {
		want := inventory.StatusHeld
		if i < 2 {
			want = inventory.StatusExpired // the two that expired first
		}
		require.Equal(t, string(want), b.status(t, id), "hold a%d", i)
	}
	require.Equal(t, string(inventory.StatusExpired), b.status(t, other))

	var waiting []reconcile.Finding
	for _, f := range r.Findings.AutoFix {
		if f.Kind == reconcile.KindStuckHoldsWaiting {
			waiting = append(waiting, f)
		}
	}
	require.Len(t, waiting, 1)
	require.Equal(t, "A1", *waiting[0].SKU)
	d := details(t, waiting[0])
	require.EqualValues(t, 5, d["stuck"])
	require.EqualValues(t, 2, d["released"])
	require.EqualValues(t, 3, d["waiting"])
	a, ok := b.openAlert(t, "stuck_holds_waiting", "sku:A1")
	require.True(t, ok)
	require.Equal(t, alerts.Warning, a.Level)
	_, ok = b.openAlert(t, "stuck_holds_waiting", "sku:B1")
	require.False(t, ok)

	// The next run releases the next two, and the one after the last.
	require.EqualValues(t, 2, run(t, svc).AutoFixed)
	r = run(t, svc)
	require.EqualValues(t, 1, r.AutoFixed)
	require.Len(t, r.Findings.AutoFix, 1, "nothing waits any more")
	dbtest.RequireInvariants(t, b.pool)
}

func TestRunLimitedToSKUs(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B1", 10)
	_, err := b.pool.Exec(ctx, `UPDATE stock SET available = available - 1, reserved = reserved + 1 WHERE sku = 'A1'`)
	require.NoError(t, err)

	r := run(t, svc, "B1", "B1")
	require.Equal(t, []string{"B1"}, r.SKUs)
	require.EqualValues(t, 1, r.RowsChecked)
	require.Empty(t, r.Findings.All())
	require.Equal(t, stock.StockOnSale, b.stock(t, "A1", "main").Status, "out of scope")

	r = run(t, svc, "A1")
	require.EqualValues(t, 2, r.HighRisk)
	require.Equal(t, stock.StockPaused, b.stock(t, "A1", "main").Status)

	_, err = svc.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, SKUs: []string{"a/b"}})
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeInvalid, de.Code)
}

// discardBatch records a rollback of ids whose first batch job was
// discarded after its last attempt, and the request marked failed, as the
// batch worker leaves them. No worker runs here, so nothing else moves.
func discardBatch(t *testing.T, b *bundle, ids []uuid.UUID) (rollbackID, jobID int64) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		c, err := b.rollbacks.StartTx(ctx, tx, rollbacks.Request{
			Operator: "alice", Reason: "test", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{ReservationIDs: ids},
		})
		if err != nil {
			return err
		}
		rollbackID, jobID = c.RollbackID, c.JobID
		return rollbacks.FailTx(ctx, tx, c.RollbackID, "boom")
	})
	require.NoError(t, err)
	discard(t, b, jobID)
	return rollbackID, jobID
}

// discard marks a job discarded after using up its attempts.
func discard(t *testing.T, b *bundle, jobID int64) {
	t.Helper()
	tag, err := b.pool.Exec(context.Background(), `
		UPDATE river_job SET state = 'discarded', attempt = max_attempts, attempted_at = now(), finalized_at = now(),
		       errors = array_append(errors, '{"error": "boom"}'::jsonb)
		WHERE id = $1`, jobID)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

func jobState(t *testing.T, b *bundle, id int64) (state string, maxAttempts int) {
	t.Helper()
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state, max_attempts FROM river_job WHERE id = $1`, id).Scan(&state, &maxAttempts))
	return state, maxAttempts
}

func TestDiscardedRollbackBatchIsRetriedTwice(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	hold := b.hold(t, "k", "A1", 1)
	rollbackID, jobID := discardBatch(t, b, []uuid.UUID{hold})

	// Jobs whose work is done, or not needed, are left alone.
	var doneJob, deliverJob int64
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		c, err := b.rollbacks.StartTx(ctx, tx, rollbacks.Request{
			Operator: "bob", Reason: "done", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{Campaign: "gone"},
		})
		if err != nil {
			return err
		}
		doneJob = c.JobID
		if _, err := db.New(tx).RollbackFinish(ctx, db.RollbackFinishParams{Status: rollbacks.StatusSucceeded, ID: c.RollbackID}); err != nil {
			return err
		}
		res, err := b.inserter.InsertTx(ctx, tx, alerts.DeliverAlertArgs{AlertID: 1}, nil)
		deliverJob = res.Job.ID
		return err
	})
	require.NoError(t, err)
	discard(t, b, doneJob)
	discard(t, b, deliverJob)

	for retry := 1; retry <= reconcile.MaxRetries; retry++ {
		r := run(t, svc)
		require.EqualValues(t, 1, r.Retried)
		require.Len(t, r.Findings.Retry, 1)
		f := r.Findings.Retry[0]
		require.Equal(t, reconcile.KindJobRetried, f.Kind)
		require.Equal(t, jobID, *f.JobID)
		require.Contains(t, f.Action, fmt.Sprintf("retry %d of 2", retry))
		require.Contains(t, f.Action, fmt.Sprintf("rollback request %d set back to running", rollbackID))

		state, maxAttempts := jobState(t, b, jobID)
		require.Equal(t, "available", state)
		require.Equal(t, 3+retry, maxAttempts)
		rb, err := b.rollbacks.Get(ctx, rollbackID)
		require.NoError(t, err)
		require.Equal(t, rollbacks.StatusRunning, rb.Status)
		a, ok := b.openAlert(t, "job_retried", fmt.Sprintf("job:%d", jobID))
		require.True(t, ok)
		require.Equal(t, alerts.Warning, a.Level)

		// It fails again.
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return rollbacks.FailTx(ctx, tx, rollbackID, "boom") }))
		discard(t, b, jobID)
	}

	r := run(t, svc)
	require.Zero(t, r.Retried)
	require.Len(t, r.Findings.Retry, 1)
	require.Equal(t, reconcile.KindJobRetriesExhausted, r.Findings.Retry[0].Kind)
	state, _ := jobState(t, b, jobID)
	require.Equal(t, "discarded", state, "a third retry waits for a person")
	a, ok := b.openAlert(t, "job_retries_exhausted", fmt.Sprintf("job:%d", jobID))
	require.True(t, ok)
	require.Equal(t, alerts.Critical, a.Level)

	for _, id := range []int64{doneJob, deliverJob} {
		state, _ := jobState(t, b, id)
		require.Equal(t, "discarded", state)
	}
	require.Equal(t, string(inventory.StatusHeld), b.status(t, hold))
	dbtest.RequireInvariants(t, b.pool)
}

func TestRequestedRunIsRunOnce(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	_, err := svc.Latest(ctx)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeNotFound, de.Code)

	var req reconcile.Requested
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		req, err = svc.RequestTx(ctx, tx, reconcile.TriggerHTTP, []string{"B1", "A1"})
		return err
	}))
	job := rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), reconcile.ReconcileArgs{}, nil)
	require.Equal(t, req.JobID, job.ID)
	require.Equal(t, reconcile.ReconcileArgs{RunID: req.RunID, SKUs: []string{"A1", "B1"}, Trigger: reconcile.TriggerHTTP}, job.Args)

	latest, err := svc.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, req.RunID, latest.ID)
	require.Equal(t, reconcile.StatusPending, latest.Status)
	require.Nil(t, latest.StartedAt)

	r, err := svc.Run(ctx, reconcile.ReconcileArgs{RunID: req.RunID})
	require.NoError(t, err)
	require.Equal(t, reconcile.StatusSucceeded, r.Status)
	require.Equal(t, []string{"A1", "B1"}, r.SKUs)
	again, err := svc.Run(ctx, reconcile.ReconcileArgs{RunID: req.RunID})
	require.NoError(t, err)
	require.Equal(t, r.FinishedAt, again.FinishedAt, "a finished run is not checked again")

	_, err = svc.Run(ctx, reconcile.ReconcileArgs{RunID: req.RunID + 100})
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeNotFound, de.Code)
	_, err = svc.Get(ctx, req.RunID+100)
	require.ErrorAs(t, err, &de)
}

// TestRunsDuringTrafficFindNothing checks the books while holds are made,
// confirmed and cancelled on the same rows, with several runs at once: the
// snapshot is exact, so a busy pool is never mistaken for a broken one, and
// runs take turns without serialization failures.
func TestRunsDuringTrafficFindNothing(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	skus := []string{"A1", "B1", "C1"}
	for _, sku := range skus {
		dbtest.StockIn(t, b.pool, sku, 1_000_000)
	}
	var (
		stop    atomic.Bool
		traffic sync.WaitGroup
		n       atomic.Int64
	)
	for w := range 4 {
		traffic.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; !stop.Load(); i++ {
				items := []inventory.Item{{SKU: skus[rng.IntN(len(skus))], Quantity: int64(1 + rng.IntN(3))}}
				if rng.IntN(3) == 0 {
					items = append(items, inventory.Item{SKU: "C1", Quantity: 1})
				}
				r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("w%d-%d", w, i), Items: items})
				if err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(2) == 0 {
					_, err = b.inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
				} else {
					_, err = b.inv.Release(ctx, r.ID, inventory.Caller{Name: "shop"}, "")
				}
				if err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	var (
		runs    sync.WaitGroup
		checked atomic.Int64
	)
	for range 3 {
		runs.Go(func() {
			// At least 4 runs each, and until plenty of traffic overlapped them.
			for i := 0; (i < 4 || n.Load() < 500) && !t.Failed(); i++ {
				checked.Add(1)
				r, err := svc.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerPeriodic})
				if err != nil {
					t.Error(err)
					return
				}
				if len(r.Findings.All()) > 0 {
					t.Errorf("run %d found %+v", r.ID, r.Findings)
				}
			}
		})
	}
	runs.Wait()
	stop.Store(true)
	traffic.Wait()
	t.Logf("%d holds made and ended during %d runs", n.Load(), checked.Load())
	r := run(t, svc)
	require.Empty(t, r.Findings.All())
	for _, sku := range skus {
		require.Equal(t, stock.StockOnSale, b.stock(t, sku, "main").Status)
	}
	dbtest.RequireInvariants(t, b.pool)
}

// TestSecondRunWaitsForTheLock: while another run holds the reconciliation
// lock, a run waits (pending) and starts once the lock is free; one that
// gives up waiting is recorded as failed.
func TestSecondRunWaitsForTheLock(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx)
	require.NoError(t, db.New(holder).ReconcileLock(ctx))

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = svc.Run(short, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.Error(t, err)
	gaveUp, err := svc.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.StatusFailed, gaveUp.Status)
	require.Contains(t, *gaveUp.Error, "reconciliation lock")

	done := make(chan error, 1)
	var waited reconcile.Run
	go func() {
		var err error
		waited, err = svc.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerPeriodic})
		done <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := svc.Latest(ctx)
		assert.NoError(c, err)
		assert.NotEqual(c, gaveUp.ID, r.ID)
		assert.Equal(c, reconcile.StatusPending, r.Status)
	}, 10*time.Second, 20*time.Millisecond, "the second run waits, pending")
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-done)
	require.Equal(t, reconcile.StatusSucceeded, waited.Status)
	require.EqualValues(t, 1, waited.RowsChecked)
}

// TestStrandedAndDiscardedChainsTakeOnePath checks how the two retry paths
// share a rollback's chain: a discarded batch is job_retried's (within its
// budget), a chain with nothing left to run is chain_resumed's, and one
// that was resumed meanwhile is left alone by both.
func TestStrandedAndDiscardedChainsTakeOnePath(t *testing.T) {
	t.Parallel()
	_, b := setup(t, nil)
	ctx := context.Background()
	svc := app.NewServices(config.Defaults(), b.pool, b.inserter, quiet).Reconcile
	dbtest.StockIn(t, b.pool, "A1", 10)
	rollbackID, discarded := discardBatch(t, b, []uuid.UUID{b.hold(t, "k", "A1", 1)})

	// An operator resumed it: a new batch is queued, so neither path acts.
	res, err := b.rollbacks.Resume(ctx, rollbackID, "alice")
	require.NoError(t, err)
	require.True(t, res.Resumed)
	require.Equal(t, rollbacks.StatusRunning, res.Status)
	r := run(t, svc)
	require.Empty(t, r.Findings.Retry)
	state, _ := jobState(t, b, discarded)
	require.Equal(t, "discarded", state, "the old batch is not retried: a second chain")

	// Its new batch is cancelled: nothing left to run, chain_resumed.
	_, err = b.pool.Exec(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE id = $1`, *res.JobID)
	require.NoError(t, err)
	r = run(t, svc)
	require.Len(t, r.Findings.Retry, 1)
	require.Equal(t, reconcile.KindChainResumed, r.Findings.Retry[0].Kind)
	require.NotEqual(t, *res.JobID, *r.Findings.Retry[0].JobID)
	_, ok := b.openAlert(t, "chain_resumed", fmt.Sprintf("rollback:%d", rollbackID))
	require.True(t, ok)

	// That one is discarded after its attempts: job_retried's, not ours.
	discard(t, b, *r.Findings.Retry[0].JobID)
	r = run(t, svc)
	require.Len(t, r.Findings.Retry, 1)
	require.Equal(t, reconcile.KindJobRetried, r.Findings.Retry[0].Kind)
	rb, err := b.rollbacks.Get(ctx, rollbackID)
	require.NoError(t, err)
	require.EqualValues(t, 2, rb.Resumes, "once by alice, once by reconciliation")
}

// TestMultiLineStuckHoldOnAHighRiskPoolIsNotReleased: a stuck hold with
// one line on a pool whose books disagree is left alone, whichever of its
// lines that is (here the first: A1 sorts before Z9), since the run moves
// no stock on a high-risk pool.
func TestMultiLineStuckHoldOnAHighRiskPoolIsNotReleased(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "Z9", 10)
	r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "multi",
		Items: []inventory.Item{{SKU: "Z9", Quantity: 1}, {SKU: "A1", Quantity: 2}}})
	require.NoError(t, err)
	b.strand(t, r.ID, time.Hour)
	_, err = b.pool.Exec(ctx, `UPDATE stock SET available = available - 1, sold = sold + 1 WHERE sku = 'A1' AND pool = 'main'`)
	require.NoError(t, err)
	a1, z9 := counters(b.stock(t, "A1", "main")), counters(b.stock(t, "Z9", "main"))

	run := run(t, svc)
	require.EqualValues(t, 2, run.HighRisk)
	require.Zero(t, run.AutoFixed)
	require.Equal(t, string(inventory.StatusHeld), b.status(t, r.ID), "not released: one of its lines is on a high-risk pool")
	require.Equal(t, a1, counters(b.stock(t, "A1", "main")))
	require.Equal(t, z9, counters(b.stock(t, "Z9", "main")), "not even its line on the clean pool")
}

// TestUnitsOutOfBalancePausePool: with the database's own checks bypassed
// (as only a superuser can), a held seat made available behind its hold's
// back is found: the pool is paused, the finding names the stray seat and
// both sides of the books, and no stock moves.
func TestUnitsOutOfBalancePausePool(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	pos := []int32{1, 2, 3}
	var plan []stock.UnitSpec
	for i := range pos {
		plan = append(plan, stock.UnitSpec{ID: fmt.Sprintf("A-%d", pos[i]), Group: "A", Position: &pos[i]})
	}
	_, _, err := b.inv.AddUnitsOnce(ctx, idempotency.NewKey("ops", "plan"), stock.UnitsChange{SKU: "SHOW", Reason: "plan", Actor: "ops", Units: plan})
	require.NoError(t, err)
	h, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h", Items: []inventory.Item{{SKU: "SHOW", Units: []string{"A-2"}}}})
	require.NoError(t, err)
	require.Empty(t, run(t, svc).Findings.All(), "the books balance")

	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`) // no triggers
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE units SET status = 'available', reservation_id = NULL WHERE sku = 'SHOW' AND id = 'A-2'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE units SET status = 'held', reservation_id = $1 WHERE sku = 'SHOW' AND id = 'A-3'`, h.ID)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	require.NoError(t, err)
	conn.Release()
	before := counters(b.stock(t, "SHOW", "main"))

	r := run(t, svc)
	require.EqualValues(t, 1, r.HighRisk)
	f := r.Findings.HighRisk[0]
	require.Equal(t, reconcile.KindCountersVsUnits, f.Kind)
	require.Equal(t, "paused; no stock moved", f.Action)
	d := details(t, f)
	require.Equal(t, []any{"A-3"}, d["stray"], "held by a hold without a record of it")
	require.Equal(t, stock.StockPaused, b.stock(t, "SHOW", "main").Status)
	require.Equal(t, before, counters(b.stock(t, "SHOW", "main")))

	// Put it back as it was (the test's own cleanup checks the books).
	conn, err = b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE units SET status = 'available', reservation_id = NULL WHERE sku = 'SHOW' AND id = 'A-3'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE units SET status = 'held', reservation_id = $1 WHERE sku = 'SHOW' AND id = 'A-2'`, h.ID)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	require.NoError(t, err)
}
