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
	"github.com/stockhold/stockhold/app/idempotency"
)

// Transfers move stock between locations. Creating one takes its units
// out of available at From (they leave its total) and shows them as
// incoming at To; receipts (partial ones too) move them into available
// there; closing it writes off what never arrived as lost in transit
// (ledger kind loss, at To); cancelling it before any receipt gives them
// back to From. Every step locks the transfer first, then its stock rows
// in (sku, location, pool) order, and writes its ledger rows (ref: the
// transfer's id) in the same transaction. At every moment, per (sku, to,
// pool), incoming is the open transfers' quantity less what was received
// or lost (invariant 8 of docs/internals/ARCHITECTURE.md, checked by
// reconciliation).

// Transfer statuses.
const (
	TransferInTransit = "in_transit"
	TransferReceived  = "received"
	TransferClosed    = "closed"
	TransferCancelled = "cancelled"
)

// MaxTransfersPage bounds one page of transfers.
const MaxTransfersPage = 1000

// Transfer is a transfer as the API shows it.
type Transfer struct {
	ID       uuid.UUID `json:"id"`
	SKU      string    `json:"sku"`
	Pool     string    `json:"pool"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Quantity int64     `json:"quantity"`
	Received int64     `json:"received"`
	Lost     int64     `json:"lost"`
	// InTransit is what has neither arrived nor been written off.
	InTransit int64     `json:"in_transit"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason"`
	Actor     string    `json:"actor"`
	ActorKey  *string   `json:"actor_key"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// AgeSeconds is how long it has been (or was) on its way.
	AgeSeconds   int64      `json:"age_seconds"`
	FinishedAt   *time.Time `json:"finished_at"`
	FinishedBy   *string    `json:"finished_by"`
	FinishReason *string    `json:"finish_reason"`
}

func newTransfer(t db.Transfer) Transfer {
	end := time.Now()
	if t.FinishedAt != nil {
		end = *t.FinishedAt
	}
	return Transfer{ID: t.ID, SKU: t.Sku, Pool: t.Pool, From: t.FromLocation, To: t.ToLocation, Quantity: t.Quantity,
		Received: t.Received, Lost: t.Lost, InTransit: t.Quantity - t.Received - t.Lost, Status: t.Status,
		Reason: t.Reason, Actor: t.Actor, ActorKey: t.ActorKey, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		AgeSeconds: int64(end.Sub(t.CreatedAt).Seconds()), FinishedAt: t.FinishedAt, FinishedBy: t.FinishedBy, FinishReason: t.FinishReason}
}

// NewTransfer asks to send Quantity units of a SKU's pool (empty: main)
// from one location to another.
type NewTransfer struct {
	SKU, Pool, From, To string
	Quantity            int64
	Reason              string
	Actor               string
}

func (n *NewTransfer) validate() error {
	if n.Pool == "" {
		n.Pool = MainPool
	}
	for _, check := range []error{domain.ValidName("sku", n.SKU), domain.ValidName("pool", n.Pool),
		domain.ValidName("from", n.From), domain.ValidName("to", n.To)} {
		if check != nil {
			return check
		}
	}
	switch {
	case n.From == n.To:
		return domain.Invalid("from and to are both %s: a transfer goes from one location to another", n.From)
	case n.Quantity < 1 || n.Quantity > MaxAdjustment:
		return domain.Invalid("quantity must be a whole number from 1 to %d", MaxAdjustment)
	}
	return validReason(n.Reason)
}

// CreateTransferOnce sends a transfer at most once per key (see
// idempotency.Do): its units leave available at From (409
// insufficient_available when short) and are incoming at To, whose stock
// row is created if it has none.
func (s *Service) CreateTransferOnce(ctx context.Context, key idempotency.Key, n NewTransfer) (Transfer, bool, error) {
	if err := n.validate(); err != nil {
		return Transfer{}, false, err
	}
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Transfer, error) { return createTransferTx(ctx, tx, n) })
}

func createTransferTx(ctx context.Context, tx pgx.Tx, n NewTransfer) (Transfer, error) {
	q := db.New(tx)
	if err := transferPlaces(ctx, q, n.From, n.To); err != nil {
		return Transfer{}, err
	}
	if err := notSerializedElsewhere(ctx, q, n.SKU, n.To, n.Pool); err != nil {
		return Transfer{}, err
	}
	// The stock leaves a row that exists; the row it goes to is made if
	// it has none.
	if _, err := q.StockGet(ctx, n.SKU, n.From, n.Pool); errors.Is(err, pgx.ErrNoRows) {
		return Transfer{}, errNoPool(ctx, q, n.SKU, n.From, n.Pool, true)
	} else if err != nil {
		return Transfer{}, fmt.Errorf("read %s/%s/%s: %w", n.SKU, n.From, n.Pool, err)
	}
	if _, err := q.StockCreate(ctx, n.SKU, n.To, n.Pool); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Transfer{}, fmt.Errorf("create %s/%s/%s: %w", n.SKU, n.To, n.Pool, err)
	}
	rows, err := lockPair(ctx, q, n.SKU, n.Pool, n.From, n.To)
	if err != nil {
		return Transfer{}, err
	}
	if err := refuseEnded(ctx, q, n.SKU, n.From, n.Pool); err != nil {
		return Transfer{}, err
	}
	from := rows[n.From]
	if from.Available < n.Quantity {
		return Transfer{}, &domain.Error{Code: domain.CodeInsufficientAvailable, SKU: n.SKU, Pool: n.Pool, Location: n.From,
			Extra:  map[string]any{"state": StateAvailable, "has": from.Available, "requested": n.Quantity},
			Detail: fmt.Sprintf("SKU %q (pool %s) has %d available at %s, %d to transfer to %s", n.SKU, n.Pool, from.Available, n.From, n.Quantity, n.To)}
	}
	id := uuid.Must(uuid.NewV7())
	t, err := q.TransferCreate(ctx, db.TransferCreateParams{ID: id, Sku: n.SKU, Pool: n.Pool, FromLocation: n.From, ToLocation: n.To,
		Quantity: n.Quantity, Reason: n.Reason, Actor: n.Actor, ActorKey: domain.KeyName(ctx)})
	if err != nil {
		return Transfer{}, fmt.Errorf("record the transfer: %w", err)
	}
	// The two rows move in lock order.
	steps := []struct {
		location string
		kind     LedgerKind
		d        Counters
	}{
		{n.From, LedgerTransferOut, Counters{Total: -n.Quantity, Available: -n.Quantity}},
		{n.To, LedgerTransferIn, Counters{Incoming: n.Quantity}},
	}
	if n.To < n.From {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, st := range steps {
		if err := moveRow(ctx, q, n.SKU, st.location, n.Pool, st.d, st.kind, n.Actor, n.Reason, id.String()); err != nil {
			return Transfer{}, err
		}
	}
	return newTransfer(t), nil
}

// transferPlaces refuses a transfer from or to a location that does not
// exist (unknown_location) or is inactive (location_inactive): an inactive
// location takes no new stock movements, as it takes no new holds. The
// transfers already on their way finish normally.
func transferPlaces(ctx context.Context, q *db.Queries, from, to string) error {
	if err := requireLocations(ctx, q, from, to); err != nil {
		return err
	}
	found, err := q.LocationsGet(ctx, []string{from, to})
	if err != nil {
		return fmt.Errorf("look up locations: %w", err)
	}
	for _, l := range found {
		if !l.Active {
			return &domain.Error{Code: domain.CodeLocationInactive, Location: l.ID,
				Extra:  map[string]any{"from": from, "to": to},
				Detail: fmt.Sprintf("location %s is inactive: no transfer leaves or reaches it until it is active again (PATCH /v1/locations/%s)", l.ID, l.ID)}
		}
	}
	return nil
}

// lockPair locks a SKU's pool at two locations in lock order, and returns
// them by location; a row of units with an identity is refused (a pool of
// units lives at one location).
func lockPair(ctx context.Context, q *db.Queries, sku, pool, a, b string) (map[string]db.Stock, error) {
	rows, err := q.StockLockForAdjust(ctx, []string{sku, sku}, []string{a, b}, []string{pool, pool})
	if err != nil {
		return nil, fmt.Errorf("lock %s/%s at %s and %s: %w", sku, pool, a, b, err)
	}
	out := make(map[string]db.Stock, 2)
	for _, r := range rows {
		if r.Serialized {
			return nil, errSerialized(sku, pool)
		}
		out[r.Location] = r
	}
	for _, l := range []string{a, b} {
		if _, ok := out[l]; !ok {
			return nil, errNoPool(ctx, q, sku, l, pool, true)
		}
	}
	return out, nil
}

// TransferStep is a receipt, close or cancel of a transfer.
type TransferStep struct {
	ID uuid.UUID
	// Quantity is a receipt's units.
	Quantity int64
	Reason   string
	Actor    string
}

// ReceiveTransfer moves Quantity units of a transfer in transit into
// available at its destination (partial receipts allowed); the transfer is
// received once all of it arrived. More than is still in transit is 409
// insufficient_incoming; a transfer not in transit is 409
// transfer_not_in_transit.
func (s *Service) ReceiveTransfer(ctx context.Context, st TransferStep) (Transfer, error) {
	if err := st.validReceipt(); err != nil {
		return Transfer{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Transfer, error) { return receiveTx(ctx, tx, st) })
}

// ReceiveTransferOnce is ReceiveTransfer at most once per key: a receipt
// is not idempotent by nature, each one receiving more.
func (s *Service) ReceiveTransferOnce(ctx context.Context, key idempotency.Key, st TransferStep) (Transfer, bool, error) {
	if err := st.validReceipt(); err != nil {
		return Transfer{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Transfer, error) { return receiveTx(ctx, tx, st) })
}

func (st *TransferStep) validReceipt() error {
	if st.Quantity < 1 || st.Quantity > MaxAdjustment {
		return domain.Invalid("quantity must be a whole number from 1 to %d: the units that arrived", MaxAdjustment)
	}
	if st.Reason == "" {
		st.Reason = "received"
	}
	return domain.ValidText("reason", st.Reason, domain.MaxTextLength)
}

func receiveTx(ctx context.Context, tx pgx.Tx, st TransferStep) (Transfer, error) {
	q := db.New(tx)
	t, err := lockTransfer(ctx, q, st.ID)
	if err != nil {
		return Transfer{}, err
	}
	left := t.Quantity - t.Received - t.Lost
	if st.Quantity > left {
		return Transfer{}, &domain.Error{Code: domain.CodeInsufficientIncoming, SKU: t.Sku, Pool: t.Pool, Location: t.ToLocation,
			Extra: map[string]any{"state": "incoming", "has": left, "requested": st.Quantity, "transfer_id": t.ID},
			Detail: fmt.Sprintf("transfer %s has %d in transit (%d sent, %d received, %d lost), %d to receive: it cannot receive more than it carries",
				t.ID, left, t.Quantity, t.Received, t.Lost, st.Quantity)}
	}
	land, err := lockLanding(ctx, tx, t.Sku, t.Pool, "transfer "+t.ID.String(), t.ToLocation, t.ToLocation)
	if err != nil {
		return Transfer{}, err
	}
	row, err := lockRow(ctx, q, t.Sku, t.ToLocation, t.Pool)
	if err != nil {
		return Transfer{}, err
	}
	if err := transitAgrees(ctx, q, t, row); err != nil {
		return Transfer{}, err
	}
	d := Counters{Total: st.Quantity, Available: st.Quantity, Incoming: -st.Quantity}
	if err := moveRow(ctx, q, t.Sku, t.ToLocation, t.Pool, d, LedgerReceive, st.Actor, st.Reason, t.ID.String()); err != nil {
		return Transfer{}, err
	}
	if err := land.give(ctx, q, st.Quantity, st.Actor, "what transfer "+t.ID.String()+" delivered"); err != nil {
		return Transfer{}, err
	}
	if err := fillBackorders(ctx, q, t.Sku, t.ToLocation, t.Pool, st.Quantity, st.Actor, t.ID.String()); err != nil {
		return Transfer{}, err
	}
	status := TransferInTransit
	if t.Received+st.Quantity == t.Quantity {
		status = TransferReceived
	}
	return setTransfer(ctx, q, t, t.Received+st.Quantity, t.Lost, status, st)
}

// validReason checks an operator's reason for a move, a transfer, its end
// or a count: required, and text.
func validReason(reason string) error {
	if err := requireReason(reason); err != nil {
		return err
	}
	return domain.ValidText("reason", reason, domain.MaxTextLength)
}

// CloseTransfer ends a transfer in transit: whatever was never received is
// written off as lost in transit at its destination (ledger kind loss,
// never silently). A reason is required.
func (s *Service) CloseTransfer(ctx context.Context, st TransferStep) (Transfer, error) {
	if err := validReason(st.Reason); err != nil {
		return Transfer{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Transfer, error) { return closeTx(ctx, tx, st) })
}

// CloseTransferOnce is CloseTransfer at most once per key: a retry of a
// close that succeeded gets its answer again rather than
// transfer_not_in_transit.
func (s *Service) CloseTransferOnce(ctx context.Context, key idempotency.Key, st TransferStep) (Transfer, bool, error) {
	if err := validReason(st.Reason); err != nil {
		return Transfer{}, false, err
	}
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Transfer, error) { return closeTx(ctx, tx, st) })
}

func closeTx(ctx context.Context, tx pgx.Tx, st TransferStep) (Transfer, error) {
	q := db.New(tx)
	t, err := lockTransfer(ctx, q, st.ID)
	if err != nil {
		return Transfer{}, err
	}
	row, err := lockRow(ctx, q, t.Sku, t.ToLocation, t.Pool)
	if err != nil {
		return Transfer{}, err
	}
	if err := transitAgrees(ctx, q, t, row); err != nil {
		return Transfer{}, err
	}
	lost := t.Quantity - t.Received - t.Lost
	if err := moveRow(ctx, q, t.Sku, t.ToLocation, t.Pool, Counters{Incoming: -lost}, LedgerLoss, st.Actor,
		"lost in transit: "+st.Reason, t.ID.String()); err != nil {
		return Transfer{}, err
	}
	return setTransfer(ctx, q, t, t.Received, t.Lost+lost, TransferClosed, st)
}

// CancelTransfer gives a transfer's units back to where they came from,
// before any receipt (409 transfer_partly_received after one: close it
// instead). A reason is required.
func (s *Service) CancelTransfer(ctx context.Context, st TransferStep) (Transfer, error) {
	if err := validReason(st.Reason); err != nil {
		return Transfer{}, err
	}
	return inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (Transfer, error) { return cancelTx(ctx, tx, st) })
}

// CancelTransferOnce is CancelTransfer at most once per key: a retry of a
// cancel that succeeded gets its answer again rather than
// transfer_not_in_transit.
func (s *Service) CancelTransferOnce(ctx context.Context, key idempotency.Key, st TransferStep) (Transfer, bool, error) {
	if err := validReason(st.Reason); err != nil {
		return Transfer{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Transfer, error) { return cancelTx(ctx, tx, st) })
}

func cancelTx(ctx context.Context, tx pgx.Tx, st TransferStep) (Transfer, error) {
	q := db.New(tx)
	t, err := lockTransfer(ctx, q, st.ID)
	if err != nil {
		return Transfer{}, err
	}
	if t.Received > 0 {
		return Transfer{}, &domain.Error{Code: domain.CodeTransferPartlyReceived, SKU: t.Sku, Pool: t.Pool, Location: t.ToLocation,
			Extra:  map[string]any{"transfer_id": t.ID, "received": t.Received},
			Detail: fmt.Sprintf("transfer %s received %d already: close it instead (what never arrived is written off)", t.ID, t.Received)}
	}
	land, err := lockLanding(ctx, tx, t.Sku, t.Pool, "transfer "+t.ID.String(), t.FromLocation, t.FromLocation, t.ToLocation)
	if err != nil {
		return Transfer{}, err
	}
	rows, err := lockPair(ctx, q, t.Sku, t.Pool, t.FromLocation, t.ToLocation)
	if err != nil {
		return Transfer{}, err
	}
	if err := transitAgrees(ctx, q, t, rows[t.ToLocation]); err != nil {
		return Transfer{}, err
	}
	steps := []struct {
		location string
		d        Counters
	}{
		{t.FromLocation, Counters{Total: t.Quantity, Available: t.Quantity}},
		{t.ToLocation, Counters{Incoming: -t.Quantity}},
	}
	if t.ToLocation < t.FromLocation {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, s := range steps {
		if err := moveRow(ctx, q, t.Sku, s.location, t.Pool, s.d, LedgerTransferCancel, st.Actor, st.Reason, t.ID.String()); err != nil {
			return Transfer{}, err
		}
	}
	if err := land.give(ctx, q, t.Quantity, st.Actor, "what cancelled transfer "+t.ID.String()+" gave back"); err != nil {
		return Transfer{}, err
	}
	return setTransfer(ctx, q, t, 0, 0, TransferCancelled, st)
}

// transitAgrees refuses to move transfer t while its destination's
// incoming (row, locked) is not what the transfers in transit to it and
// the open inbound lines at it carry (incomingAgrees).
func transitAgrees(ctx context.Context, q *db.Queries, t db.Transfer, row db.Stock) error {
	return incomingAgrees(ctx, q, row, "transfer_id", t.ID, "transfer")
}

// incomingAgrees refuses to move a transfer or an inbound notice (what,
// named by key and id) while the incoming of a row it moves (row, locked)
// is not what the transfers in transit to it and the open inbound lines at
// it carry: a row, a transfer or a notice changed by hand, which
// reconciliation reports as incoming_vs_transfers. The answer is 409
// books_unbalanced naming both and the difference, rather than a move
// that would take incoming below zero or leave it wrong; a repair of the
// row (which restores its transfers from their ledger rows) comes first.
func incomingAgrees(ctx context.Context, q *db.Queries, row db.Stock, key string, id uuid.UUID, what string) error {
	inTransit, err := q.IncomingExpectedAt(ctx, row.Sku, row.Location, row.Pool)
	if err != nil {
		return fmt.Errorf("sum what is expected at %s/%s/%s: %w", row.Sku, row.Location, row.Pool, err)
	}
	if row.Incoming == inTransit {
		return nil
	}
	return &domain.Error{Code: domain.CodeBooksUnbalanced, SKU: row.Sku, Pool: row.Pool, Location: row.Location,
		Extra: map[string]any{key: id, "incoming": row.Incoming, "in_transit": inTransit, "difference": row.Incoming - inTransit},
		Detail: fmt.Sprintf("SKU %q (pool %s) at %s has %d incoming, but the transfers in transit to it and the open inbound lines at it carry %d "+
			"(incoming minus in transit: %+d): its books disagree, so %s %s is not moved. Repair them first (POST /v1/skus/%s/repair with \"location\": %q, "+
			"preview with dry_run: a repair to the ledger also restores the transfers from their ledger rows)",
			row.Sku, row.Pool, row.Location, row.Incoming, inTransit, row.Incoming-inTransit, what, id, row.Sku, row.Location)}
}

// lockTransfer locks a transfer that is in transit.
func lockTransfer(ctx context.Context, q *db.Queries, id uuid.UUID) (db.Transfer, error) {
	t, err := q.TransferLock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Transfer{}, domain.Missing("transfer")
	}
	if err != nil {
		return db.Transfer{}, fmt.Errorf("lock transfer %s: %w", id, err)
	}
	if t.Status != TransferInTransit {
		return db.Transfer{}, &domain.Error{Code: domain.CodeTransferNotInTransit, SKU: t.Sku, Pool: t.Pool,
			Extra:  map[string]any{"transfer_id": t.ID, "transfer_status": t.Status},
			Detail: fmt.Sprintf("transfer %s is %s: only a transfer in transit is received, closed or cancelled", t.ID, t.Status)}
	}
	return t, nil
}

func setTransfer(ctx context.Context, q *db.Queries, t db.Transfer, received, lost int64, status string, st TransferStep) (Transfer, error) {
	r, err := q.TransferSet(ctx, db.TransferSetParams{ID: t.ID, Received: received, Lost: lost, Status: status,
		FinishedBy: &st.Actor, FinishReason: &st.Reason})
	if err != nil {
		return Transfer{}, fmt.Errorf("record transfer %s: %w", t.ID, err)
	}
	return newTransfer(r), nil
}

// GetTransfer returns transfer id.
func (s *Service) GetTransfer(ctx context.Context, id uuid.UUID) (Transfer, error) {
	t, err := db.New(s.pool).TransferGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Transfer{}, domain.Missing("transfer")
	}
	if err != nil {
		return Transfer{}, err
	}
	return newTransfer(t), nil
}

// TransfersPage is a page of transfers, oldest first; NextCursor, when not
// nil, asks for the next.
type TransfersPage struct {
	Transfers  []Transfer `json:"transfers"`
	NextCursor *string    `json:"next_cursor"`
}

// TransferFilter chooses transfers: by status, by SKU, after the transfer
// Cursor names.
type TransferFilter struct {
	Status string
	SKU    string
	Cursor *uuid.UUID
	Limit  int
}

// Transfers lists transfers, oldest first.
func (s *Service) Transfers(ctx context.Context, f TransferFilter) (TransfersPage, error) {
	switch f.Status {
	case "", TransferInTransit, TransferReceived, TransferClosed, TransferCancelled:
	default:
		return TransfersPage{}, domain.Invalid("status must be in_transit, received, closed or cancelled, not %q", f.Status)
	}
	if f.SKU != "" {
		if err := domain.ValidName("sku", f.SKU); err != nil {
			return TransfersPage{}, err
		}
	}
	if f.Limit < 1 || f.Limit > MaxTransfersPage {
		return TransfersPage{}, domain.Invalid("limit must be from 1 to %d", MaxTransfersPage)
	}
	q := db.New(s.pool)
	if f.Cursor != nil {
		// The cursor is the last transfer of a page: one that does not
		// exist places no page (ErrCursor, as every list answers it).
		if _, err := q.TransferGet(ctx, *f.Cursor); errors.Is(err, pgx.ErrNoRows) {
			return TransfersPage{}, ErrCursor
		} else if err != nil {
			return TransfersPage{}, fmt.Errorf("read the cursor's transfer: %w", err)
		}
	}
	rows, err := q.TransfersPage(ctx, db.TransfersPageParams{
		Status: domain.Optional(f.Status), Sku: domain.Optional(f.SKU), AfterID: f.Cursor, Lim: int32(f.Limit + 1),
	})
	if err != nil {
		return TransfersPage{}, err
	}
	page := TransfersPage{Transfers: []Transfer{}}
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		next := rows[f.Limit-1].ID.String()
		page.NextCursor = &next
	}
	for _, r := range rows {
		page.Transfers = append(page.Transfers, newTransfer(r))
	}
	return page, nil
}
