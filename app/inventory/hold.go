package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/stock"
)

// Hold holds stock for an order, all lines or none. The boolean reports an
// idempotent replay: the key was used before with the same request, and the
// first answer is returned.
func (s *Service) Hold(ctx context.Context, req HoldRequest) (r Reservation, replayed bool, err error) {
	defer func() { s.holdAnswered(holdstats.Outcome(replayed, err)) }()
	if err := req.Validate(); err != nil {
		return Reservation{}, false, err
	}
	if req.DefaultStrategy == "" {
		req.DefaultStrategy = s.cfg.Strategy
	}
	r, replayed, err = s.hold(ctx, req)
	if err != nil && s.bundleUnseen(ctx, req, err) {
		return s.hold(ctx, req) // a bundle defined on another instance (bundles.go)
	}
	return r, replayed, err
}

// hold is Hold of a valid request.
func (s *Service) hold(ctx context.Context, req HoldRequest) (Reservation, bool, error) {
	// The id and the hash wait until a batch needs them: a hold refused
	// from memory needs neither.
	h := hold{req: req, ttl: req.TTLSeconds}
	if h.ttl == 0 {
		h.ttl = int64(DefaultTTL.Seconds())
	}
	pool := holdPool(req)
	wants, err := s.holdWants(ctx, req)
	if err != nil {
		return Reservation{}, false, err
	}
	h.wants = wants
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
		terms, err := s.campaignTerms(ctx, req.Campaign, h.wants[0].SKU)
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
		h.ttl, h.maxPerOrder = terms.HoldTtlSeconds, terms.MaxPerOrder
		h.maxPerCustomer, h.customerWindow = terms.MaxPerCustomer, terms.CustomerWindowSeconds
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

// campaignTerms checks that a campaign takes holds now and returns its
// terms: TTL, caps per order and per customer (nil: none); a refusal names
// sku, the hold's first line, as the contract asks.
func (s *Service) campaignTerms(ctx context.Context, id, sku string) (db.CampaignHoldTermsRow, error) {
	terms, err := db.New(s.pool).CampaignHoldTerms(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return terms, &domain.Error{Code: domain.CodeUnknownCampaign, Reference: true, Detail: fmt.Sprintf("campaign %q does not exist", id)}
	}
	if err != nil {
		return terms, err
	}
	if !terms.Open {
		return terms, &domain.Error{Code: domain.CodeCampaignNotActive, Detail: fmt.Sprintf("campaign %q is not taking holds (status %s)", id, terms.Status), SKU: sku, Pool: id}
	}
	return terms, nil
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
		first[i] = promisedLine(withBundle(lineOf(l.Sku, l.Location, l.Pool, l.Quantity, l.Units), l.BundleSku, grantedBundle(l.BundleQuantity, l.SkuGranted, l.BundlePer), l.BundleVersion),
			l.Backordered, l.ExpectedOn)
	}
	return firstAnswer(row, first, ttl), true, nil
}

// whyNot explains, after the fact, why line w could not be held when its
// batch refused it for why (unknown_sku or sku_paused): its campaign is not
// taking holds, the SKU has no stock (at the location named, or which does
// not exist), or it is paused. When none of those is true any more (the
// pool was resumed, or stock made, after the batch read it), it says what
// the batch saw: never out_of_stock, which the batch did not find.
func (s *Service) whyNot(ctx context.Context, w want, why domain.Code) error {
	q := db.New(s.pool)
	if w.Pool != stock.MainPool {
		if terms, err := q.CampaignHoldTerms(ctx, w.Pool); err == nil && !terms.Open {
			return &domain.Error{Code: domain.CodeCampaignNotActive, SKU: w.SKU, Pool: w.Pool,
				Detail: fmt.Sprintf("campaign %q is not taking holds (status %s)", w.Pool, terms.Status)}
		}
	}
	if w.Location != "" {
		if _, err := q.LocationGet(ctx, w.Location); errors.Is(err, pgx.ErrNoRows) {
			return stock.ErrUnknownLocation(w.Location, true)
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
		if r.Status == stock.StockPaused && paused == nil {
			paused = &rows[i]
		}
	}
	switch {
	case !found:
		detail := fmt.Sprintf("SKU %q has no stock", w.SKU)
		switch {
		case w.Pool != stock.MainPool:
			detail = fmt.Sprintf("SKU %q is not part of campaign %q", w.SKU, w.Pool)
		case w.Location != "":
			detail = fmt.Sprintf("SKU %q has no stock at %s", w.SKU, w.Location)
		}
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: w.SKU, Pool: w.Pool, Location: w.Location, Detail: detail}
	case paused != nil:
		return &domain.Error{Code: domain.CodeSKUPaused, SKU: w.SKU, Pool: w.Pool, Location: paused.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) is paused at %s: %s", w.SKU, w.Pool, paused.Location, domain.Value(paused.PausedReason))}
	}
	switch why {
	case domain.CodeSKUPaused:
		return &domain.Error{Code: domain.CodeSKUPaused, SKU: w.SKU, Pool: w.Pool, Location: w.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) was paused when this hold was decided; it is on sale again now", w.SKU, w.Pool)}
	case domain.CodeUnknownSKU:
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: w.SKU, Pool: w.Pool, Location: w.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) had no stock when this hold was decided; it has now", w.SKU, w.Pool)}
	}
	return &domain.Error{Code: domain.CodeOutOfStock, SKU: w.SKU, Pool: w.Pool, Location: w.Location,
		Detail: fmt.Sprintf("SKU %q (pool %s) has less than %d available", w.SKU, w.Pool, w.Quantity)}
}
