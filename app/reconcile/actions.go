package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/enqueue"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
)

// stockKey names one stock row.
type stockKey struct{ sku, location, pool string }

// risk is one stock row out of balance, with what each check saw.
type risk struct {
	stockKey
	lines   *db.StockLinesMismatchRow
	ledger  *db.StockLedgerCheckRow
	units   *db.StockUnitsMismatchRow
	transit *db.StockTransitMismatchRow
}

// risks pairs the checks' rows by stock row, in (sku, location, pool)
// order.
func risks(snap snapshot) []*risk {
	byKey := map[stockKey]*risk{}
	var out []*risk
	get := func(k stockKey) *risk {
		r, ok := byKey[k]
		if !ok {
			r = &risk{stockKey: k}
			byKey[k] = r
			out = append(out, r)
		}
		return r
	}
	for i := range snap.lines {
		l := &snap.lines[i]
		get(stockKey{l.Sku, l.Location, l.Pool}).lines = l
	}
	for i := range snap.ledger {
		l := &snap.ledger[i]
		get(stockKey{l.Sku, l.Location, l.Pool}).ledger = l
	}
	for i := range snap.units {
		u := &snap.units[i]
		get(stockKey{u.Sku, u.Location, u.Pool}).units = u
	}
	for i := range snap.transit {
		t := &snap.transit[i]
		get(stockKey{t.Sku, t.Location, t.Pool}).transit = t
	}
	slices.SortFunc(out, func(a, b *risk) int {
		return strings.Compare(a.sku+"\x00"+a.location+"\x00"+a.pool, b.sku+"\x00"+b.location+"\x00"+b.pool)
	})
	return out
}

func (r *risk) linesDetails() map[string]any {
	l := r.lines
	return map[string]any{
		"counters": map[string]int64{"reserved": l.Reserved, "sold": l.Sold},
		"lines":    map[string]int64{"held": l.LinesHeld, "confirmed": l.LinesConfirmed},
		// difference is the counters minus the lines, per counter.
		"difference": map[string]int64{"reserved": l.Reserved - l.LinesHeld, "sold": l.Sold - l.LinesConfirmed},
	}
}

// maxUnitsNamed bounds the units a units finding names beside its stray
// ones: those whose status or pool is not what their pool's ledger last
// said of them.
const maxUnitsNamed = 100

// unitsDetails is a units finding's details: the counters beside the
// units by status, the stray units (held or sold by a hold that does not
// hold or did not buy them), and the units the pool's ledger places
// elsewhere (against_ledger: each unit's status and pool beside what the
// last ledger row naming it says, at most maxUnitsNamed of them, and
// against_ledger_count, all of them).
func (r *risk) unitsDetails(ctx context.Context, q *db.Queries) (map[string]any, error) {
	u := r.units
	off, err := q.UnitsAgainstLedger(ctx, db.UnitsAgainstLedgerParams{Lim: maxUnitsNamed, Sku: r.sku, Location: r.location, Pool: r.pool})
	if err != nil {
		return nil, fmt.Errorf("units of %s/%s/%s against the ledger: %w", r.sku, r.location, r.pool, err)
	}
	named := make([]map[string]any, len(off))
	count := int64(0)
	for i, o := range off {
		named[i] = map[string]any{"id": o.ID, "status": o.Status, "pool": o.Pool, "ledger_says": o.LedgerSays,
			"ledger_kind": o.LedgerKind, "ledger_id": o.LedgerID}
		count = o.Total
	}
	return map[string]any{
		"counters":             map[string]int64{"available": u.Available, "reserved": u.Reserved, "sold": u.Sold},
		"units":                map[string]int64{"available": u.UnitsAvailable, "held": u.UnitsHeld, "sold": u.UnitsSold},
		"stray":                u.Stray,
		"against_ledger":       named,
		"against_ledger_count": count,
	}, nil
}

func (r *risk) ledgerDetails() map[string]any {
	l := r.ledger
	counters := stock.Counters{Total: l.Total, Available: l.Available, Reserved: l.Reserved, Sold: l.Sold,
		QualityControl: l.QualityControl, Damaged: l.Damaged, SafetyStock: l.SafetyStock, Incoming: l.Incoming, Short: l.Short}
	ledger := stock.Counters{Total: l.LedgerTotal, Available: l.LedgerAvailable, Reserved: l.LedgerReserved, Sold: l.LedgerSold,
		QualityControl: l.LedgerQualityControl, Damaged: l.LedgerDamaged, SafetyStock: l.LedgerSafetyStock, Incoming: l.LedgerIncoming,
		Short: l.LedgerShort}
	return map[string]any{
		"stock_version":      l.Version,
		"checkpoint_version": l.CheckpointVersion,
		"counters":           counters,
		"ledger":             ledger,
		// difference is the counters minus the ledger, per counter.
		"difference": stock.Counters{Total: l.Total - l.LedgerTotal, Available: l.Available - l.LedgerAvailable,
			Reserved: l.Reserved - l.LedgerReserved, Sold: l.Sold - l.LedgerSold,
			QualityControl: l.QualityControl - l.LedgerQualityControl, Damaged: l.Damaged - l.LedgerDamaged,
			SafetyStock: l.SafetyStock - l.LedgerSafetyStock, Incoming: l.Incoming - l.LedgerIncoming, Short: l.Short - l.LedgerShort},
	}
}

func (r *risk) transitDetails() map[string]any {
	t := r.transit
	return map[string]any{
		"incoming":   t.Incoming,
		"in_transit": t.InTransit,
		// difference is incoming minus what the transfers in transit to
		// the row and the open inbound lines at it have not yet delivered
		// or written off.
		"difference": t.Incoming - t.InTransit,
	}
}

// maxAffected bounds the held and confirmed holds a books alert names.
const maxAffected = 20

// pauseHighRisk pauses every stock row whose counters disagree with its
// lines, its ledger or its units, raises a critical alert for it and
// records its findings, one transaction per row. It moves no stock. Each
// row stands alone: a row whose pause fails (its row lock not had in time,
// say) still gets its findings and its alert, saying it was not paused, in
// a transaction of its own, and the rows after it are paused as usual; the
// errors come back joined once every row was seen to. It returns the rows
// it found, so that no stuck hold on them is released.
func (s *Service) pauseHighRisk(ctx context.Context, runID int64, snap snapshot) (map[stockKey]bool, error) {
	found := map[stockKey]bool{}
	var errs []error
	for _, r := range risks(snap) {
		found[r.stockKey] = true
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.pauseTx(ctx, tx, runID, r, nil) })
		if err == nil {
			continue
		}
		failed := fmt.Errorf("high risk %s, not paused: %w", rowName(r.stockKey), err)
		s.log.ErrorContext(ctx, "reconciliation could not pause a pool out of balance", "run_id", runID, "sku", r.sku,
			"location", r.location, "pool", r.pool, "err", err)
		errs = append(errs, failed)
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.pauseTx(ctx, tx, runID, r, err) }); err != nil {
			errs = append(errs, fmt.Errorf("record high risk %s: %w", rowName(r.stockKey), err))
		}
	}
	return found, errors.Join(errs...)
}

// pauseTx pauses one stock row out of balance (unless it is paused
// already), raises its alert and records its findings. With notPaused, the
// error a first attempt to pause it met, it records the findings and the
// alert alone, saying the pool is still on sale.
func (s *Service) pauseTx(ctx context.Context, tx pgx.Tx, runID int64, r *risk, notPaused error) error {
	q := db.New(tx)
	checks, details, err := r.details(ctx, q, runID)
	if err != nil {
		return err
	}
	var action, what string
	switch {
	case notPaused != nil:
		details["not_paused"] = notPaused.Error()
		action = "NOT paused (" + notPaused.Error() + "): pause it by hand; no stock moved"
		what = "could not pause the pool (" + notPaused.Error() + "): it is still on sale; pause it by hand (POST /v1/skus/" +
			r.sku + "/pause), then"
	default:
		st, err := q.StockLock(ctx, r.sku, r.location, r.pool)
		switch {
		case errors.Is(err, pgx.ErrNoRows) && r.transit != nil:
			// Transfers in transit to a row that does not exist: nothing
			// to pause; the finding and the alert say where.
			action, what = "alerted; no stock row to pause, no stock moved", "has no stock row there to pause:"
		case err != nil:
			return fmt.Errorf("lock stock row: %w", err)
		default:
			action, what = "left paused ("+domain.Value(st.PausedReason)+"); no stock moved", "paused the pool:"
			if st.Status == stock.StockOnSale {
				reason := fmt.Sprintf("reconciliation run %d: books out of balance (%s)", runID, strings.Join(checks, ", "))
				if err := stock.PauseTx(ctx, tx, stock.SwitchRequest{SKU: r.sku, Location: r.location, Pool: r.pool, Reason: reason, Actor: Actor}); err != nil {
					return err
				}
				action = "paused; no stock moved"
			}
		}
	}
	_, err = s.alerts.RaiseTx(ctx, tx, alerts.Raise{
		Level:    alerts.Critical,
		Kind:     KindBooksOutOfBalance,
		Subject:  subject(r.stockKey),
		SKU:      r.sku,
		Location: r.location,
		Pool:     r.pool,
		Details:  details,
		Action: fmt.Sprintf("Reconciliation run %d found the counters of %s (pool %s%s) out of balance (%s) and %s "+
			"no new holds, confirms and releases still work, no stock was moved. Compare the counters with the lines and the ledger "+
			"(the alert's details have both sides, the difference per counter, the units that disagree and the live holds on the pool; "+
			"the console's SKU page /ops/skus/%s has its ledger), and correct the cause. Then, on that page: under \"Repair the books\", "+
			"Preview a repair to the ledger (or to the counters, for stock found on a shelf) and press \"Apply the repair\"; "+
			"then Resume the pool with a reason. The resume resolves this alert. (Without the console: stockhold repair, then "+
			"POST /v1/skus/%s/resume.)",
			runID, r.sku, r.pool, where(r.location), strings.Join(checks, ", "), what, url.PathEscape(r.sku), r.sku),
	})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		kind    string
		found   bool
		details any
	}{
		{KindCountersVsLines, r.lines != nil, details["lines"]},
		{KindCountersVsLedger, r.ledger != nil, details["ledger"]},
		{KindCountersVsUnits, r.units != nil, details["units"]},
		{KindIncomingVsTransfers, r.transit != nil, details["transit"]},
	} {
		if !f.found {
			continue
		}
		d := f.details.(map[string]any)
		if notPaused != nil {
			d["not_paused"] = notPaused.Error()
		}
		if err := addFinding(ctx, q, runID, ClassHighRisk, f.kind, finding{sku: r.sku, location: r.location, pool: r.pool, details: d}, action); err != nil {
			return err
		}
	}
	return nil
}

// details returns the checks a pool at risk failed and the details its
// alert and findings carry: each side of each check, and the live holds on
// the pool.
func (r *risk) details(ctx context.Context, q *db.Queries, runID int64) (checks []string, details map[string]any, err error) {
	details = map[string]any{"run_id": runID}
	if r.lines != nil {
		checks = append(checks, "counters vs lines")
		details["lines"] = r.linesDetails()
	}
	if r.ledger != nil {
		checks = append(checks, "counters vs ledger")
		details["ledger"] = r.ledgerDetails()
	}
	if r.units != nil {
		checks = append(checks, "counters vs units")
		ud, err := r.unitsDetails(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		details["units"] = ud
	}
	if r.transit != nil {
		checks = append(checks, "incoming vs transfers")
		details["transit"] = r.transitDetails()
	}
	affected, err := q.ReservationsLiveOnPool(ctx, db.ReservationsLiveOnPoolParams{Sku: r.sku, Location: r.location, Pool: r.pool, Lim: maxAffected})
	if err != nil {
		return nil, nil, fmt.Errorf("list the holds on %s/%s/%s: %w", r.sku, r.location, r.pool, err)
	}
	holds := make([]map[string]any, len(affected))
	for i, h := range affected {
		holds[i] = map[string]any{"id": h.ID, "order_ref": h.OrderRef, "status": h.Status, "quantity": h.Quantity}
	}
	details["affected_holds"] = holds
	return checks, details, nil
}

// releaseStuck releases the stuck holds within the repair bound through the
// one release path, in transactions of releaseBatch holds each recording
// its findings. Holds with a line on a high-risk row are left alone: this
// run moves no stock there. Per SKU, the stuck holds it did not try to
// release get one finding that waits for a person, and a warning alert.
func (s *Service) releaseStuck(ctx context.Context, runID int64, snap snapshot, risky map[stockKey]bool) error {
	var (
		ids       []uuid.UUID
		skusOf    = map[uuid.UUID][]string{}
		attempted = map[string]int64{}
		onRisky   = map[string]int64{}
	)
	for _, h := range snap.stuck {
		skus := slices.Compact(slices.Clone(h.Skus)) // sorted by the query
		skip := false
		for i := range h.Skus {
			skip = skip || risky[stockKey{h.Skus[i], h.Locations[i], h.Pools[i]}]
		}
		if skip {
			for _, sku := range skus {
				onRisky[sku]++
			}
			continue
		}
		ids = append(ids, h.ReservationID)
		skusOf[h.ReservationID] = skus
		for _, sku := range skus {
			attempted[sku]++
		}
	}

	// DueOnly: a hold is expired only if, once locked, it is still held
	// and past its expiry.
	how := inventory.Outcome{
		Status: inventory.StatusExpired, Kind: stock.LedgerExpire, Actor: Actor, DueOnly: true,
		Reason: fmt.Sprintf("hold stuck past its expiry (reconciliation run %d)", runID),
	}
	released := map[string]int64{}
	for batch := range slices.Chunk(ids, releaseBatch) {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			done, err := s.inv.ReleaseTx(ctx, tx, batch, how)
			if err != nil || len(done) == 0 {
				return err
			}
			for _, id := range done {
				for _, sku := range skusOf[id] {
					released[sku]++
				}
			}
			return db.New(tx).ReconcileFindingsAddReleased(ctx, runID, "released as expired (ledger kind expire, actor "+Actor+")", done)
		})
		if err != nil {
			return fmt.Errorf("release stuck holds: %w", err)
		}
	}

	return s.recordWaiting(ctx, runID, snap, attempted, released, onRisky)
}

// recordWaiting records, per SKU, the stuck holds a run left for a person
// (beyond the repair limit, or on a high-risk pool), with a warning alert.
func (s *Service) recordWaiting(ctx context.Context, runID int64, snap snapshot, attempted, released, onRisky map[string]int64) error {
	for _, c := range snap.stuckPerSKU {
		waiting := c.Holds - attempted[c.Sku]
		if waiting <= 0 {
			continue
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			details := map[string]any{
				"stuck": c.Holds, "released": released[c.Sku], "waiting": waiting,
				"on_high_risk_pool": onRisky[c.Sku], "repair_limit": s.cfg.RepairLimit,
				"grace_seconds": s.cfg.StuckGrace.Seconds(),
			}
			action := fmt.Sprintf("waiting for a person: %d stuck holds not released (at most %d per SKU per run, none on a high-risk pool)",
				waiting, s.cfg.RepairLimit)
			if err := addFinding(ctx, db.New(tx), runID, ClassAutoFix, KindStuckHoldsWaiting, finding{sku: c.Sku, details: details}, action); err != nil {
				return err
			}
			_, err := s.alerts.RaiseTx(ctx, tx, alerts.Raise{
				Level:   alerts.Warning,
				Kind:    "stuck_holds_waiting",
				Subject: "sku:" + c.Sku,
				SKU:     c.Sku,
				Details: details,
				Action: fmt.Sprintf("SKU %s has %d holds held well past their expiry: neither their expiry jobs nor the sweeper released them. "+
					"Reconciliation releases at most %d per SKU per run (STOCKHOLD_RECONCILE_REPAIR_LIMIT) and none on a paused, out-of-balance pool. "+
					"Find out why expiry is not working (job dashboard, worker logs); the next runs release the rest within the same bound.",
					c.Sku, c.Holds, s.cfg.RepairLimit),
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("record stuck holds of %s: %w", c.Sku, err)
		}
	}
	return nil
}

// retryJobs re-enqueues the discarded jobs whose work is still needed, at
// most MaxRetries times each, with an alert; a rollback request marked
// failed is set back to running so that its batch has work to do. Each job
// takes one transaction, which first checks that the job is still
// discarded (nobody retried or removed it since the snapshot).
func (s *Service) retryJobs(ctx context.Context, runID int64, jobs []db.JobsDiscardedNeededRow) error {
	for _, j := range jobs {
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.retryTx(ctx, tx, runID, j) }); err != nil {
			return fmt.Errorf("retry job %d (%s): %w", j.ID, j.Kind, err)
		}
	}
	return nil
}

func (s *Service) retryTx(ctx context.Context, tx pgx.Tx, runID int64, j db.JobsDiscardedNeededRow) error {
	q := db.New(tx)
	locked, err := q.JobDiscardedLock(ctx, j.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock job: %w", err)
	}
	retries := max(int(locked.MaxAttempts)-enqueue.MaxAttempts, 0)
	details := map[string]any{
		"job_kind": j.Kind, "attempt": locked.Attempt, "max_attempts": locked.MaxAttempts,
		"retries_before": retries, "finalized_at": j.FinalizedAt,
		"last_error": rawOrNull(j.LastError), "args": rawOrNull(string(j.Args)),
	}
	if j.RollbackID != 0 {
		details["rollback_id"], details["rollback_status"] = j.RollbackID, j.RollbackStatus
	}
	subject := fmt.Sprintf("job:%d", j.ID)
	if retries >= MaxRetries {
		action := fmt.Sprintf("waiting for a person: reconciliation retried it %d times already", retries)
		if err := addFinding(ctx, q, runID, ClassRetry, KindJobRetriesExhausted, finding{jobID: j.ID, details: details}, action); err != nil {
			return err
		}
		_, err := s.alerts.RaiseTx(ctx, tx, alerts.Raise{
			Level: alerts.Critical, Kind: "job_retries_exhausted", Subject: subject, Details: details,
			Action: fmt.Sprintf("The %s job %d keeps failing: reconciliation retried it %d times and leaves it to you. "+
				"Read its errors in the job dashboard (/ops/jobs/) or river_job, fix the cause, then retry it from the dashboard.",
				j.Kind, j.ID, retries),
		})
		return err
	}

	action := fmt.Sprintf("re-enqueued (retry %d of %d)", retries+1, MaxRetries)
	if j.Kind == "rollback_batch" && j.RollbackStatus == rollbacks.StatusFailed {
		reopened, err := rollbacks.ReopenTx(ctx, tx, j.RollbackID)
		if err != nil {
			return err
		}
		if reopened {
			action += fmt.Sprintf("; rollback request %d set back to running", j.RollbackID)
		}
	}
	if _, err := s.jobs.JobRetryTx(ctx, tx, j.ID); err != nil {
		return fmt.Errorf("re-enqueue: %w", err)
	}
	if err := addFinding(ctx, q, runID, ClassRetry, KindJobRetried, finding{jobID: j.ID, details: details}, action); err != nil {
		return err
	}
	_, err = s.alerts.RaiseTx(ctx, tx, alerts.Raise{
		Level: alerts.Warning, Kind: "job_retried", Subject: subject, Details: details,
		Action: fmt.Sprintf("Reconciliation run %d re-enqueued the discarded %s job %d (retry %d of %d), since its work is still needed. "+
			"Check in the job dashboard (/ops/jobs/) that it completes; if it fails again, fix the cause from its errors.",
			runID, j.Kind, j.ID, retries+1, MaxRetries),
	})
	return err
}

// finding is what one finding is about.
type finding struct {
	sku, location, pool string
	jobID               int64
	reservationID       uuid.UUID
	details             map[string]any
}

func addFinding(ctx context.Context, q *db.Queries, runID int64, class, kind string, f finding, action string) error {
	details, err := json.Marshal(f.details)
	if err != nil {
		return fmt.Errorf("finding details: %w", err)
	}
	p := db.ReconcileFindingAddParams{RunID: runID, Class: class, Kind: kind, Details: details, Action: action}
	if f.sku != "" {
		p.Sku = &f.sku
	}
	if f.pool != "" {
		p.Pool = &f.pool
	}
	if f.location != "" {
		p.Location = &f.location
	}
	if f.jobID != 0 {
		p.JobID = &f.jobID
	}
	if f.reservationID != uuid.Nil {
		p.ReservationID = &f.reservationID
	}
	if err := q.ReconcileFindingAdd(ctx, p); err != nil {
		return fmt.Errorf("record %s finding: %w", kind, err)
	}
	return nil
}

// rawOrNull passes JSON text through as is, and anything else as null.
func rawOrNull(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

// subject is an alert's subject for a stock row (as inventory names them).
func subject(k stockKey) string { return "sku:" + rowName(k) }

// rowName names a stock row in messages: sku/pool at the default location
// (as before locations existed), sku@location/pool elsewhere.
func rowName(k stockKey) string {
	if k.location == stock.DefaultLocation {
		return k.sku + "/" + k.pool
	}
	return k.sku + "@" + k.location + "/" + k.pool
}

// where is ", at location" for a message about a row away from the default
// location.
func where(location string) string {
	if location == stock.DefaultLocation {
		return ""
	}
	return ", at " + location
}
