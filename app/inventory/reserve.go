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

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/metrics"
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
		return domain.Invalid("items is empty: a hold needs at least one line")
	}
	if len(r.Items) > MaxLines {
		return domain.Invalid("items has %d lines, at most %d are allowed", len(r.Items), MaxLines)
	}
	for i, it := range r.Items {
		if domain.ValidName("sku", it.SKU) != nil { // named only when it fails: this runs on every hold
			return domain.ValidName(fmt.Sprintf("items[%d].sku", i), it.SKU)
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			return domain.Invalid("items[%d].quantity must be a whole number from 1 to %d", i, MaxQuantity)
		}
	}
	if r.TTLSeconds < 0 || r.TTLSeconds > MaxTTLSeconds {
		return domain.Invalid("ttl_seconds must be from 1 to %d", MaxTTLSeconds)
	}
	if r.Campaign != "" {
		if err := domain.ValidName("campaign", r.Campaign); err != nil {
			return err
		}
	}
	return domain.ValidText("order_ref", r.OrderRef, MaxOrderRefSize)
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

// lines sums the request's quantities per (sku, pool) and sorts them byte
// by byte, the order in which stock rows are locked everywhere (and the
// order a hold's refusal picks its failing line in).
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
	h := hold{req: req, id: newHoldID(), hash: req.hash(), ttl: req.TTLSeconds}
	if h.ttl == 0 {
		h.ttl = int64(DefaultTTL.Seconds())
	}
	pool := MainPool
	if req.Campaign != "" {
		pool = req.Campaign
	}
	h.lines = req.lines(pool)
	if req.Campaign != "" {
		ttl, maxPerOrder, err := s.campaignTerms(ctx, req.Campaign, h.lines[0].SKU)
		if err == nil {
			err = overCap(h.lines, req.Campaign, maxPerOrder)
		}
		if err != nil {
			// A replay must not fail because the campaign has since ended.
			if r, replayed, rerr := s.replay(ctx, req.Client, req.IdempotencyKey, h.hash); rerr == nil && replayed {
				return r, true, nil
			}
			return Reservation{}, false, err
		}
		h.ttl = ttl
	}
	return s.holdBatched(ctx, h)
}

// campaignTerms checks that a campaign takes holds now and returns its TTL
// and its cap per order (nil: none); a refusal names sku, the hold's first
// line, as the contract asks.
func (s *Service) campaignTerms(ctx context.Context, id, sku string) (int64, *int64, error) {
	terms, err := db.New(s.pool).CampaignHoldTerms(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, &domain.Error{Code: domain.CodeUnknownCampaign, Reference: true, Detail: fmt.Sprintf("campaign %q does not exist", id)}
	}
	if err != nil {
		return 0, nil, err
	}
	if !terms.Open {
		return 0, nil, &domain.Error{Code: domain.CodeCampaignNotActive, Detail: fmt.Sprintf("campaign %q is not taking holds (status %s)", id, terms.Status), SKU: sku, Pool: id}
	}
	return terms.HoldTtlSeconds, terms.MaxPerOrder, nil
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
		return Reservation{}, false, errKeyReused(key, row.ID)
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
			return &domain.Error{Code: domain.CodeCampaignNotActive, SKU: l.SKU, Pool: l.Pool,
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
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: l.SKU, Pool: l.Pool, Detail: detail}
	case err != nil:
		return err
	case row.Status == StockPaused:
		return &domain.Error{Code: domain.CodeSKUPaused, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) is paused: %s", l.SKU, l.Pool, domain.Value(row.PausedReason))}
	default:
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) has %d available, %d requested", l.SKU, l.Pool, row.Available, l.Quantity)}
	}
}

// holdCall is one caller's hold waiting for its batch.
type holdCall struct {
	ctx  context.Context
	h    hold
	rows []string // keys of the stock rows its lines draw on
	done chan holdResult
	// timeouts counts the lock timeouts its batches ran into.
	timeouts int
}

type holdResult struct {
	r        Reservation
	replayed bool
	err      error
}

func (c *holdCall) keys() []string   { return c.rows }
func (c *holdCall) gone() bool       { return c.ctx.Err() != nil }
func (c *holdCall) answer(err error) { c.reply(holdResult{err: err}) }

func (c *holdCall) reply(r holdResult) {
	select {
	case c.done <- r:
	default: // answered already
	}
}

func rowKey(sku, pool string) string { return sku + "\x00" + pool }

// holdBatched queues h for the next hold batch and waits for its answer. A
// caller that stops waiting gets ctx's error; its hold may still commit,
// as a hold whose caller vanished mid-transaction may on any path, and a
// retry with the same Idempotency-Key finds it.
func (s *Service) holdBatched(ctx context.Context, h hold) (Reservation, bool, error) {
	c := &holdCall{ctx: ctx, h: h, done: make(chan holdResult, 1)}
	for _, l := range h.lines {
		c.rows = append(c.rows, rowKey(l.SKU, l.Pool))
	}
	s.holds.submit(c)
	select {
	case res := <-c.done:
		return res.r, res.replayed, res.err
	case <-ctx.Done():
		return Reservation{}, false, ctx.Err()
	}
}

// runHolds runs one hold batch and answers its callers. A batch of
// requests on rows found locked before looks first, without waiting: while
// the rows are still locked their requests answer busy at once.
func (s *Service) runHolds(ctx context.Context, calls []*holdCall) []*holdCall {
	metrics.HoldBatch.Observe(float64(len(calls)))
	if s.holds.anyBlocked(calls) {
		rows := map[string]Line{}
		for _, c := range calls {
			for _, l := range c.h.lines {
				rows[rowKey(l.SKU, l.Pool)] = l
			}
		}
		locked, err := s.lockedStock(ctx, rows)
		if err != nil {
			for _, c := range calls {
				c.answer(err)
			}
			return nil
		}
		var rest []*holdCall
		for _, c := range calls {
			if l, ok := firstLocked(c.h.lines, locked); ok {
				c.answer(errBusy(l))
			} else {
				rest = append(rest, c)
			}
		}
		for k := range locked {
			delete(rows, k)
		}
		s.holds.unblock(slicesKeys(rows)) // free again
		if len(rest) == 0 {
			return nil
		}
		calls = rest
	}
	return s.holdAttempt(ctx, calls)
}

// holdAttempt runs calls as one transaction and answers them. When the
// transaction fails as a whole it finds out why and answers each caller as
// a transaction of its own would have been answered: requests on a row
// another transaction keeps locked answer busy while the rest go again; a
// statement that fails because of one request is narrowed down to that
// request by halves; a deadlock is retried.
func (s *Service) holdAttempt(ctx context.Context, calls []*holdCall) []*holdCall {
	again, err := s.holdBatch(ctx, calls)
	if err == nil {
		return again
	}
	switch classify(ctx, err) {
	case failLock:
		rows := map[string]Line{}
		for _, c := range calls {
			for _, l := range c.h.lines {
				rows[rowKey(l.SKU, l.Pool)] = l
			}
		}
		locked, perr := s.lockedStock(ctx, rows)
		if perr != nil {
			s.log.Warn("hold batch hit its lock timeout; finding the locked rows failed", "err", perr)
		}
		// Requests on a row still locked go again in a batch of their
		// own, which looks before it waits: they answer busy at once if
		// the row is still locked then, or go through if the lock was only
		// another batch waiting its turn. The others go again now.
		var rest, later []*holdCall
		for _, c := range calls {
			c.timeouts++
			l, onLocked := firstLocked(c.h.lines, locked)
			switch {
			case c.timeouts > maxLockTimeouts:
				if !onLocked {
					l = c.h.lines[0]
				}
				c.answer(errBusy(l))
			case onLocked:
				later = append(later, c)
			default:
				rest = append(rest, c)
			}
		}
		s.holds.block(slicesKeys(locked))
		if len(rest) > 0 {
			later = append(later, s.holdAttempt(ctx, rest)...)
		}
		return later
	case failRetry:
		if calls[0].timeouts < maxLockTimeouts {
			for _, c := range calls {
				c.timeouts++
			}
			return s.holdAttempt(ctx, calls)
		}
	case failSlow:
		err = errSlow
	case failStatement:
		if len(calls) > 1 {
			half := len(calls) / 2
			return append(s.holdAttempt(ctx, calls[:half]), s.holdAttempt(ctx, calls[half:])...)
		}
		if _, ok := refused(err); ok {
			// The batch granted what the locked rows did not have: a bug,
			// which the database caught. The caller gets a 500.
			s.refusedByDatabase(ctx, "hold", calls[0].h.req.IdempotencyKey, err)
		}
	}
	if len(calls) > 1 {
		s.log.Warn("hold batch failed", "size", len(calls), "err", err)
	}
	for _, c := range calls {
		c.answer(err)
	}
	return nil
}

// holdBatch is one transaction for many holds, in two round trips:
//
//  1. begin; set the lock timeout; insert every hold's reservation (a key
//     used before is skipped); lock the stock rows of every line, in
//     (sku, pool) byte order.
//  2. decided in Go, in arrival order, a hold all of whose lines fit is
//     granted and takes its units from what is left of each row; then
//     delete the refused holds' rows; move the counters, insert the lines
//     and the ledger rows of the granted ones in one statement; read the
//     holds the replayed keys made; commit.
//
// A request whose key another request of the batch uses too goes again
// with the next batch, once the first one's fate is committed.
func (s *Service) holdBatch(ctx context.Context, calls []*holdCall) ([]*holdCall, error) {
	var (
		leaders []*holdCall
		again   []*holdCall
		seen    = map[[2]string]bool{}
	)
	for _, c := range calls {
		k := [2]string{c.h.req.Client, c.h.req.IdempotencyKey}
		if seen[k] {
			again = append(again, c)
			continue
		}
		seen[k] = true
		leaders = append(leaders, c)
	}

	// Insert in (client, key) order; decide in arrival order.
	byKey := slices.Clone(leaders)
	slices.SortFunc(byKey, func(a, b *holdCall) int {
		if d := strings.Compare(a.h.req.Client, b.h.req.Client); d != 0 {
			return d
		}
		return strings.Compare(a.h.req.IdempotencyKey, b.h.req.IdempotencyKey)
	})
	var ins db.ReservationsInsertManyParams
	for _, c := range byKey {
		h := c.h
		ins.Ids = append(ins.Ids, h.id)
		ins.Clients = append(ins.Clients, h.req.Client)
		ins.IdempotencyKeys = append(ins.IdempotencyKeys, h.req.IdempotencyKey)
		ins.RequestHashes = append(ins.RequestHashes, h.hash)
		ins.OrderRefs = append(ins.OrderRefs, h.req.OrderRef)
		ins.Campaigns = append(ins.Campaigns, h.req.Campaign)
		ins.TtlSeconds = append(ins.TtlSeconds, h.ttl)
	}
	var lock db.StockLockManyParams
	rowSeen := map[string]bool{}
	for _, c := range leaders {
		for _, l := range c.h.lines {
			if k := rowKey(l.SKU, l.Pool); !rowSeen[k] {
				rowSeen[k] = true
				lock.Skus = append(lock.Skus, l.SKU)
				lock.Pools = append(lock.Pools, l.Pool)
			}
		}
	}

	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(conn)

	p := newPipe(conn)
	q := db.New(p)
	p.begin()
	timeout := q.BatchSettingsSet(ctx, []string{s.lockTimeout})
	inserting := q.ReservationsInsertMany(ctx, []db.ReservationsInsertManyParams{ins})
	locking := q.StockLockMany(ctx, []db.StockLockManyParams{lock})
	p.send(ctx)
	_ = done(timeout.Exec)
	inserted, _ := collect(inserting.Query)
	stock, _ := collect(locking.Query)
	if err := p.close(); err != nil {
		return nil, wrapf(err, "insert and lock")
	}

	rows := make(map[string]db.StockLockManyRow, len(stock))
	avail := make(map[string]int64, len(stock))
	for _, r := range stock {
		k := rowKey(r.Sku, r.Pool)
		rows[k], avail[k] = r, r.Available
	}
	made := make(map[uuid.UUID]db.Reservation, len(inserted))
	for _, r := range inserted {
		made[r.ID] = r
	}

	type refusal struct {
		c    *holdCall
		line Line
		why  domain.Code
		left int64
	}
	var (
		granted  []*holdCall
		refused  []refusal
		replays  []*holdCall
		left     []*holdCall // callers that stopped waiting
		drop     []uuid.UUID
		apply    db.StockHoldsApplyParams
		reserved = map[string]int64{}
	)
	for _, c := range leaders {
		if _, ok := made[c.h.id]; !ok {
			replays = append(replays, c)
			continue
		}
		if s.beforeGrant != nil {
			s.beforeGrant(c.h.req)
		}
		if c.gone() {
			// Its caller left before anything was decided: hold nothing.
			left = append(left, c)
			drop = append(drop, c.h.id)
			continue
		}
		fail := refusal{c: c}
		for _, l := range c.h.lines {
			k := rowKey(l.SKU, l.Pool)
			r, ok := rows[k]
			switch {
			case !ok:
				fail.line, fail.why = l, domain.CodeUnknownSKU
			case r.Status != StockOnSale:
				fail.line, fail.why = l, domain.CodeSKUPaused
			case avail[k] < l.Quantity:
				fail.line, fail.why, fail.left = l, domain.CodeOutOfStock, avail[k]
			default:
				continue
			}
			break
		}
		if fail.why != "" {
			refused = append(refused, fail)
			drop = append(drop, c.h.id)
			continue
		}
		granted = append(granted, c)
		for _, l := range c.h.lines {
			k := rowKey(l.SKU, l.Pool)
			avail[k] -= l.Quantity
			reserved[k] += l.Quantity
			apply.LineIds = append(apply.LineIds, c.h.id)
			apply.LineSkus = append(apply.LineSkus, l.SKU)
			apply.LinePools = append(apply.LinePools, l.Pool)
			apply.LineQuantities = append(apply.LineQuantities, l.Quantity)
			apply.LineActors = append(apply.LineActors, c.h.req.Client)
		}
	}
	for i, sku := range lock.Skus {
		if q := reserved[rowKey(sku, lock.Pools[i])]; q > 0 {
			apply.RowSkus = append(apply.RowSkus, sku)
			apply.RowPools = append(apply.RowPools, lock.Pools[i])
			apply.RowQuantities = append(apply.RowQuantities, q)
		}
	}
	var byKeys db.ReservationsGetByKeysParams
	for _, c := range replays {
		byKeys.Clients = append(byKeys.Clients, c.h.req.Client)
		byKeys.IdempotencyKeys = append(byKeys.IdempotencyKeys, c.h.req.IdempotencyKey)
	}

	p = newPipe(conn)
	q = db.New(p)
	var (
		deleting *db.ReservationsDeleteBatchResults
		applying *db.StockHoldsApplyBatchResults
		replayed *db.ReservationsGetByKeysBatchResults
		lines    *db.ReservationLinesGetByKeysBatchResults
	)
	if len(drop) > 0 {
		deleting = q.ReservationsDelete(ctx, [][]uuid.UUID{drop})
	}
	if len(granted) > 0 {
		applying = q.StockHoldsApply(ctx, []db.StockHoldsApplyParams{apply})
	}
	if len(replays) > 0 {
		replayed = q.ReservationsGetByKeys(ctx, []db.ReservationsGetByKeysParams{byKeys})
		lines = q.ReservationLinesGetByKeys(ctx, []db.ReservationLinesGetByKeysParams{{
			Clients: byKeys.Clients, IdempotencyKeys: byKeys.IdempotencyKeys}})
	}
	p.commit()
	p.send(ctx)
	var (
		firsts    []db.Reservation
		firstsOf  []db.ReservationLine
		readError error
	)
	if deleting != nil {
		readError = done(deleting.Exec)
	}
	if applying != nil {
		readError = errors.Join(readError, done(applying.Exec))
	}
	if replayed != nil {
		var e1, e2 error
		firsts, e1 = collect(replayed.Query)
		firstsOf, e2 = collect(lines.Query)
		readError = errors.Join(readError, e1, e2)
	}
	if err := p.close(); err != nil {
		return nil, wrapf(err, "grant and commit")
	}
	if readError != nil {
		return nil, readError
	}

	// Committed: answer.
	for _, c := range granted {
		c.reply(holdResult{r: newReservation(made[c.h.id], c.h.lines)})
	}
	for _, c := range left {
		c.answer(c.ctx.Err())
	}
	for _, f := range refused {
		f.c.answer(s.refusal(ctx, f.line, f.why, f.left))
	}
	if len(replays) > 0 {
		s.answerReplays(replays, firsts, firstsOf)
	}
	return again, nil
}

// refusal explains why line could not be held: what the batch saw.
func (s *Service) refusal(ctx context.Context, l Line, why domain.Code, left int64) error {
	if l.Pool != MainPool && why != domain.CodeOutOfStock {
		// A campaign's pool that is missing or paused: the campaign may
		// have ended meanwhile, which is what the caller must hear.
		return s.whyNot(ctx, l)
	}
	switch why {
	case domain.CodeUnknownSKU:
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: l.SKU, Pool: l.Pool, Detail: fmt.Sprintf("SKU %q has no stock", l.SKU)}
	case domain.CodeSKUPaused:
		return s.whyNot(ctx, l)
	}
	return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
		Detail: fmt.Sprintf("SKU %q (pool %s) has %d available, %d requested", l.SKU, l.Pool, left, l.Quantity)}
}

// answerReplays answers the requests whose key was used before, from the
// holds those keys made.
func (s *Service) answerReplays(calls []*holdCall, firsts []db.Reservation, lines []db.ReservationLine) {
	byKey := make(map[[2]string]db.Reservation, len(firsts))
	for _, r := range firsts {
		byKey[[2]string{r.Client, r.IdempotencyKey}] = r
	}
	linesOf := map[uuid.UUID][]Line{}
	for _, l := range lines {
		linesOf[l.ReservationID] = append(linesOf[l.ReservationID], Line{SKU: l.Sku, Pool: l.Pool, Quantity: l.Quantity})
	}
	for _, c := range calls {
		r, ok := byKey[[2]string{c.h.req.Client, c.h.req.IdempotencyKey}]
		switch {
		case !ok:
			// Committed reservations are never deleted, and ON CONFLICT
			// only skips a committed one: this cannot happen.
			c.answer(fmt.Errorf("idempotency key %q conflicted but has no reservation", c.h.req.IdempotencyKey))
		case r.RequestHash != c.h.hash:
			c.answer(errKeyReused(c.h.req.IdempotencyKey, r.ID))
		default:
			c.reply(holdResult{r: newReservation(r, linesOf[r.ID]).firstAnswer(), replayed: true})
		}
	}
}
