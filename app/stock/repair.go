package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Lift resumes a paused pool, gated: see Service.Lift.
type Lift struct {
	SwitchRequest
	// Force resumes the pool even though its books disagree: recorded in
	// the ledger's reason and raised as a critical alert.
	Force bool
}

// Lifted is a resumed pool's stock and the books its gate read.
type Lifted struct {
	Stock Stock
	Books Books
	// Paused is the pause the resume lifted (nil when the pool was on
	// sale): who paused it, with which key, why (a protection rule's
	// pause names its rule) and when.
	Paused *Pause
}

// Pause is one pause of a pool, as its ledger row records it.
type Pause struct {
	Actor    string    `json:"actor"`
	ActorKey *string   `json:"actor_key"`
	Reason   *string   `json:"reason"`
	At       time.Time `json:"at"`
}

// lastPause reads the latest pause of a pool, or nil when there is none.
func lastPause(ctx context.Context, q *db.Queries, sku, location, pool string) (*Pause, error) {
	r, err := q.LedgerLastPause(ctx, sku, location, pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the last pause of %s/%s/%s: %w", sku, location, pool, err)
	}
	return &Pause{Actor: r.Actor, ActorKey: r.ActorKey, Reason: r.Reason, At: r.At}, nil
}

// Lift resumes a paused pool after checking its books in the same
// transaction: the row is locked, then its counters are compared with its
// ledger and its holds' lines. While they disagree the pool stays paused
// and the answer is 409 books_unbalanced with the difference per counter,
// unless Force, which resumes it anyway, says so in the ledger row and
// raises a critical alert naming who forced it. A reason is required.
func (s *Service) Lift(ctx context.Context, l Lift) (Lifted, error) {
	w := l.SwitchRequest
	if w.Pool == "" {
		w.Pool = MainPool
	}
	w.Location = locationOr(w.Location)
	if err := w.validate(); err != nil {
		return Lifted{}, err
	}
	out, err := inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Lifted, error) {
		var out Lifted
		q := db.New(tx)
		books, err := booksLocked(ctx, q, w.SKU, w.Location, w.Pool)
		if err != nil {
			return Lifted{}, err
		}
		out.Books = books
		if books.Status == StockPaused {
			if out.Paused, err = lastPause(ctx, q, w.SKU, w.Location, w.Pool); err != nil {
				return Lifted{}, err
			}
		}
		if !books.Balanced() && !l.Force {
			d := books.Difference()
			return Lifted{}, &domain.Error{Code: domain.CodeBooksUnbalanced, SKU: w.SKU, Pool: w.Pool, Location: w.Location, Extra: books.problem(),
				Detail: fmt.Sprintf("the books of %s (pool %s) do not balance (counters minus ledger: total %+d, available %+d, reserved %+d, sold %+d; "+
					"reserved %d against %d held, sold %d against %d confirmed%s%s%s): the pool stays paused. Repair them (POST /v1/skus/%s/repair), "+
					"or resume with \"force\": true and a reason",
					w.SKU, w.Pool, d.Total, d.Available, d.Reserved, d.Sold, books.Counters.Reserved, books.LinesHeld,
					books.Counters.Sold, books.LinesConfirmed, books.promiseClause(), books.transitClause(), books.unitsClause(), w.SKU)}
		}
		if w.Pool != MainPool {
			terms, err := q.CampaignHoldTermsShared(ctx, w.Pool)
			if err == nil && !terms.Open {
				return Lifted{}, &domain.Error{Code: domain.CodeCampaignNotActive, SKU: w.SKU, Pool: w.Pool,
					Detail: fmt.Sprintf("campaign %q is %s: its pool stays paused", w.Pool, terms.Status)}
			}
		}
		forced := l.Force && !books.Balanced()
		if forced {
			w.Reason = "forced, books unbalanced: " + w.Reason
		}
		if err := setStatusTx(ctx, q, w, StockOnSale); err != nil {
			return Lifted{}, err
		}
		out.Stock, err = stockOf(ctx, q, w.SKU)
		return out, err
	})
	if err != nil {
		return Lifted{}, err
	}
	if l.Force && !out.Books.Balanced() && s.cfg.Alert != nil {
		details := out.Books.problem()
		details["actor"], details["actor_key"], details["reason"], details["refs"] = w.Actor, domain.KeyName(ctx), w.Reason, w.Refs
		s.cfg.Alert(context.WithoutCancel(ctx), Alert{
			Kind: "forced_resume", Subject: PoolSubject(w.SKU, w.Location, w.Pool), SKU: w.SKU, Location: w.Location, Pool: w.Pool, Details: details,
			Summary: fmt.Sprintf("%s resumed %s (pool %s) with force although its books do not balance (%s). "+
				"It sells until the next reconciliation pauses it again: repair the books (POST /v1/skus/%s/repair, preview with dry_run) "+
				"and resume it without force.", w.Actor, w.SKU, w.Pool, w.Reason, w.SKU),
		})
	}
	return out, nil
}

// Repair targets: which side of a pool's books is taken as right.
const (
	RepairToLedger   = "ledger"
	RepairToCounters = "counters"
)

// RepairRequest asks to close the gap between a pool's counters and its
// ledger.
type RepairRequest struct {
	SKU, Location, Pool string
	// To is RepairToLedger (set the counters from the ledger) or
	// RepairToCounters (one ledger row that accepts the counters).
	To     string
	Reason string
	Actor  string
	DryRun bool
	// Refs name what the repair fixes (order refs, hold ids, ledger ids,
	// a ticket), stored on its ledger row.
	Refs []string
	// ExpectedDifference, when set on an apply, is the difference its
	// preview showed: the repair is refused (409 preview_stale, with the
	// difference it would write now) unless it is still the one it
	// writes, so a repair never writes more than the person saw.
	ExpectedDifference *Counters
}

// Repaired is a repair's answer: the counters before and after, the
// difference the repair writes (to the counters for RepairToLedger, as its
// one ledger row for RepairToCounters), and whether it was applied.
type Repaired struct {
	SKU        string   `json:"sku"`
	Location   string   `json:"location"`
	Pool       string   `json:"pool"`
	Before     Counters `json:"before"`
	After      Counters `json:"after"`
	Difference Counters `json:"difference"`
	// Transfers are the transfers in transit to the row whose quantity,
	// received or lost were not what their own ledger rows say (changed
	// by hand): the repair restores them from those rows.
	Transfers []TransferRepair `json:"transfers,omitempty"`
	Applied   bool             `json:"applied"`
}

// TransferRepair is one transfer a repair restores: its numbers before
// and after.
type TransferRepair struct {
	ID     uuid.UUID      `json:"id"`
	Before TransferCounts `json:"before"`
	After  TransferCounts `json:"after"`
}

// TransferCounts are a transfer's units: sent, received, written off.
type TransferCounts struct {
	Quantity int64 `json:"quantity"`
	Received int64 `json:"received"`
	Lost     int64 `json:"lost"`
}

// transfersToRestore locks the transfers in transit to a row and returns
// those whose numbers are not their ledger rows', restored, and what all
// of them carry once restored. A transfer whose ledger rows cannot be its
// numbers (none, or more delivered than sent) cannot be restored: the
// repair is refused, naming it.
func transfersToRestore(ctx context.Context, q *db.Queries, sku, location, pool string) ([]TransferRepair, int64, error) {
	rows, err := q.TransfersToRowAgainstLedger(ctx, sku, location, pool)
	if err != nil {
		return nil, 0, fmt.Errorf("read the transfers in transit to %s/%s/%s: %w", sku, location, pool, err)
	}
	var out []TransferRepair
	var inTransit int64
	for _, t := range rows {
		before := TransferCounts{Quantity: t.Quantity, Received: t.Received, Lost: t.Lost}
		after := TransferCounts{Quantity: t.LedgerQuantity, Received: t.LedgerReceived, Lost: t.LedgerLost}
		if after.Quantity < 1 || after.Received < 0 || after.Lost < 0 || after.Received+after.Lost >= after.Quantity {
			return nil, 0, &domain.Error{Code: domain.CodeBooksUnbalanced, SKU: sku, Pool: pool, Location: location,
				Extra: map[string]any{"transfer_id": t.ID, "transfer": before, "ledger": after},
				Detail: fmt.Sprintf("transfer %s is in transit to %s, but its ledger rows there (sent %d, received %d, lost %d) are not a transfer "+
					"still on its way: a repair cannot restore it; find what changed it", t.ID, location, after.Quantity, after.Received, after.Lost)}
		}
		inTransit += after.Quantity - after.Received - after.Lost
		if after != before {
			out = append(out, TransferRepair{ID: t.ID, Before: before, After: after})
		}
	}
	return out, inTransit, nil
}

func (r RepairRequest) validate() error {
	if err := domain.ValidName("sku", r.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("pool", r.Pool); err != nil {
		return err
	}
	if err := domain.ValidName("location", r.Location); err != nil {
		return err
	}
	if r.To != RepairToLedger && r.To != RepairToCounters {
		return domain.Invalid("to must be %q (set the counters from the ledger) or %q (accept the counters in the ledger), not %q",
			RepairToLedger, RepairToCounters, r.To)
	}
	if r.Reason == "" {
		return domain.Invalid("reason is required: why the books are repaired this way")
	}
	if err := domain.ValidRefs("refs", r.Refs); err != nil {
		return err
	}
	return domain.ValidText("reason", r.Reason, domain.MaxTextLength)
}

// Repair closes the gap between a pool's counters and its ledger, one side
// taken as right: RepairToLedger sets the counters to what the ledger sums
// to (with a ledger row of kind repair and no deltas, recording who and
// why); RepairToCounters writes one ledger row of kind repair whose deltas
// are the counters minus the ledger. The row is locked and its books read
// before anything is decided; with DryRun nothing is written. It changes
// only the side the caller named, by exactly the gap: it never adds stock
// of its own accord. Counters the ledger sums to that no stock row may
// have (negative, or a total that is not the sum) are refused (409
// books_unbalanced). A pool whose counters and ledger agree is answered
// with a zero difference and not applied. The pool's status is left as it
// is: resume it afterwards (the resume's gate checks the books again).
func (s *Service) Repair(ctx context.Context, r RepairRequest) (Repaired, error) {
	if r.Pool == "" {
		r.Pool = MainPool
	}
	r.Location = locationOr(r.Location)
	if err := r.validate(); err != nil {
		return Repaired{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Repaired, error) {
		q := db.New(tx)
		out, row, err := planRepair(ctx, q, r)
		if err != nil || r.DryRun || out.Difference.Zero() && len(out.Transfers) == 0 {
			return out, err
		}
		if err := writeRepair(ctx, q, r, out, row); err != nil {
			return Repaired{}, err
		}
		out.Applied = true
		return out, nil
	})
}

// planRepair reads the books of r's row, locked, and works out the
// repair: what it changes, the ledger row it writes (for a repair to the
// counters) and the transfers in transit it restores; or why it is refused.
func planRepair(ctx context.Context, q *db.Queries, r RepairRequest) (Repaired, db.LedgerAppendParams, error) {
	var row db.LedgerAppendParams
	books, err := booksLocked(ctx, q, r.SKU, r.Location, r.Pool)
	if err != nil {
		return Repaired{}, row, err
	}
	out := Repaired{SKU: r.SKU, Location: r.Location, Pool: r.Pool, Before: books.Counters, After: books.Counters}
	if err := repairsUnits(r, books); err != nil {
		return Repaired{}, row, err
	}
	switch r.To {
	case RepairToLedger:
		if !books.Ledger.balanced() || !books.promiseAllowed(books.Ledger) {
			l := books.Ledger
			return Repaired{}, row, &domain.Error{Code: domain.CodeBooksUnbalanced, SKU: r.SKU, Pool: r.Pool, Location: r.Location, Extra: books.problem(),
				Detail: fmt.Sprintf("the ledger of %s (pool %s) sums to counters no stock row may have (total %d, available %d, reserved %d, sold %d, "+
					"backordered %d under its backorder policy): repair to the counters instead, then adjust",
					r.SKU, r.Pool, l.Total, l.Available, l.Reserved, l.Sold, l.Backordered)}
		}
		out.After = books.Ledger
		out.Difference = books.Ledger.minus(books.Counters)
	case RepairToCounters:
		d := books.Difference()
		out.Difference = d
		row = db.LedgerAppendParams{DeltaTotal: d.Total, DeltaAvailable: d.Available, DeltaReserved: d.Reserved, DeltaSold: d.Sold,
			DeltaQualityControl: d.QualityControl, DeltaDamaged: d.Damaged, DeltaSafetyStock: d.SafetyStock, DeltaIncoming: d.Incoming,
			DeltaShort: d.Short, DeltaBackordered: d.Backordered}
	}
	// The transfers in transit to the row are restored from their own
	// ledger rows; what they carry then must be the incoming the
	// repair leaves.
	restored, inTransit, err := transfersToRestore(ctx, q, r.SKU, r.Location, r.Pool)
	if err != nil {
		return Repaired{}, row, err
	}
	// The open inbound lines at the row are expected too.
	inbound, err := q.InboundOutstandingAt(ctx, r.SKU, r.Location, r.Pool)
	if err != nil {
		return Repaired{}, row, fmt.Errorf("sum the inbound lines open at %s/%s/%s: %w", r.SKU, r.Location, r.Pool, err)
	}
	inTransit += inbound
	out.Transfers = restored
	if out.After.Incoming != inTransit {
		return Repaired{}, row, &domain.Error{Code: domain.CodeBooksUnbalanced, SKU: r.SKU, Pool: r.Pool, Location: r.Location, Extra: books.problem(),
			Detail: fmt.Sprintf("a repair of %s (pool %s) at %s to the %s would leave incoming %d, but its transfers in transit carry %d "+
				"by their own ledger rows (and the open inbound lines at it): repair to the %s instead, or find what changed them",
				r.SKU, r.Pool, r.Location, r.To, out.After.Incoming, inTransit, otherSide(r.To))}
	}
	if !r.DryRun && r.ExpectedDifference != nil && *r.ExpectedDifference != out.Difference {
		e, d := *r.ExpectedDifference, out.Difference
		return Repaired{}, row, &domain.Error{Code: domain.CodePreviewStale, SKU: r.SKU, Location: r.Location, Pool: r.Pool,
			Extra: map[string]any{"expected_difference": e, "difference": d, "before": out.Before, "after": out.After},
			Detail: fmt.Sprintf("the books of %s (pool %s) at %s moved since the preview: it showed a difference of %s; "+
				"the repair would now write %s. Nothing changed: preview again",
				r.SKU, r.Pool, r.Location, e, d)}
	}
	return out, row, nil
}

// writeRepair writes the repair planned (out, row): the transfers
// restored, the counters set, and its ledger row.
func writeRepair(ctx context.Context, q *db.Queries, r RepairRequest, out Repaired, row db.LedgerAppendParams) error {
	for _, t := range out.Transfers {
		if err := q.TransferRestore(ctx, db.TransferRestoreParams{ID: t.ID, Quantity: t.After.Quantity, Received: t.After.Received, Lost: t.After.Lost}); err != nil {
			return fmt.Errorf("restore transfer %s: %w", t.ID, err)
		}
		r.Refs = append(r.Refs, "transfer "+t.ID.String())
	}
	a := out.After
	if _, err := q.StockRepairSet(ctx, db.StockRepairSetParams{Total: a.Total, Available: a.Available, Reserved: a.Reserved, Sold: a.Sold,
		QualityControl: a.QualityControl, Damaged: a.Damaged, SafetyStock: a.SafetyStock, Incoming: a.Incoming, Short: a.Short,
		Backordered: a.Backordered, Sku: r.SKU, Location: r.Location, Pool: r.Pool}); err != nil {
		return fmt.Errorf("repair %s/%s/%s: %w", r.SKU, r.Location, r.Pool, err)
	}
	row.Sku, row.Location, row.Pool, row.Kind, row.Actor, row.ActorKey = r.SKU, r.Location, r.Pool, string(LedgerRepair), r.Actor, domain.KeyName(ctx)
	row.Reason, row.Ref, row.Refs = domain.Optional(r.Reason), domain.Optional("to "+r.To), r.Refs
	return appendLedger(ctx, q, row)
}

// otherSide is the repair target that is not to.
func otherSide(to string) string {
	if to == RepairToLedger {
		return RepairToCounters
	}
	return RepairToLedger
}

// repairsUnits refuses a repair of a pool of units with an identity whose
// outcome would leave the counters apart from the units by status, which
// the database never commits: to the ledger when the ledger does not sum
// to the units, to the counters when the counters are not the units. The
// units themselves changed, behind the triggers, and only a person who
// puts them back (or finds the ledger or counters wrong) can repair that;
// the refusal says how. A dry run is refused alike: it would show a
// change that can never apply.
func repairsUnits(r RepairRequest, books Books) error {
	if books.Units == nil {
		return nil
	}
	target, side := books.Ledger, "the ledger sums to"
	if r.To == RepairToCounters {
		target, side = books.Counters, "its counters are"
	}
	if books.unitsAgree(target) {
		return nil
	}
	u := books.Units
	return &domain.Error{Code: domain.CodeSerializedPool, SKU: r.SKU, Pool: r.Pool, Extra: books.problem(),
		Detail: fmt.Sprintf("%s (pool %s) is units with an identity, whose counters must be its units by status (available %d, held %d, sold %d), "+
			"but %s available %d, reserved %d, sold %d: a repair to the %s would leave them apart, which the database refuses. "+
			"When its counters are the units, repair to the counters; when its ledger sums to the units, repair to the ledger; "+
			"when neither does, the units were changed behind the triggers: put them back as the ledger last moved them "+
			"(sql/units_against_ledger.sql, or the reconciliation finding's against_ledger, names them), "+
			"then retire or add units through POST /v1/skus/%s/units",
			r.SKU, r.Pool, u.Available, u.Held, u.Sold, side, target.Available, target.Reserved, target.Sold, r.To, r.SKU)}
}

// PoolSwitch pauses or resumes every SKU of one pool: a campaign's switch.
type PoolSwitch struct {
	Pool   string
	On     bool // true resumes (gated like Lift), false pauses
	Force  bool
	Reason string
	Actor  string
}

// PoolSwitched is the stock rows of a pool after a PoolSwitch.
type PoolSwitched struct {
	Pool string `json:"pool"`
	// Changed counts the rows the switch flipped; the rest were already so.
	Changed int          `json:"changed"`
	SKUs    []PoolStatus `json:"skus"`
}

// PoolStatus is one SKU's row in a pool, at one location.
type PoolStatus struct {
	SKU          string  `json:"sku"`
	Location     string  `json:"location"`
	Status       string  `json:"status"`
	PausedReason *string `json:"paused_reason"`
}

// SwitchPool pauses (On false) or resumes (On true) every stock row of
// campaign w.Pool in one transaction, rows locked in (sku, pool) order. A
// resume is gated like Lift, all or nothing: while the books of any row
// disagree nothing is resumed (409 books_unbalanced naming its SKU) unless
// Force; a campaign that does not take holds now stays paused. Rows
// already in the asked state are left as they are.
func (s *Service) SwitchPool(ctx context.Context, w PoolSwitch) (PoolSwitched, error) {
	if err := domain.ValidName("campaign", w.Pool); err != nil {
		return PoolSwitched{}, err
	}
	if w.Pool == MainPool {
		return PoolSwitched{}, domain.Invalid("main is not a campaign: pause its SKUs one by one, or stop sales")
	}
	if w.Reason == "" {
		return PoolSwitched{}, domain.Invalid("reason is required")
	}
	if err := domain.ValidText("reason", w.Reason, domain.MaxTextLength); err != nil {
		return PoolSwitched{}, err
	}
	var forced []Books
	out, err := inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (out PoolSwitched, err error) {
		out, forced, err = switchPoolTx(ctx, db.New(tx), w)
		return out, err
	})
	if err != nil {
		return PoolSwitched{}, err
	}
	for _, b := range forced {
		if s.cfg.Alert == nil {
			break
		}
		details := b.problem()
		details["actor"], details["actor_key"], details["reason"] = w.Actor, domain.KeyName(ctx), w.Reason
		s.cfg.Alert(context.WithoutCancel(ctx), Alert{
			Kind: "forced_resume", Subject: PoolSubject(b.SKU, b.Location, b.Pool), SKU: b.SKU, Location: b.Location, Pool: b.Pool, Details: details,
			Summary: fmt.Sprintf("%s resumed campaign %s with force although the books of %s do not balance (%s): repair them "+
				"(POST /v1/skus/%s/repair, preview with dry_run).", w.Actor, w.Pool, b.SKU, w.Reason, b.SKU),
		})
	}
	return out, nil
}

// switchPoolTx pauses or resumes every row of campaign w.Pool, each with
// its books checked under its lock, and returns the pool's rows as they
// are then, with the books of the rows resumed by force.
func switchPoolTx(ctx context.Context, q *db.Queries, w PoolSwitch) (PoolSwitched, []Books, error) {
	out := PoolSwitched{Pool: w.Pool, SKUs: []PoolStatus{}}
	// The campaign's row first, shared, as an end takes it (for update)
	// before it pauses the pool: a resume never reads "active" and then
	// resumes rows the end paused meanwhile.
	terms, err := q.CampaignHoldTermsShared(ctx, w.Pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil, &domain.Error{Code: domain.CodeUnknownCampaign, Detail: fmt.Sprintf("campaign %q does not exist", w.Pool)}
	}
	if err != nil {
		return out, nil, fmt.Errorf("read campaign %s: %w", w.Pool, err)
	}
	if w.On && !terms.Open {
		return out, nil, &domain.Error{Code: domain.CodeCampaignNotActive, Pool: w.Pool,
			Detail: fmt.Sprintf("campaign %q is %s and not taking holds: its pools stay paused", w.Pool, terms.Status)}
	}
	places, err := q.StockPoolRows(ctx, w.Pool)
	if err != nil {
		return out, nil, fmt.Errorf("list the pool of %s: %w", w.Pool, err)
	}
	var forced []Books
	for _, place := range places {
		changed, force, err := switchPlace(ctx, q, w, place.Sku, place.Location)
		if err != nil {
			return out, nil, err
		}
		if changed {
			out.Changed++
		}
		if force != nil {
			forced = append(forced, *force)
		}
	}
	rows, err := q.StockListByPool(ctx, w.Pool)
	if err != nil {
		return out, nil, fmt.Errorf("read the pool of %s: %w", w.Pool, err)
	}
	for _, r := range rows {
		out.SKUs = append(out.SKUs, PoolStatus{SKU: r.Sku, Location: r.Location, Status: r.Status, PausedReason: r.PausedReason})
	}
	return out, forced, nil
}

// switchPlace pauses or resumes campaign w.Pool's row of sku at location,
// its books checked under its lock; it reports whether it changed it, and
// the books when it resumed it by force.
func switchPlace(ctx context.Context, q *db.Queries, w PoolSwitch, sku, location string) (bool, *Books, error) {
	books, err := booksLocked(ctx, q, sku, location, w.Pool)
	if err != nil {
		return false, nil, err
	}
	want := StockPaused
	if w.On {
		want = StockOnSale
	}
	if books.Status == want {
		return false, nil, nil
	}
	sw := SwitchRequest{SKU: sku, Location: location, Pool: w.Pool, Reason: w.Reason, Actor: w.Actor}
	var forced *Books
	if w.On && !books.Balanced() {
		if !w.Force {
			return false, nil, &domain.Error{Code: domain.CodeBooksUnbalanced, SKU: sku, Pool: w.Pool, Location: location, Extra: books.problem(),
				Detail: fmt.Sprintf("the books of %s (pool %s) do not balance: no pool of campaign %s was resumed. "+
					"Repair them (POST /v1/skus/%s/repair), or resume with \"force\": true", sku, w.Pool, w.Pool, sku)}
		}
		sw.Reason = "forced, books unbalanced: " + w.Reason
		forced = &books
	}
	return true, forced, setStatusTx(ctx, q, sw, want)
}

// PoolSubject is an alert's subject for one stock row: sku:A1/main at the
// default location (as before locations existed), sku:A1@berlin/main
// elsewhere.
func PoolSubject(sku, location, pool string) string {
	if location == DefaultLocation || location == "" {
		return "sku:" + sku + "/" + pool
	}
	return "sku:" + sku + "@" + location + "/" + pool
}
