package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/db"
)

// Item is one line of a hold request.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// HoldRequest asks to hold stock for an order.
type HoldRequest struct {
	// Client owns the hold and scopes IdempotencyKey.
	Client         string
	IdempotencyKey string
	OrderRef       string
	// Campaign, when set, draws every line from the campaign's pool.
	Campaign string
	// TTLSeconds is how long the hold lasts unpaid; 0 means the default. A
	// campaign's own TTL wins.
	TTLSeconds int64
	Items      []Item
}

// Validate checks the request against the API contract's limits.
func (r HoldRequest) Validate() error {
	if len(r.Items) == 0 {
		return Invalid("items is empty: a hold needs at least one line")
	}
	if len(r.Items) > MaxLines {
		return Invalid("items has %d lines, at most %d are allowed", len(r.Items), MaxLines)
	}
	for i, it := range r.Items {
		if err := ValidName(fmt.Sprintf("items[%d].sku", i), it.SKU); err != nil {
			return err
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			return Invalid("items[%d].quantity must be a whole number from 1 to %d", i, MaxQuantity)
		}
	}
	if r.TTLSeconds < 0 || r.TTLSeconds > MaxTTLSeconds {
		return Invalid("ttl_seconds must be from 1 to %d", MaxTTLSeconds)
	}
	if r.Campaign != "" {
		if err := ValidName("campaign", r.Campaign); err != nil {
			return err
		}
	}
	return ValidText("order_ref", r.OrderRef, MaxOrderRefSize)
}

// hash identifies the request's content, so a replayed key can tell the same
// request from a different one.
func (r HoldRequest) hash() string {
	if r.TTLSeconds == 0 {
		r.TTLSeconds = int64(DefaultTTL.Seconds()) // leaving it out means the default
	}
	b, _ := json.Marshal(struct {
		OrderRef string `json:"order_ref"`
		Campaign string `json:"campaign"`
		TTL      int64  `json:"ttl_seconds"`
		Items    []Item `json:"items"`
	}{r.OrderRef, r.Campaign, r.TTLSeconds, r.Items})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lines sums the request's quantities per (sku, pool) and sorts them, the
// order in which stock rows are locked, so concurrent holds never deadlock.
func (r HoldRequest) lines(pool string) []Line {
	sum := map[string]int64{}
	for _, it := range r.Items {
		sum[it.SKU] += it.Quantity
	}
	lines := make([]Line, 0, len(sum))
	for sku, q := range sum {
		lines = append(lines, Line{SKU: sku, Pool: pool, Quantity: q})
	}
	slices.SortFunc(lines, func(a, b Line) int { return strings.Compare(a.SKU, b.SKU) })
	return lines
}

// hold is a validated request with its terms settled.
type hold struct {
	req   HoldRequest
	id    uuid.UUID
	hash  string
	ttl   int64
	lines []Line
}

// Hold holds stock for an order, all lines or none. The boolean reports an
// idempotent replay: the key was used before with the same request, and the
// first answer is returned.
func (s *Service) Hold(ctx context.Context, req HoldRequest) (Reservation, bool, error) {
	if err := req.Validate(); err != nil {
		return Reservation{}, false, err
	}
	h := hold{req: req, id: uuid.New(), hash: req.hash(), ttl: req.TTLSeconds}
	if h.ttl == 0 {
		h.ttl = int64(DefaultTTL.Seconds())
	}
	pool := MainPool
	if req.Campaign != "" {
		pool = req.Campaign
	}
	h.lines = req.lines(pool)
	if req.Campaign != "" {
		ttl, err := s.campaignTerms(ctx, req.Campaign, h.lines[0].SKU)
		if err != nil {
			// A replay must not fail because the campaign has since ended.
			if r, replayed, rerr := s.replay(ctx, req.Client, req.IdempotencyKey, h.hash); rerr == nil && replayed {
				return r, true, nil
			}
			return Reservation{}, false, err
		}
		h.ttl = ttl
	}
	if s.combiner != nil && len(h.lines) == 1 {
		return s.combiner.hold(ctx, h)
	}
	return s.holdOne(ctx, h)
}

// campaignTerms checks that a campaign takes holds now and returns its TTL;
// a refusal names sku, the hold's first line, as the contract asks.
func (s *Service) campaignTerms(ctx context.Context, id, sku string) (int64, error) {
	terms, err := db.New(s.pool).CampaignHoldTerms(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, &Error{Code: CodeUnknownCampaign, Detail: fmt.Sprintf("campaign %q does not exist", id)}
	}
	if err != nil {
		return 0, err
	}
	if !terms.Open {
		return 0, &Error{Code: CodeCampaignNotActive, Detail: fmt.Sprintf("campaign %q is not taking holds (status %s)", id, terms.Status), SKU: sku, Pool: id}
	}
	return terms.HoldTtlSeconds, nil
}

// holdOne is the plain path: one transaction for one hold.
func (s *Service) holdOne(ctx context.Context, h hold) (Reservation, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Reservation{}, false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := db.New(tx)

	row, err := q.ReservationInsert(ctx, db.ReservationInsertParams{
		ID:             h.id,
		Client:         h.req.Client,
		IdempotencyKey: h.req.IdempotencyKey,
		RequestHash:    h.hash,
		OrderRef:       optional(h.req.OrderRef),
		Campaign:       optional(h.req.Campaign),
		TtlSeconds:     h.ttl,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		_ = tx.Rollback(ctx)
		return s.replayOrFail(ctx, h)
	}
	if err != nil {
		return Reservation{}, false, fmt.Errorf("insert reservation: %w", err)
	}

	versions := make([]int64, len(h.lines))
	for i, l := range h.lines {
		v, err := q.StockReserve(ctx, l.Quantity, l.SKU, l.Pool)
		if errors.Is(err, pgx.ErrNoRows) {
			_ = tx.Rollback(ctx)
			return Reservation{}, false, s.whyNot(ctx, l)
		}
		if err != nil {
			return Reservation{}, false, fmt.Errorf("reserve %s/%s: %w", l.SKU, l.Pool, err)
		}
		versions[i] = v
	}
	ids := []uuid.UUID{h.id}
	if err := insertLines(ctx, q, ids, [][]Line{h.lines}); err != nil {
		return Reservation{}, false, err
	}
	if err := appendLedger(ctx, q, ids, h.lines, versions, movement{kind: "reserve", available: -1, reserved: +1}); err != nil {
		return Reservation{}, false, err
	}
	if _, err := s.jobs.InsertTx(ctx, tx, ReleaseHoldArgs{ReservationID: h.id}, &river.InsertOpts{ScheduledAt: row.ExpiresAt}); err != nil {
		return Reservation{}, false, fmt.Errorf("enqueue release_hold: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Reservation{}, false, fmt.Errorf("commit hold: %w", err)
	}
	return newReservation(row, h.lines), false, nil
}

// replayOrFail answers a request whose idempotency key already has a hold.
func (s *Service) replayOrFail(ctx context.Context, h hold) (Reservation, bool, error) {
	r, replayed, err := s.replay(ctx, h.req.Client, h.req.IdempotencyKey, h.hash)
	if err != nil {
		return Reservation{}, false, err
	}
	if !replayed {
		// The key's hold vanished between the insert and the read: that
		// cannot happen, since committed reservations are never deleted.
		return Reservation{}, false, fmt.Errorf("idempotency key %q conflicted but has no reservation", h.req.IdempotencyKey)
	}
	return r, true, nil
}

// replay looks up the hold made with key. It reports false when there is
// none, and an error when the key was used for a different request.
func (s *Service) replay(ctx context.Context, client, key, hash string) (Reservation, bool, error) {
	q := db.New(s.pool)
	row, err := q.ReservationGetByKey(ctx, client, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return Reservation{}, false, nil
	}
	if err != nil {
		return Reservation{}, false, err
	}
	if row.RequestHash != hash {
		return Reservation{}, false, &Error{Code: CodeIdempotencyReused,
			Detail: fmt.Sprintf("Idempotency-Key %q was used for a different request (reservation %s)", key, row.ID)}
	}
	lines, err := linesOf(ctx, q, row.ID)
	if err != nil {
		return Reservation{}, false, err
	}
	return newReservation(row, lines).firstAnswer(), true, nil
}

// whyNot explains, after the fact, why line l could not be held.
func (s *Service) whyNot(ctx context.Context, l Line) error {
	q := db.New(s.pool)
	if l.Pool != MainPool {
		if terms, err := q.CampaignHoldTerms(ctx, l.Pool); err == nil && !terms.Open {
			return &Error{Code: CodeCampaignNotActive, SKU: l.SKU, Pool: l.Pool,
				Detail: fmt.Sprintf("campaign %q is not taking holds (status %s)", l.Pool, terms.Status)}
		}
	}
	row, err := q.StockGet(ctx, l.SKU, l.Pool)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		detail := fmt.Sprintf("SKU %q has no stock", l.SKU)
		if l.Pool != MainPool {
			detail = fmt.Sprintf("SKU %q is not part of campaign %q", l.SKU, l.Pool)
		}
		return &Error{Code: CodeUnknownSKU, SKU: l.SKU, Pool: l.Pool, Detail: detail}
	case err != nil:
		return err
	case row.Status == StockPaused:
		return &Error{Code: CodeSKUPaused, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) is paused: %s", l.SKU, l.Pool, deref(row.PausedReason))}
	default:
		return &Error{Code: CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) has %d available, %d requested", l.SKU, l.Pool, row.Available, l.Quantity)}
	}
}

// insertLines writes the lines of several reservations in one statement.
func insertLines(ctx context.Context, q *db.Queries, ids []uuid.UUID, lines [][]Line) error {
	var p db.ReservationLinesInsertParams
	for i, id := range ids {
		for _, l := range lines[i] {
			p.ReservationIds = append(p.ReservationIds, id)
			p.Skus = append(p.Skus, l.SKU)
			p.Pools = append(p.Pools, l.Pool)
			p.Quantities = append(p.Quantities, l.Quantity)
		}
	}
	if err := q.ReservationLinesInsert(ctx, p); err != nil {
		return fmt.Errorf("insert reservation lines: %w", err)
	}
	return nil
}

// movement describes how the lines of reservations move stock: the per-unit
// factor on each counter, and who did it why.
type movement struct {
	kind                      string
	available, reserved, sold int64
	actor                     *string // nil: each reservation's client
	reason                    *string
}

// appendLedger writes one ledger row per line of the reservations ids; rows
// gives the stock rows they touched and versions what each row reached.
func appendLedger(ctx context.Context, q *db.Queries, ids []uuid.UUID, rows []Line, versions []int64, m movement) error {
	p := db.LedgerAppendLinesParams{
		Kind: m.kind, PerAvailable: m.available, PerReserved: m.reserved, PerSold: m.sold,
		Actor: m.actor, Reason: m.reason, Versions: versions, ReservationIds: ids,
	}
	for _, r := range rows {
		p.Vskus = append(p.Vskus, r.SKU)
		p.Vpools = append(p.Vpools, r.Pool)
	}
	if err := q.LedgerAppendLines(ctx, p); err != nil {
		return fmt.Errorf("append %s ledger rows: %w", m.kind, err)
	}
	return nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
