package stock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// Supplier inbound: a purchase order or shipment notice from a supplier
// (its reference, the location it arrives at, the day it is expected)
// with lines of sku, pool and quantity. Creating one adds each line to
// incoming at its stock row (ledger kind inbound); receipts, per line and
// in parts, move units from incoming into available there (inbound_receive);
// closing it writes off what never came (inbound_short, recorded per line as
// short); cancelling it before any receipt takes its incoming back
// (inbound_cancel). Every step locks the notice first, then its stock rows
// in (sku, location, pool) order, and writes its ledger rows (ref: the
// notice's id) in the same transaction. Per (sku, location, pool),
// incoming is what the transfers in transit to it and the open lines at it
// have not yet delivered or written off (invariant 8 of
// docs/internals/ARCHITECTURE.md, the view incoming_expected, checked by
// reconciliation).

// Inbound statuses.
const (
	InboundOpen      = "open"
	InboundReceived  = "received"
	InboundClosed    = "closed"
	InboundCancelled = "cancelled"
)

// MaxInboundPage bounds one page of inbound notices; MaxInboundLines one
// notice's lines.
const (
	MaxInboundPage  = 1000
	MaxInboundLines = 100
)

// dateLayout is how an expected day is written: YYYY-MM-DD.
const dateLayout = time.DateOnly

// Inbound is an inbound notice as the API shows it.
type Inbound struct {
	ID          uuid.UUID `json:"id"`
	SupplierRef string    `json:"supplier_ref"`
	Location    string    `json:"location"`
	// ExpectedOn is the day it is expected (YYYY-MM-DD).
	ExpectedOn string `json:"expected_on"`
	Status     string `json:"status"`
	// Late is true while it is open past the day it was expected.
	Late         bool          `json:"late"`
	Lines        []InboundLine `json:"lines"`
	Reason       string        `json:"reason"`
	Actor        string        `json:"actor"`
	ActorKey     *string       `json:"actor_key"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	FinishedAt   *time.Time    `json:"finished_at"`
	FinishedBy   *string       `json:"finished_by"`
	FinishReason *string       `json:"finish_reason"`
}

// InboundLine is one line of a notice: what was ordered, what arrived,
// what a close wrote off, and what is still expected (incoming while the
// notice is open).
type InboundLine struct {
	SKU         string `json:"sku"`
	Pool        string `json:"pool"`
	Quantity    int64  `json:"quantity"`
	Received    int64  `json:"received"`
	Short       int64  `json:"short"`
	Outstanding int64  `json:"outstanding"`
}

func newInbound(i db.Inbound, lines []db.InboundLine) Inbound {
	out := Inbound{ID: i.ID, SupplierRef: i.SupplierRef, Location: i.Location, ExpectedOn: i.ExpectedOn.Time.Format(dateLayout),
		Status: i.Status, Reason: i.Reason, Actor: i.Actor, ActorKey: i.ActorKey, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt,
		FinishedAt: i.FinishedAt, FinishedBy: i.FinishedBy, FinishReason: i.FinishReason, Lines: []InboundLine{}}
	out.Late = i.Status == InboundOpen && i.ExpectedOn.Time.Before(today())
	for _, l := range lines {
		o := int64(0)
		if i.Status == InboundOpen {
			o = l.Quantity - l.Received - l.Short
		}
		out.Lines = append(out.Lines, InboundLine{SKU: l.Sku, Pool: l.Pool, Quantity: l.Quantity, Received: l.Received, Short: l.Short, Outstanding: o})
	}
	return out
}

// today is the current day in UTC, at midnight.
func today() time.Time { return time.Now().UTC().Truncate(24 * time.Hour) }

// NewInbound asks to expect stock from a supplier: lines of a SKU's pool
// (empty: main) and a quantity, at Location (empty: default) on
// ExpectedOn (YYYY-MM-DD, today or later).
type NewInbound struct {
	SupplierRef string
	Location    string
	ExpectedOn  string
	Lines       []NewInboundLine
	Reason      string
	Actor       string

	expected time.Time
}

// NewInboundLine is one line of a NewInbound.
type NewInboundLine struct {
	SKU, Pool string
	Quantity  int64
}

func (n *NewInbound) validate() error {
	n.Location = locationOr(n.Location)
	if err := domain.ValidName("supplier_ref", n.SupplierRef); err != nil {
		return err
	}
	if err := domain.ValidName("location", n.Location); err != nil {
		return err
	}
	day, err := time.Parse(dateLayout, n.ExpectedOn)
	if err != nil {
		return domain.Invalid("expected_on must be a day, YYYY-MM-DD, not %q", n.ExpectedOn)
	}
	if day.Before(today()) {
		return domain.Invalid("expected_on %s is in the past: a notice is expected today (%s) or later", n.ExpectedOn, today().Format(dateLayout))
	}
	n.expected = day
	if n.Reason == "" {
		n.Reason = "expected from " + n.SupplierRef
	}
	if err := domain.ValidText("reason", n.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	if len(n.Lines) < 1 || len(n.Lines) > MaxInboundLines {
		return domain.Invalid("lines must hold 1 to %d lines, not %d", MaxInboundLines, len(n.Lines))
	}
	seen := map[string]bool{}
	for i := range n.Lines {
		l := &n.Lines[i]
		if l.Pool == "" {
			l.Pool = MainPool
		}
		if err := domain.ValidName("sku", l.SKU); err != nil {
			return err
		}
		if err := domain.ValidName("pool", l.Pool); err != nil {
			return err
		}
		if l.Quantity < 1 || l.Quantity > MaxAdjustment {
			return domain.Invalid("lines[%d].quantity must be a whole number from 1 to %d", i, MaxAdjustment)
		}
		if k := RowKey(l.SKU, n.Location, l.Pool); seen[k] {
			return domain.Invalid("lines name %s (pool %s) twice: one line per SKU and pool", l.SKU, l.Pool)
		} else {
			seen[k] = true
		}
	}
	// Lock order: (sku, location, pool) byte-wise, at one location.
	slices.SortFunc(n.Lines, func(a, b NewInboundLine) int {
		return cmp.Or(cmp.Compare(a.SKU, b.SKU), cmp.Compare(a.Pool, b.Pool))
	})
	return nil
}

// CreateInboundOnce records a notice at most once per key (see
// idempotency.Do): each line's quantity becomes incoming at its stock row.
// A line of main makes its row if there is none; a line of another pool
// needs the pool's row at the location (unknown_pool); a pool of units
// with an identity is refused (serialized_pool: its units are added by
// name), and so is the pool of a campaign that has ended (campaign_ended).
func (s *Service) CreateInboundOnce(ctx context.Context, key idempotency.Key, n NewInbound) (Inbound, bool, error) {
	if err := n.validate(); err != nil {
		return Inbound{}, false, err
	}
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Inbound, error) { return createInboundTx(ctx, tx, n) })
}

func createInboundTx(ctx context.Context, tx pgx.Tx, n NewInbound) (Inbound, error) {
	q := db.New(tx)
	if err := inboundPlace(ctx, q, n.Location); err != nil {
		return Inbound{}, err
	}
	skus, locs, pools := make([]string, len(n.Lines)), make([]string, len(n.Lines)), make([]string, len(n.Lines))
	for i, l := range n.Lines {
		if err := notSerializedElsewhere(ctx, q, l.SKU, n.Location, l.Pool); err != nil {
			return Inbound{}, err
		}
		if l.Pool == MainPool {
			if _, err := q.StockCreate(ctx, l.SKU, n.Location, l.Pool); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return Inbound{}, fmt.Errorf("create %s/%s/%s: %w", l.SKU, n.Location, l.Pool, err)
			}
		}
		skus[i], locs[i], pools[i] = l.SKU, n.Location, l.Pool
	}
	if err := lockInboundRows(ctx, q, skus, locs, pools); err != nil {
		return Inbound{}, err
	}
	for _, l := range n.Lines {
		if err := refuseEnded(ctx, q, l.SKU, n.Location, l.Pool); err != nil {
			return Inbound{}, err
		}
	}
	id := uuid.Must(uuid.NewV7())
	i, err := q.InboundCreate(ctx, db.InboundCreateParams{ID: id, SupplierRef: n.SupplierRef, Location: n.Location,
		ExpectedOn: pgtype.Date{Time: n.expected, Valid: true}, Reason: n.Reason, Actor: n.Actor, ActorKey: domain.KeyName(ctx)})
	if err != nil {
		return Inbound{}, fmt.Errorf("record the notice: %w", err)
	}
	for _, l := range n.Lines {
		if err := q.InboundLineCreate(ctx, db.InboundLineCreateParams{InboundID: id, Sku: l.SKU, Location: n.Location, Pool: l.Pool, Quantity: l.Quantity}); err != nil {
			return Inbound{}, fmt.Errorf("record the line %s/%s: %w", l.SKU, l.Pool, err)
		}
		if err := moveRow(ctx, q, l.SKU, n.Location, l.Pool, Counters{Incoming: l.Quantity}, LedgerInbound, n.Actor, n.Reason, id.String()); err != nil {
			return Inbound{}, err
		}
	}
	return inboundOf(ctx, q, i)
}

// inboundPlace refuses a notice at a location that does not exist
// (unknown_location) or is inactive (location_inactive): an inactive
// location takes no new stock movements. Notices already open finish
// normally.
func inboundPlace(ctx context.Context, q *db.Queries, location string) error {
	if err := requireLocations(ctx, q, location); err != nil {
		return err
	}
	found, err := q.LocationsGet(ctx, []string{location})
	if err != nil {
		return fmt.Errorf("look up location %s: %w", location, err)
	}
	for _, l := range found {
		if !l.Active {
			return &domain.Error{Code: domain.CodeLocationInactive, Location: l.ID,
				Detail: fmt.Sprintf("location %s is inactive: it expects no new inbound until it is active again (PATCH /v1/locations/%s)", l.ID, l.ID)}
		}
	}
	return nil
}

// lockInboundRows locks the stock rows of a notice's lines in lock order;
// a row that does not exist is unknown_pool (or unknown_sku), a row of
// units with an identity serialized_pool.
func lockInboundRows(ctx context.Context, q *db.Queries, skus, locs, pools []string) error {
	rows, err := q.StockLockForAdjust(ctx, skus, locs, pools)
	if err != nil {
		return fmt.Errorf("lock the rows of a notice: %w", err)
	}
	found := make(map[string]bool, len(rows))
	for _, r := range rows {
		if r.Serialized {
			return errSerialized(r.Sku, r.Pool)
		}
		found[RowKey(r.Sku, r.Location, r.Pool)] = true
	}
	for i := range skus {
		if !found[RowKey(skus[i], locs[i], pools[i])] {
			return errNoPool(ctx, q, skus[i], locs[i], pools[i], true)
		}
	}
	return nil
}

func inboundOf(ctx context.Context, q *db.Queries, i db.Inbound) (Inbound, error) {
	lines, err := q.InboundLines(ctx, i.ID)
	if err != nil {
		return Inbound{}, fmt.Errorf("read the lines of notice %s: %w", i.ID, err)
	}
	return newInbound(i, lines), nil
}

// InboundStep is a receipt (of one line: SKU, Pool, Quantity), close or
// cancel of a notice.
type InboundStep struct {
	ID        uuid.UUID
	SKU, Pool string
	Quantity  int64
	Reason    string
	Actor     string
}

func (st *InboundStep) validReceipt() error {
	if st.Pool == "" {
		st.Pool = MainPool
	}
	if err := domain.ValidName("sku", st.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("pool", st.Pool); err != nil {
		return err
	}
	if st.Quantity < 1 || st.Quantity > MaxAdjustment {
		return domain.Invalid("quantity must be a whole number from 1 to %d: the units of the line that arrived", MaxAdjustment)
	}
	if st.Reason == "" {
		st.Reason = "received"
	}
	return domain.ValidText("reason", st.Reason, domain.MaxTextLength)
}

// ReceiveInbound moves Quantity units of one line of an open notice from
// incoming into available at its location (partial receipts allowed); the
// notice is received once every line arrived whole. More than the line
// still expects is 409 insufficient_incoming; a line the notice does not
// have is 422; a notice not open is 409 inbound_not_open.
func (s *Service) ReceiveInbound(ctx context.Context, st InboundStep) (Inbound, error) {
	if err := st.validReceipt(); err != nil {
		return Inbound{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Inbound, error) { return receiveInboundTx(ctx, tx, st) })
}

// ReceiveInboundOnce is ReceiveInbound at most once per key: a receipt is
// not idempotent by nature, each one receiving more.
func (s *Service) ReceiveInboundOnce(ctx context.Context, key idempotency.Key, st InboundStep) (Inbound, bool, error) {
	if err := st.validReceipt(); err != nil {
		return Inbound{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Inbound, error) { return receiveInboundTx(ctx, tx, st) })
}

func receiveInboundTx(ctx context.Context, tx pgx.Tx, st InboundStep) (Inbound, error) {
	q := db.New(tx)
	i, lines, err := lockInbound(ctx, q, st.ID)
	if err != nil {
		return Inbound{}, err
	}
	at := slices.IndexFunc(lines, func(l db.InboundLine) bool { return l.Sku == st.SKU && l.Pool == st.Pool })
	if at < 0 {
		return Inbound{}, &domain.Error{Code: domain.CodeInvalid, SKU: st.SKU, Pool: st.Pool, Location: i.Location,
			Extra:  map[string]any{"inbound_id": i.ID},
			Detail: fmt.Sprintf("inbound %s has no line of %s (pool %s): a receipt names one of its lines", i.ID, st.SKU, st.Pool)}
	}
	l := lines[at]
	if left := l.Quantity - l.Received - l.Short; st.Quantity > left {
		return Inbound{}, &domain.Error{Code: domain.CodeInsufficientIncoming, SKU: l.Sku, Pool: l.Pool, Location: i.Location,
			Extra: map[string]any{"state": "incoming", "has": left, "requested": st.Quantity, "inbound_id": i.ID},
			Detail: fmt.Sprintf("inbound %s expects %d more of %s (pool %s): %d ordered, %d received, %d to receive: a line cannot receive more than was ordered",
				i.ID, left, l.Sku, l.Pool, l.Quantity, l.Received, st.Quantity)}
	}
	what := "inbound " + i.ID.String()
	land, err := lockLanding(ctx, tx, l.Sku, l.Pool, what, i.Location, i.Location)
	if err != nil {
		return Inbound{}, err
	}
	row, err := lockRow(ctx, q, l.Sku, i.Location, l.Pool)
	if err != nil {
		return Inbound{}, err
	}
	if err := incomingAgrees(ctx, q, row, "inbound_id", i.ID, "inbound"); err != nil {
		return Inbound{}, err
	}
	d := Counters{Total: st.Quantity, Available: st.Quantity, Incoming: -st.Quantity}
	if err := moveRow(ctx, q, l.Sku, i.Location, l.Pool, d, LedgerInboundReceive, st.Actor, st.Reason, i.ID.String()); err != nil {
		return Inbound{}, err
	}
	if err := land.give(ctx, q, st.Quantity, st.Actor, "what "+what+" delivered"); err != nil {
		return Inbound{}, err
	}
	if err := fillBackorders(ctx, q, l.Sku, i.Location, l.Pool, st.Quantity, st.Actor, i.ID.String()); err != nil {
		return Inbound{}, err
	}
	if err := q.InboundLineSet(ctx, db.InboundLineSetParams{InboundID: i.ID, Sku: l.Sku, Pool: l.Pool, Received: l.Received + st.Quantity, Short: l.Short}); err != nil {
		return Inbound{}, fmt.Errorf("record the receipt of %s/%s: %w", l.Sku, l.Pool, err)
	}
	lines[at].Received += st.Quantity
	status := InboundReceived
	for _, l := range lines {
		if l.Received < l.Quantity {
			status = InboundOpen
		}
	}
	return setInbound(ctx, q, i, status, st)
}

// CloseInbound ends an open notice: whatever its lines never received is
// written off from incoming (ledger kind inbound_short, never silently)
// and recorded as each line's short. A reason is required.
func (s *Service) CloseInbound(ctx context.Context, st InboundStep) (Inbound, error) {
	if err := validReason(st.Reason); err != nil {
		return Inbound{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Inbound, error) { return endInboundTx(ctx, tx, st, InboundClosed) })
}

// CloseInboundOnce is CloseInbound at most once per key: a retry of a close
// that succeeded gets its answer again rather than inbound_not_open.
func (s *Service) CloseInboundOnce(ctx context.Context, key idempotency.Key, st InboundStep) (Inbound, bool, error) {
	if err := validReason(st.Reason); err != nil {
		return Inbound{}, false, err
	}
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Inbound, error) { return endInboundTx(ctx, tx, st, InboundClosed) })
}

// CancelInbound takes an open notice's incoming back before any receipt
// (409 inbound_partly_received after one: close it instead). A reason is
// required.
func (s *Service) CancelInbound(ctx context.Context, st InboundStep) (Inbound, error) {
	if err := validReason(st.Reason); err != nil {
		return Inbound{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Inbound, error) {
		return endInboundTx(ctx, tx, st, InboundCancelled)
	})
}

// CancelInboundOnce is CancelInbound at most once per key.
func (s *Service) CancelInboundOnce(ctx context.Context, key idempotency.Key, st InboundStep) (Inbound, bool, error) {
	if err := validReason(st.Reason); err != nil {
		return Inbound{}, false, err
	}
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Inbound, error) { return endInboundTx(ctx, tx, st, InboundCancelled) })
}

// endInboundTx closes (status closed) or cancels (cancelled) an open
// notice: each line's outstanding units leave incoming at its row.
func endInboundTx(ctx context.Context, tx pgx.Tx, st InboundStep, status string) (Inbound, error) {
	q := db.New(tx)
	i, lines, err := lockInbound(ctx, q, st.ID)
	if err != nil {
		return Inbound{}, err
	}
	kind, reason := LedgerInboundShort, "never received: "+st.Reason
	if status == InboundCancelled {
		kind, reason = LedgerInboundCancel, st.Reason
		for _, l := range lines {
			if l.Received > 0 {
				return Inbound{}, &domain.Error{Code: domain.CodeInboundPartlyReceived, SKU: l.Sku, Pool: l.Pool, Location: i.Location,
					Extra:  map[string]any{"inbound_id": i.ID, "received": l.Received},
					Detail: fmt.Sprintf("inbound %s received %d of %s (pool %s) already: close it instead (what never came is written off)", i.ID, l.Received, l.Sku, l.Pool)}
			}
		}
	}
	var skus, locs, pools []string
	for _, l := range lines {
		if l.Quantity-l.Received-l.Short > 0 {
			skus, locs, pools = append(skus, l.Sku), append(locs, i.Location), append(pools, l.Pool)
		}
	}
	rows, err := q.StockLockForAdjust(ctx, skus, locs, pools)
	if err != nil {
		return Inbound{}, fmt.Errorf("lock the rows of inbound %s: %w", i.ID, err)
	}
	for _, r := range rows {
		if err := incomingAgrees(ctx, q, r, "inbound_id", i.ID, "inbound"); err != nil {
			return Inbound{}, err
		}
	}
	for _, l := range lines {
		left := l.Quantity - l.Received - l.Short
		if left == 0 {
			continue
		}
		if err := moveRow(ctx, q, l.Sku, i.Location, l.Pool, Counters{Incoming: -left}, kind, st.Actor, reason, i.ID.String()); err != nil {
			return Inbound{}, err
		}
		if status == InboundClosed {
			if err := q.InboundLineSet(ctx, db.InboundLineSetParams{InboundID: i.ID, Sku: l.Sku, Pool: l.Pool, Received: l.Received, Short: l.Short + left}); err != nil {
				return Inbound{}, fmt.Errorf("record the shortfall of %s/%s: %w", l.Sku, l.Pool, err)
			}
		}
	}
	return setInbound(ctx, q, i, status, st)
}

// lockInbound locks an open notice and reads its lines.
func lockInbound(ctx context.Context, q *db.Queries, id uuid.UUID) (db.Inbound, []db.InboundLine, error) {
	i, err := q.InboundLock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Inbound{}, nil, domain.Missing("inbound")
	}
	if err != nil {
		return db.Inbound{}, nil, fmt.Errorf("lock inbound %s: %w", id, err)
	}
	if i.Status != InboundOpen {
		return db.Inbound{}, nil, &domain.Error{Code: domain.CodeInboundNotOpen, Location: i.Location,
			Extra:  map[string]any{"inbound_id": i.ID, "inbound_status": i.Status},
			Detail: fmt.Sprintf("inbound %s is %s: only an open notice is received, closed or cancelled", i.ID, i.Status)}
	}
	lines, err := q.InboundLines(ctx, i.ID)
	if err != nil {
		return db.Inbound{}, nil, fmt.Errorf("read the lines of inbound %s: %w", i.ID, err)
	}
	return i, lines, nil
}

func setInbound(ctx context.Context, q *db.Queries, i db.Inbound, status string, st InboundStep) (Inbound, error) {
	r, err := q.InboundSet(ctx, db.InboundSetParams{ID: i.ID, Status: status, FinishedBy: &st.Actor, FinishReason: &st.Reason})
	if err != nil {
		return Inbound{}, fmt.Errorf("record inbound %s: %w", i.ID, err)
	}
	return inboundOf(ctx, q, r)
}

// GetInbound returns notice id.
func (s *Service) GetInbound(ctx context.Context, id uuid.UUID) (Inbound, error) {
	q := db.New(s.pool)
	i, err := q.InboundGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Inbound{}, domain.Missing("inbound")
	}
	if err != nil {
		return Inbound{}, fmt.Errorf("read inbound %s: %w", id, err)
	}
	return inboundOf(ctx, q, i)
}

// InboundPage is a page of notices, by the day they are expected;
// NextCursor, when not nil, asks for the next.
type InboundPage struct {
	Inbound    []Inbound `json:"inbound"`
	NextCursor *string   `json:"next_cursor"`
}

// InboundFilter chooses notices: by status, location, a SKU on a line,
// after the notice Cursor names.
type InboundFilter struct {
	Status   string
	Location string
	SKU      string
	Cursor   *uuid.UUID
	Limit    int
}

// ListInbound lists notices by the day they are expected, the earliest
// first (with status open: what is due, the late ones first).
func (s *Service) ListInbound(ctx context.Context, f InboundFilter) (InboundPage, error) {
	switch f.Status {
	case "", InboundOpen, InboundReceived, InboundClosed, InboundCancelled:
	default:
		return InboundPage{}, domain.Invalid("status must be open, received, closed or cancelled, not %q", f.Status)
	}
	for what, v := range map[string]string{"sku": f.SKU, "location": f.Location} {
		if v != "" {
			if err := domain.ValidName(what, v); err != nil {
				return InboundPage{}, err
			}
		}
	}
	if f.Limit < 1 || f.Limit > MaxInboundPage {
		return InboundPage{}, domain.Invalid("limit must be from 1 to %d", MaxInboundPage)
	}
	q := db.New(s.pool)
	if f.Cursor != nil {
		if _, err := q.InboundGet(ctx, *f.Cursor); errors.Is(err, pgx.ErrNoRows) {
			return InboundPage{}, ErrCursor
		} else if err != nil {
			return InboundPage{}, fmt.Errorf("read the cursor's notice: %w", err)
		}
	}
	rows, err := q.InboundPage(ctx, db.InboundPageParams{Status: domain.Optional(f.Status), Location: domain.Optional(f.Location),
		Sku: domain.Optional(f.SKU), AfterID: f.Cursor, Lim: int32(f.Limit + 1)})
	if err != nil {
		return InboundPage{}, fmt.Errorf("list inbound: %w", err)
	}
	page := InboundPage{Inbound: []Inbound{}}
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		next := rows[f.Limit-1].ID.String()
		page.NextCursor = &next
	}
	ids := make([]uuid.UUID, len(rows))
	for k, r := range rows {
		ids[k] = r.ID
	}
	lines, err := q.InboundLinesOf(ctx, ids)
	if err != nil {
		return InboundPage{}, fmt.Errorf("read the lines of inbound: %w", err)
	}
	byID := map[uuid.UUID][]db.InboundLine{}
	for _, l := range lines {
		byID[l.InboundID] = append(byID[l.InboundID], l)
	}
	for _, r := range rows {
		page.Inbound = append(page.Inbound, newInbound(r, byID[r.ID]))
	}
	return page, nil
}
