package inventory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Item is one line of a hold request: a quantity of a SKU, or, for a pool
// of units with an identity, these units (Units), or a quantity of units
// the service picks (Adjacent: consecutive in one group).
type Item struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
	// Units names the units to hold; Quantity is then 0 or their number.
	Units []string `json:"units,omitempty"`
	// Adjacent asks for Quantity units of one group with consecutive
	// positions.
	Adjacent bool `json:"adjacent,omitempty"`
	// Location takes the line from that location; empty lets the batch
	// allocate it (see decideHolds).
	Location string `json:"location,omitempty"`
	// Split lets an allocated line be taken from several locations.
	Split bool `json:"split,omitempty"`
}

// count is how many units the item asks for.
func (it Item) count() int64 {
	if len(it.Units) > 0 {
		return int64(len(it.Units))
	}
	return it.Quantity
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
	// Locations, when not nil, are the only locations the hold may take
	// stock from: the client's API key is bound to them (a sales channel).
	Locations []string
	// Actor and ActorKey, when set, are who made the hold on the client's
	// behalf and the key that authenticated them (an operator reinstating
	// a shop's hold): its ledger rows record them instead of the client.
	// They are not part of the request's identity (its hash).
	Actor, ActorKey string
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
		if err := it.validateLocation(i, r.Locations); err != nil {
			return err
		}
		if it.Units != nil || it.Adjacent {
			if err := it.validateUnits(i); err != nil {
				return err
			}
			continue
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			return domain.Invalid("items[%d].quantity must be a whole number from 1 to %d", i, MaxQuantity)
		}
	}
	if _, err := r.asks(); err != nil {
		return err
	}
	if r.TTLSeconds < 0 || r.TTLSeconds > MaxTTLSeconds {
		return domain.Invalid("ttl_seconds must be from 1 to %d", MaxTTLSeconds)
	}
	if r.Campaign != "" {
		if err := domain.ValidName("campaign", r.Campaign); err != nil {
			return err
		}
	}
	return domain.ValidRef("order_ref", r.OrderRef, MaxOrderRefSize)
}

// validateLocation checks item i's location and split: a location named
// must be a name, and one the client's key may use; split goes with a
// quantity the batch allocates.
func (it Item) validateLocation(i int, allowed []string) error {
	switch {
	case it.Location == "" && !it.Split:
		return nil
	case it.Split && it.Location != "":
		return domain.Invalid("items[%d]: split lets the service take the line from several locations; it goes with no location named", i)
	case it.Split && (it.Units != nil || it.Adjacent):
		return domain.Invalid("items[%d]: split goes with a quantity, not with units named or adjacent (a pool of units lives at one location)", i)
	case it.Split:
		return nil
	}
	if err := domain.ValidName(fmt.Sprintf("items[%d].location", i), it.Location); err != nil {
		return err
	}
	if allowed != nil && !slices.Contains(allowed, it.Location) {
		return &domain.Error{Code: domain.CodeLocationNotAllowed, SKU: it.SKU, Location: it.Location,
			Detail: fmt.Sprintf("items[%d]: this API key's holds take stock only at %s, not at %q", i, strings.Join(allowed, ", "), it.Location)}
	}
	return nil
}

// MaxUnitsPerLine bounds the units one hold line names or asks for.
const MaxUnitsPerLine = 1_000

// validateUnits checks item i of a hold that names units or asks for
// adjacent ones.
func (it Item) validateUnits(i int) error {
	switch {
	case it.Adjacent && len(it.Units) > 0:
		return domain.Invalid("items[%d]: adjacent goes with a quantity, not with units named", i)
	case it.Adjacent && (it.Quantity < 1 || it.Quantity > MaxUnitsPerLine):
		return domain.Invalid("items[%d].quantity must be from 1 to %d for adjacent units", i, MaxUnitsPerLine)
	case it.Adjacent:
		return nil
	case len(it.Units) == 0 || len(it.Units) > MaxUnitsPerLine:
		return domain.Invalid("items[%d].units must name 1 to %d units", i, MaxUnitsPerLine)
	case it.Quantity != 0 && it.Quantity != int64(len(it.Units)):
		return domain.Invalid("items[%d].quantity is %d but units names %d: leave quantity out, or give their number", i, it.Quantity, len(it.Units))
	}
	for j, id := range it.Units {
		if err := domain.ValidName(fmt.Sprintf("items[%d].units[%d]", i, j), id); err != nil {
			return err
		}
	}
	return nil
}

// unitAsk is what a hold asks of one pool's units: the units it names, and
// how many more the service picks (adjacent: consecutive in one group).
// A line that gives only a quantity asks to pick that many, should its pool
// turn out to hold units.
type unitAsk struct {
	named    []string
	pick     int64
	adjacent bool
}

// asks returns what the request asks of units, per SKU (nil when no line
// names units or asks for adjacent ones). A SKU asked for adjacent units
// must be one line of the request, and no unit may be named twice.
func (r HoldRequest) asks() (map[string]unitAsk, error) {
	var out map[string]unitAsk
	for _, it := range r.Items {
		if it.Units == nil && !it.Adjacent {
			continue
		}
		if out == nil {
			out = map[string]unitAsk{}
		}
		a := out[it.SKU]
		a.named = append(a.named, it.Units...)
		if it.Adjacent {
			a.pick, a.adjacent = it.Quantity, true
		}
		out[it.SKU] = a
	}
	for sku, a := range out {
		seen := map[string]bool{}
		for _, id := range a.named {
			if seen[id] {
				return nil, domain.Invalid("items name unit %q of SKU %q twice", id, sku)
			}
			seen[id] = true
		}
		lines := 0
		var at *string
		for _, it := range r.Items {
			if it.SKU == sku {
				lines++
				if it.Units == nil && !it.Adjacent {
					a.pick += it.Quantity // a line of a quantity beside lines naming units
				}
				switch {
				case at == nil:
					at = &it.Location
				case *at != it.Location:
					return nil, domain.Invalid("items name units of SKU %q on lines with different locations: a pool of units lives at one location, so give every line of that SKU the same location, or none", sku)
				}
			}
		}
		if a.adjacent && lines > 1 {
			return nil, domain.Invalid("items ask for adjacent units of SKU %q: give that SKU in one line", sku)
		}
		a.named = sortedIDs(a.named)
		out[sku] = a
	}
	return out, nil
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

// want is one line of a hold as asked, before its batch allocates it: a
// quantity of a SKU's pool, at the location named, or, with Location
// empty, wherever the batch finds it (Split: from several locations if no
// one has it all).
type want struct {
	SKU, Location, Pool string
	Quantity            int64
	Split               bool
}

// key is the batcher's key of the stock rows w draws on (see rowKey; an
// empty location stands for every location of its pool).
func (w want) key() string { return rowKey(w.SKU, w.Location, w.Pool) }

// row is w as the rows it draws on: a Line without a quantity.
func (w want) row() Line { return Line{SKU: w.SKU, Location: w.Location, Pool: w.Pool} }

// wants sums the request's quantities per (sku, location named) and sorts
// them byte by byte, the order in which stock rows are locked everywhere
// (and the order a hold's refusal picks its failing line in). Lines of a
// SKU that name no location are one line, split if any of them asks.
func (r HoldRequest) wants(pool string) []want {
	if len(r.Items) == 1 { // most holds: nothing to sum or sort
		it := r.Items[0]
		return []want{{SKU: it.SKU, Location: it.Location, Pool: pool, Quantity: it.count(), Split: it.Split}}
	}
	type key struct{ sku, location string }
	sum := map[key]*want{}
	for _, it := range r.Items {
		k := key{it.SKU, it.Location}
		w := sum[k]
		if w == nil {
			w = &want{SKU: it.SKU, Location: it.Location, Pool: pool}
			sum[k] = w
		}
		w.Quantity += it.count()
		w.Split = w.Split || it.Split
	}
	out := make([]want, 0, len(sum))
	for _, w := range sum {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b want) int { return compareLines(a.row(), b.row()) })
	return out
}

// hold is a validated request with its terms settled.
type hold struct {
	req   HoldRequest
	id    uuid.UUID
	hash  string
	ttl   int64
	wants []want
	// maxPerOrder is the campaign's cap of units of one SKU per hold; nil:
	// none.
	maxPerOrder *int64
	// asks is what it asks of units with an identity, by poolKey (nil:
	// quantities only).
	asks map[string]unitAsk
}

// mayUse reports whether the hold may take stock at location: any, unless
// its client's key is bound to some.
func (h hold) mayUse(location string) bool {
	return h.req.Locations == nil || slices.Contains(h.req.Locations, location)
}

// Hold holds stock for an order, all lines or none. The boolean reports an
// idempotent replay: the key was used before with the same request, and the
// first answer is returned.
func (s *Service) Hold(ctx context.Context, req HoldRequest) (r Reservation, replayed bool, err error) {
	defer func() { s.holdAnswered(holdOutcome(replayed, err)) }()
	if err := req.Validate(); err != nil {
		return Reservation{}, false, err
	}
	// The id and the hash wait until a batch needs them: a hold refused
	// from memory needs neither.
	h := hold{req: req, ttl: req.TTLSeconds}
	if h.ttl == 0 {
		h.ttl = int64(DefaultTTL.Seconds())
	}
	pool := MainPool
	if req.Campaign != "" {
		pool = req.Campaign
	}
	h.wants = req.wants(pool)
	for _, w := range h.wants {
		s.rec.HoldAsked(w.SKU)
	}
	if asks, _ := req.asks(); asks != nil { // validated above
		h.asks = make(map[string]unitAsk, len(asks))
		for sku, a := range asks {
			h.asks[poolKey(sku, pool)] = a
		}
	}
	if req.Campaign != "" {
		ttl, maxPerOrder, err := s.campaignTerms(ctx, req.Campaign, h.wants[0].SKU)
		if err != nil {
			// A replay must not fail because the campaign has since ended,
			// and a key reused with another body is told so first.
			r, replayed, rerr := s.replay(ctx, req.Client, req.IdempotencyKey, req.hash(), h.ttl)
			if rerr == nil && replayed {
				return r, true, nil
			}
			if errors.Is(rerr, domain.ErrKeyReused) {
				return Reservation{}, false, rerr
			}
			return Reservation{}, false, err
		}
		h.ttl, h.maxPerOrder = ttl, maxPerOrder
	}
	if v, ok := s.soldOut.refuse(h); ok && !s.keysInFlight.has(req.Client, req.IdempotencyKey) {
		// A retry of a hold granted, here or on another instance, gets
		// its first answer: the key is looked up first (replay.go), and a
		// key that made a hold is answered from the hold it made, read
		// without locking the stock rows a batch would lock: a replay
		// changes no stock, so it never waits for the row or answers busy
		// while other transactions keep it hot. A lookup or a read that
		// failed goes to its batch, as does a retry whose first attempt a
		// batch here has not answered yet.
		switch k := s.keyUsed(ctx, req.Client, req.IdempotencyKey); {
		case k.err == nil && !k.made:
			s.rec.SoldOutInMemory()
			return Reservation{}, false, s.refusal(ctx, h, v)
		case k.err == nil && k.hash != req.hash():
			return Reservation{}, false, errKeyReused(req.IdempotencyKey, k.id)
		case k.err == nil:
			r, replayed, err := s.replay(ctx, req.Client, req.IdempotencyKey, req.hash(), h.ttl)
			if err == nil && replayed {
				return r, true, nil
			}
			if errors.Is(err, domain.ErrKeyReused) {
				return Reservation{}, false, err
			}
		}
	}
	h.id, h.hash = newHoldID(), req.hash()
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
// none, and an error when the key was used for a different request. ttl
// is the request's time to live; a campaign's hold took its campaign's.
func (s *Service) replay(ctx context.Context, client, key, hash string, ttl int64) (Reservation, bool, error) {
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
	if row.Campaign != nil {
		terms, err := q.CampaignHoldTerms(ctx, *row.Campaign)
		if err != nil {
			return Reservation{}, false, fmt.Errorf("the campaign of hold %s: %w", row.ID, err)
		}
		ttl = terms.HoldTtlSeconds
	}
	rows, err := q.ReservationFirstLines(ctx, &row.ID)
	if err != nil {
		return Reservation{}, false, err
	}
	first := make([]Line, len(rows))
	for i, l := range rows {
		first[i] = lineOf(l.Sku, l.Location, l.Pool, l.Quantity, l.Units)
	}
	return firstAnswer(row, first, ttl), true, nil
}

// whyNot explains, after the fact, why line w could not be held: its
// campaign is not taking holds, the SKU has no stock (at the location
// named, or which does not exist), or it is paused.
func (s *Service) whyNot(ctx context.Context, w want) error {
	q := db.New(s.pool)
	if w.Pool != MainPool {
		if terms, err := q.CampaignHoldTerms(ctx, w.Pool); err == nil && !terms.Open {
			return &domain.Error{Code: domain.CodeCampaignNotActive, SKU: w.SKU, Pool: w.Pool,
				Detail: fmt.Sprintf("campaign %q is not taking holds (status %s)", w.Pool, terms.Status)}
		}
	}
	if w.Location != "" {
		if _, err := q.LocationGet(ctx, w.Location); errors.Is(err, pgx.ErrNoRows) {
			return errUnknownLocation(w.Location, true)
		}
	}
	rows, err := q.StockListBySKU(ctx, w.SKU)
	if err != nil {
		return err
	}
	var (
		found  bool
		paused *db.Stock
	)
	for i, r := range rows {
		if r.Pool != w.Pool || (w.Location != "" && r.Location != w.Location) {
			continue
		}
		found = true
		if r.Status == StockPaused && paused == nil {
			paused = &rows[i]
		}
	}
	switch {
	case !found:
		detail := fmt.Sprintf("SKU %q has no stock", w.SKU)
		switch {
		case w.Pool != MainPool:
			detail = fmt.Sprintf("SKU %q is not part of campaign %q", w.SKU, w.Pool)
		case w.Location != "":
			detail = fmt.Sprintf("SKU %q has no stock at %s", w.SKU, w.Location)
		}
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: w.SKU, Pool: w.Pool, Location: w.Location, Detail: detail}
	case paused != nil:
		return &domain.Error{Code: domain.CodeSKUPaused, SKU: w.SKU, Pool: w.Pool, Location: paused.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) is paused at %s: %s", w.SKU, w.Pool, paused.Location, domain.Value(paused.PausedReason))}
	}
	return &domain.Error{Code: domain.CodeOutOfStock, SKU: w.SKU, Pool: w.Pool, Location: w.Location,
		Detail: fmt.Sprintf("SKU %q (pool %s) has less than %d available", w.SKU, w.Pool, w.Quantity)}
}

// holdCall is one caller's hold waiting for its batch.
type holdCall struct {
	ctx  context.Context
	h    hold
	rows []string // keys of the stock rows its lines draw on
	done chan holdResult
	// timeouts counts the lock timeouts its batches ran into.
	timeouts int
	// waited: a batch sent it on to the next one (see laterForRuns).
	waited bool
	// answered, when set, is told of the call's answer (keysInFlight).
	answered func()
	// joined, when set, makes the call changes to holds on the rows of
	// h.wants (each with its location) instead of a new hold: see
	// rowbatch.go.
	joined *joined
}

type holdResult struct {
	r        Reservation
	replayed bool
	err      error
	joined   joinedResult
}

func (c *holdCall) keys() []string   { return c.rows }
func (c *holdCall) gone() bool       { return c.ctx.Err() != nil }
func (c *holdCall) answer(err error) { c.reply(holdResult{err: err}) }

func (c *holdCall) reply(r holdResult) {
	select {
	case c.done <- r:
		if c.answered != nil {
			c.answered()
		}
	default: // answered already
	}
}

// rowKey identifies a stock row; an empty location stands, for the
// batcher and the busy checks, for its pool at every location.
func rowKey(sku, location, pool string) string { return sku + "\x00" + location + "\x00" + pool }

// poolKey identifies a SKU's pool, at whichever location.
func poolKey(sku, pool string) string { return sku + "\x00" + pool }

// holdBatched queues h for the next hold batch and waits for its answer. A
// caller that stops waiting gets ctx's error; its hold may still commit,
// as a hold whose caller vanished mid-transaction may on any path, and a
// retry with the same Idempotency-Key finds it.
func (s *Service) holdBatched(ctx context.Context, h hold) (Reservation, bool, error) {
	c := &holdCall{ctx: ctx, h: h, done: make(chan holdResult, 1)}
	for _, w := range h.wants {
		c.rows = append(c.rows, w.key())
	}
	c.answered = s.keysInFlight.add(h.req.Client, h.req.IdempotencyKey)
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
	s.rec.HoldBatch(len(calls))
	if s.holds.anyBlocked(calls) {
		rows := map[string]Line{}
		for _, c := range calls {
			for _, w := range c.h.wants {
				rows[w.key()] = w.row()
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
			if l, ok := firstLocked(c.h.wants, locked); ok {
				c.answer(s.lockWaits.answered(errBusy(l)))
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
			for _, w := range c.h.wants {
				rows[w.key()] = w.row()
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
			l, onLocked := firstLocked(c.h.wants, locked)
			switch {
			case c.timeouts > maxLockTimeouts && onLocked:
				c.answer(s.lockWaits.answered(errBusy(l)))
			case c.timeouts > maxLockTimeouts:
				c.answer(errBusy(c.h.wants[0].row()))
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

// holdBatch is one transaction for many holds, in two round trips, in
// four steps:
//
//  1. insertAndLock (round trip 1): begin; set the lock timeout; insert
//     every hold's reservation (a key used before is skipped); lock the
//     stock rows every line may draw on (the location it names, or every
//     location of its pool), in (sku, location, pool) byte order, reading
//     their locations' priority and switches with them.
//  2. decideHolds, in Go, in arrival order, against the rows as locked:
//     where each line is taken from, and whether the hold is granted.
//  3. writeHolds (round trip 2): delete the rows of the holds not granted;
//     move the counters, insert the lines and the ledger rows of the
//     granted ones in one statement; read the holds the replayed keys
//     made; commit.
//  4. answer each caller.
//
// A request whose key another request of the batch uses too goes again
// with the next batch, once the first one's fate is committed.
func (s *Service) holdBatch(ctx context.Context, calls []*holdCall) ([]*holdCall, error) {
	leaders, again := firstOfEachKey(calls)
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer pc.Release()
	conn := pc.Conn()
	defer rollback(conn)
	defer s.timeBatch(BatchHold, time.Now())

	seen := s.soldOut.seenNow()
	ft, err := s.insertAndLock(ctx, conn, leaders)
	if err != nil {
		return nil, err
	}
	rows := ft.rows
	s.hot.mark(rows.lockOrder, time.Now())
	if err := s.readUnits(ctx, conn, leaders, rows, ft.pre); err != nil {
		return nil, err
	}
	b := s.planBatch(leaders, ft.made, ft.stop)
	changed := decideJoined(b.joined, ft.holds, rows)
	verdicts, taken := decideHolds(rows, b.holds())
	verdicts = b.laterForRuns(verdicts, changed.gaveUnits)
	again = append(again, b.later...)
	w := b.writes(verdicts, taken, rows.lockOrder)
	w.change = &changed.ch
	firsts, firstsOf, after, err := s.writeHolds(ctx, conn, w)
	if err != nil {
		return nil, err
	}
	changed.ch.count(s.rec)
	s.soldOut.forgetLines(&changed.ch)
	if !ft.stop.on {
		s.soldOut.remember(seen, rows, b.holds(), verdicts)
	}
	changed.answer(b.joined, after)
	b.answer(ctx, s, ft.made, verdicts, firsts, firstsOf)
	return again, nil
}

// firstOfEachKey splits calls into the first request of each (client, key)
// and the rest, which go again with a later batch.
func firstOfEachKey(calls []*holdCall) (leaders, again []*holdCall) {
	seen := map[[2]string]bool{}
	for _, c := range calls {
		if c.joined != nil {
			leaders = append(leaders, c)
			continue
		}
		k := [2]string{c.h.req.Client, c.h.req.IdempotencyKey}
		if seen[k] {
			again = append(again, c)
			continue
		}
		seen[k] = true
		leaders = append(leaders, c)
	}
	return leaders, again
}

// firstTrip is what a hold batch's first round trip returns: the
// reservations inserted (by id), the stock rows as locked (in lock order,
// with the units read of the pools of units it knew of, see holdunits.go),
// what it read of units (by poolKey), the stop-sale switch as the batch
// reads it, and the holds of its joined calls it locked (rowbatch.go).
type firstTrip struct {
	made  map[uuid.UUID]db.Reservation
	rows  stockRows
	pre   map[string]*unitNeed
	stop  stopSale
	holds map[uuid.UUID]*lockedHold
}

// insertAndLock is a hold batch's first round trip.
func (s *Service) insertAndLock(ctx context.Context, conn *pgx.Conn, leaders []*holdCall) (firstTrip, error) {
	// Insert in (client, key) order, so that two batches sharing keys wait
	// on each other in one order; decide in arrival order.
	byKey := slices.Clone(leaders)
	slices.SortFunc(byKey, func(a, b *holdCall) int {
		if d := strings.Compare(a.h.req.Client, b.h.req.Client); d != 0 {
			return d
		}
		return strings.Compare(a.h.req.IdempotencyKey, b.h.req.IdempotencyKey)
	})
	var ins db.ReservationsInsertManyParams
	for _, c := range byKey {
		if c.joined != nil {
			continue
		}
		h := c.h
		ins.Ids = append(ins.Ids, h.id)
		ins.Clients = append(ins.Clients, h.req.Client)
		ins.IdempotencyKeys = append(ins.IdempotencyKeys, h.req.IdempotencyKey)
		ins.RequestHashes = append(ins.RequestHashes, h.hash)
		ins.OrderRefs = append(ins.OrderRefs, h.req.OrderRef)
		ins.Campaigns = append(ins.Campaigns, h.req.Campaign)
		ins.TtlSeconds = append(ins.TtlSeconds, h.ttl)
	}
	var clients []string
	for _, c := range byKey {
		if c.joined != nil {
			continue
		}
		if n := len(clients); n == 0 || clients[n-1] != c.h.req.Client {
			clients = append(clients, c.h.req.Client)
		}
	}
	lock := lockKeys(leaders)

	p := newPipe(conn)
	q := db.New(p)
	p.begin()
	q.BatchSettingsSet(ctx, []string{s.stopSaleWait})
	stopping := queueStopSale(ctx, q, clients, s.lockTimeout)
	inserting := q.ReservationsInsertMany(ctx, []db.ReservationsInsertManyParams{ins})
	locking := q.StockLockMany(ctx, []db.StockLockManyParams{lock})
	needs, order := unitNeeds(leaders, s.unitPools.has)
	reading := queueUnits(ctx, q, needs, order, false)
	joining := queueJoined(ctx, q, leaders)
	var (
		inserted []db.Reservation
		stock    []db.StockLockManyRow
		ft       firstTrip
		units    map[string]*poolUnits
	)
	err := p.roundTrip(ctx, func() {
		ft.stop = readStopSale(stopping)
		inserted, _ = collect(inserting.Query)
		stock, _ = collect(locking.Query)
		units = reading.read()
		ft.holds = joining.read()
	})
	if err != nil && ft.stop.waitedOut {
		return firstTrip{}, errFlipSlow
	}
	if err != nil {
		return firstTrip{}, fmt.Errorf("insert and lock: %w", err)
	}

	made := make(map[uuid.UUID]db.Reservation, len(inserted))
	for _, r := range inserted {
		made[r.ID] = r
	}
	locked := make([]lockedRow, len(stock))
	for i, r := range stock {
		locked[i] = lockedRow{sku: r.Sku, location: r.Location, pool: r.Pool, available: r.Available, short: r.Short, status: r.Status,
			serialized: r.Serialized, priority: r.Priority, active: r.Active, stopped: domain.Value(r.StopSaleReason)}
	}
	rows := newStockRows(locked)
	rows.lockOrder = make([]Line, len(stock))
	for i, r := range stock {
		rows.lockOrder[i] = Line{SKU: r.Sku, Location: r.Location, Pool: r.Pool}
	}
	attachUnits(rows, units)
	ft.made, ft.rows, ft.pre = made, rows, needs
	return ft, nil
}

// lockKeys is what StockLockMany locks for a batch: per (sku, pool), every
// location when a line of the batch lets the batch allocate it, else the
// locations its lines name.
func lockKeys(leaders []*holdCall) db.StockLockManyParams {
	anywhere := map[string]bool{}
	for _, c := range leaders {
		for _, w := range c.h.wants {
			if w.Location == "" {
				anywhere[poolKey(w.SKU, w.Pool)] = true
			}
		}
	}
	var lock db.StockLockManyParams
	seen := map[string]bool{}
	for _, c := range leaders {
		for _, w := range c.h.wants {
			loc := w.Location
			if anywhere[poolKey(w.SKU, w.Pool)] {
				loc = ""
			}
			if k := rowKey(w.SKU, loc, w.Pool); !seen[k] {
				seen[k] = true
				lock.Skus = append(lock.Skus, w.SKU)
				lock.Pools = append(lock.Pools, w.Pool)
				lock.Locations = append(lock.Locations, loc)
			}
		}
	}
	return lock
}

// batchPlan is a hold batch's requests batchPlan out once their reservations
// are inserted: the ones to decide, the replays of a key used before, the
// ones whose caller left before anything was decided, and the ones a
// stop-sale refuses (with why).
type batchPlan struct {
	deciding []*holdCall
	replays  []*holdCall
	left     []*holdCall
	stopped  []*holdCall
	stopErrs []error
	// joined are the calls that change holds on the batch's rows.
	joined []*holdCall
	// later are the holds that go again with the next batch, undecided
	// here (laterForRuns).
	later []*holdCall
}

// laterForRuns takes out of the batch, to go again with the next one,
// the holds refused for want of adjacent units on a pool the batch's
// joined changes handed units back to (gave, by poolKey): the windows of
// adjacent units were read before those units were free, so the next
// batch, which reads them free, decides. A hold goes again so once. It
// returns the verdicts of the holds left.
func (b *batchPlan) laterForRuns(verdicts []verdict, gave map[string]bool) []verdict {
	if len(gave) == 0 {
		return verdicts
	}
	var (
		deciding []*holdCall
		kept     []verdict
	)
	for i, c := range b.deciding {
		v := verdicts[i]
		if !v.granted && v.why == domain.CodeOutOfStock && v.left < 0 && gave[poolKey(v.line.SKU, v.line.Pool)] && !c.waited {
			c.waited = true
			b.later = append(b.later, c)
			continue
		}
		deciding, kept = append(deciding, c), append(kept, v)
	}
	b.deciding = deciding
	return kept
}

// planBatch sorts a batch's requests out, the stop-sale switches as the
// batch read them refusing the holds they cover before anything is
// decided: those take nothing from the rows.
func (s *Service) planBatch(leaders []*holdCall, made map[uuid.UUID]db.Reservation, stop stopSale) batchPlan {
	var b batchPlan
	for _, c := range leaders {
		if c.joined != nil {
			b.joined = append(b.joined, c)
			continue
		}
		if _, ok := made[c.h.id]; !ok {
			b.replays = append(b.replays, c)
			continue
		}
		if s.beforeGrant != nil {
			s.beforeGrant(c.h.req)
		}
		if c.gone() {
			b.left = append(b.left, c) // hold nothing for a caller that left
			continue
		}
		if err := stop.refuses(c.h.req.Client); err != nil {
			b.stopped, b.stopErrs = append(b.stopped, c), append(b.stopErrs, err)
			continue
		}
		b.deciding = append(b.deciding, c)
	}
	return b
}

func (b batchPlan) holds() []hold {
	out := make([]hold, len(b.deciding))
	for i, c := range b.deciding {
		out[i] = c.h
	}
	return out
}

// holdWrites is what a hold batch's second round trip writes.
type holdWrites struct {
	drop   []uuid.UUID // reservations inserted but not granted
	apply  db.StockHoldsApplyParams
	byKeys db.ReservationsGetByKeysParams // the replays' first holds
	// change are the changes to holds the batch's joined calls decided,
	// written before the grants.
	change *changes
}

// writes turns the verdicts into the batch's writes; lockOrder is the
// order the rows' counters move in.
func (b batchPlan) writes(verdicts []verdict, taken map[string]int64, lockOrder []Line) holdWrites {
	var w holdWrites
	for _, c := range slices.Concat(b.left, b.stopped, b.later) {
		w.drop = append(w.drop, c.h.id)
	}
	for i, c := range b.deciding {
		if !verdicts[i].granted {
			w.drop = append(w.drop, c.h.id)
			continue
		}
		for _, l := range verdicts[i].lines {
			w.apply.LineIds = append(w.apply.LineIds, c.h.id)
			w.apply.LineSkus = append(w.apply.LineSkus, l.SKU)
			w.apply.LineLocations = append(w.apply.LineLocations, l.Location)
			w.apply.LinePools = append(w.apply.LinePools, l.Pool)
			w.apply.LineQuantities = append(w.apply.LineQuantities, l.Quantity)
			w.apply.LineActors = append(w.apply.LineActors, cmp.Or(c.h.req.Actor, c.h.req.Client))
			w.apply.LineActorKeys = append(w.apply.LineActorKeys, c.h.req.ActorKey)
			for _, id := range verdicts[i].picked[rowKey(l.SKU, l.Location, l.Pool)] {
				w.apply.UnitReservationIds = append(w.apply.UnitReservationIds, c.h.id)
				w.apply.UnitSkus = append(w.apply.UnitSkus, l.SKU)
				w.apply.UnitLocations = append(w.apply.UnitLocations, l.Location)
				w.apply.UnitPools = append(w.apply.UnitPools, l.Pool)
				w.apply.UnitIds = append(w.apply.UnitIds, id)
			}
		}
	}
	for _, row := range lockOrder {
		if q := taken[rowKey(row.SKU, row.Location, row.Pool)]; q > 0 {
			w.apply.RowSkus = append(w.apply.RowSkus, row.SKU)
			w.apply.RowLocations = append(w.apply.RowLocations, row.Location)
			w.apply.RowPools = append(w.apply.RowPools, row.Pool)
			w.apply.RowQuantities = append(w.apply.RowQuantities, q)
		}
	}
	for _, c := range b.replays {
		w.byKeys.Clients = append(w.byKeys.Clients, c.h.req.Client)
		w.byKeys.IdempotencyKeys = append(w.byKeys.IdempotencyKeys, c.h.req.IdempotencyKey)
	}
	return w
}

// writeHolds is a hold batch's second round trip; it commits, and returns
// the holds the replayed keys made, with the lines they were granted, and
// the holds its joined calls changed, as they ended up.
func (s *Service) writeHolds(ctx context.Context, conn *pgx.Conn, w holdWrites) ([]db.Reservation, []db.ReservationFirstLinesGetByKeysRow, []db.Reservation, error) {
	p := newPipe(conn)
	q := db.New(p)
	var (
		replayed  *db.ReservationsGetByKeysBatchResults
		lines     *db.ReservationFirstLinesGetByKeysBatchResults
		rereading *db.ReservationsGetManyBatchResults
	)
	if len(w.drop) > 0 {
		q.ReservationsDelete(ctx, [][]uuid.UUID{w.drop})
	}
	if w.change != nil && w.change.queue(ctx, q) != nil {
		rereading = q.ReservationsGetMany(ctx, [][]uuid.UUID{w.change.p.Ids})
	}
	if len(w.apply.LineIds) > 0 {
		q.StockHoldsApply(ctx, []db.StockHoldsApplyParams{w.apply})
	}
	if len(w.byKeys.Clients) > 0 {
		replayed = q.ReservationsGetByKeys(ctx, []db.ReservationsGetByKeysParams{w.byKeys})
		lines = q.ReservationFirstLinesGetByKeys(ctx, []db.ReservationFirstLinesGetByKeysParams{{
			Clients: w.byKeys.Clients, IdempotencyKeys: w.byKeys.IdempotencyKeys}})
	}
	p.commit()
	var (
		firsts   []db.Reservation
		firstsOf []db.ReservationFirstLinesGetByKeysRow
		after    []db.Reservation
	)
	err := p.roundTrip(ctx, func() {
		if rereading != nil {
			w.change.readSoldShort()
			after, _ = collect(rereading.Query)
		}
		if replayed != nil {
			firsts, _ = collect(replayed.Query)
			firstsOf, _ = collect(lines.Query)
		}
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("grant and commit: %w", err)
	}
	if w.change != nil {
		s.soldShort(ctx, w.change)
	}
	return firsts, firstsOf, after, nil
}

// answer answers every caller of a committed hold batch.
func (b batchPlan) answer(ctx context.Context, s *Service, made map[uuid.UUID]db.Reservation, verdicts []verdict,
	firsts []db.Reservation, firstsOf []db.ReservationFirstLinesGetByKeysRow) {
	for i, c := range b.deciding {
		if v := verdicts[i]; v.granted {
			s.recent.add(c.h.id, v.lines)
			c.reply(holdResult{r: newReservation(made[c.h.id], withUnits(v.lines, v.picked))})
		} else {
			c.answer(s.refusal(ctx, c.h, v))
		}
	}
	for _, c := range b.left {
		c.answer(c.ctx.Err())
	}
	for i, c := range b.stopped {
		c.answer(b.stopErrs[i])
	}
	if len(b.replays) > 0 {
		s.answerReplays(b.replays, firsts, firstsOf)
	}
}

// refusal explains why hold h was refused: what the batch saw.
func (s *Service) refusal(ctx context.Context, h hold, v verdict) error {
	l := v.line
	where := ""
	if l.Location != "" {
		where = " at " + l.Location
	}
	switch {
	case v.why == domain.CodeLimitExceeded:
		return capError(h.req.Campaign, l, v.left)
	case v.why == domain.CodeUnitUnavailable && len(v.units) == 0:
		return &domain.Error{Code: domain.CodeUnitUnavailable, SKU: l.SKU, Pool: l.Pool, Location: l.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) has no units with an identity%s: adjacent asks for units of one group", l.SKU, l.Pool, where)}
	case v.why == domain.CodeUnitUnavailable:
		return errUnitsUnavailable(l.SKU, l.Pool, v.units)
	case v.why == domain.CodeOutOfStock && v.left < 0:
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool, Location: l.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) has no %d adjacent units left in one group%s", l.SKU, l.Pool, l.Quantity, where)}
	case v.why == domain.CodeStopSale && l.Location != "" && v.reason != "":
		return errStopSaleAt(l.Location, v.reason)
	case v.why == domain.CodeStopSale && v.at != "":
		// An allocated line whose every location is stopped: its stock
		// is there, out of sale for now.
		return &domain.Error{Code: domain.CodeStopSale, SKU: l.SKU, Pool: l.Pool, Location: v.at,
			Detail: fmt.Sprintf("SKU %q (pool %s) is on sale at no location this hold may use: sales are stopped at %s (%s); no new holds there until an operator lifts it",
				l.SKU, l.Pool, v.at, v.reason)}
	case v.why == domain.CodeStopSale:
		return errStopSale(v.reason)
	case v.why == domain.CodeLocationInactive:
		return &domain.Error{Code: domain.CodeLocationInactive, SKU: l.SKU, Pool: l.Pool, Location: l.Location,
			Detail: fmt.Sprintf("location %q is inactive: it takes no new holds", l.Location)}
	case l.Pool != MainPool && v.why != domain.CodeOutOfStock:
		// A campaign's pool that is missing or paused: the campaign may
		// have ended meanwhile, which is what the caller must hear.
		return s.whyNot(ctx, l)
	case v.why == domain.CodeUnknownSKU && l.Location != "":
		return s.whyNot(ctx, l)
	case v.why == domain.CodeUnknownSKU:
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: l.SKU, Pool: l.Pool, Detail: fmt.Sprintf("SKU %q has no stock", l.SKU)}
	case v.why == domain.CodeSKUPaused:
		return s.whyNot(ctx, l)
	case l.Location == "" && v.places == 1 && h.req.Locations == nil:
		// fmt.Sprintf("SKU %q (pool %s) has %d available, %d requested"),
		// without fmt: this is the refusal of a SKU sold out, answered from
		// memory tens of thousands of times a second.
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: "SKU " + strconv.Quote(l.SKU) + " (pool " + l.Pool + ") has " + strconv.FormatInt(v.left, 10) +
				" available, " + strconv.FormatInt(l.Quantity, 10) + " requested"}
	case l.Location == "" && h.req.Locations != nil && l.Split:
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) has %d available across the active locations this key may use (%s), %d requested",
				l.SKU, l.Pool, v.left, strings.Join(h.req.Locations, ", "), l.Quantity)}
	case l.Location == "" && h.req.Locations != nil:
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s): no location this key may use (%s) has %d available (the most at one is %d)",
				l.SKU, l.Pool, strings.Join(h.req.Locations, ", "), l.Quantity, v.left)}
	case l.Location == "" && l.Split:
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) has %d available across its active locations, %d requested", l.SKU, l.Pool, v.left, l.Quantity)}
	case l.Location == "":
		return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s): no active location has %d available (the most at one is %d; \"split\": true takes a line from several)",
				l.SKU, l.Pool, l.Quantity, v.left)}
	}
	return &domain.Error{Code: domain.CodeOutOfStock, SKU: l.SKU, Pool: l.Pool, Location: l.Location,
		Detail: fmt.Sprintf("SKU %q (pool %s) has %d available%s, %d requested", l.SKU, l.Pool, v.left, where, l.Quantity)}
}

// answerReplays answers the requests whose key was used before, from the
// holds those keys made and the lines they were granted: their first
// answers.
func (s *Service) answerReplays(calls []*holdCall, firsts []db.Reservation, lines []db.ReservationFirstLinesGetByKeysRow) {
	byKey := make(map[[2]string]db.Reservation, len(firsts))
	for _, r := range firsts {
		byKey[[2]string{r.Client, r.IdempotencyKey}] = r
	}
	linesOf := map[uuid.UUID][]Line{}
	for _, l := range lines {
		linesOf[l.ReservationID] = append(linesOf[l.ReservationID], lineOf(l.Sku, l.Location, l.Pool, l.Quantity, l.Units))
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
			c.reply(holdResult{r: firstAnswer(r, linesOf[r.ID], c.h.ttl), replayed: true})
		}
	}
}

// withUnits returns lines with the units picked for them.
func withUnits(lines []Line, picked map[string][]string) []Line {
	if len(picked) == 0 {
		return lines
	}
	out := slices.Clone(lines)
	for i, l := range out {
		if units := picked[rowKey(l.SKU, l.Location, l.Pool)]; len(units) > 0 {
			slices.SortFunc(units, strings.Compare)
			out[i].Units = units
		}
	}
	return out
}
