package inventory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// holdWrites is what a hold batch's second round trip writes.
type holdWrites struct {
	drop   []uuid.UUID // reservations inserted but not granted
	apply  db.StockHoldsApplyParams
	byKeys db.ReservationsGetByKeysParams // the replays' first holds
	// change are the changes to holds the batch's joined calls decided,
	// written before the grants.
	change *changes
}

// writes turns the verdicts into the batch's writes: taken and promised
// are the units granted per row from available and beyond it
// (backorders.go); lockOrder is the order the rows' counters move in.
func (b batchPlan) writes(verdicts []verdict, taken, promised map[string]int64, lockOrder []Line) holdWrites {
	var (
		w       holdWrites
		bundles []*BundleLine // per line, when any is a bundle's (nil: none)
	)
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
			if l.Bundle != nil && bundles == nil { // the first bundle line: the lines before it are of none
				bundles = make([]*BundleLine, len(w.apply.LineIds)-1)
			}
			if bundles != nil {
				bundles = append(bundles, l.Bundle)
			}
			w.apply.LineBackordered = append(w.apply.LineBackordered, l.Backordered)
			w.apply.LineExpectedOn = append(w.apply.LineExpectedOn, l.ExpectedOn)
			for _, id := range verdicts[i].picked[rowKey(l.SKU, l.Location, l.Pool)] {
				w.apply.UnitReservationIds = append(w.apply.UnitReservationIds, c.h.id)
				w.apply.UnitSkus = append(w.apply.UnitSkus, l.SKU)
				w.apply.UnitLocations = append(w.apply.UnitLocations, l.Location)
				w.apply.UnitPools = append(w.apply.UnitPools, l.Pool)
				w.apply.UnitIds = append(w.apply.UnitIds, id)
			}
		}
	}
	for _, bl := range bundles {
		if bl == nil {
			bl = &BundleLine{}
		}
		w.apply.LineBundleSkus = append(w.apply.LineBundleSkus, bl.SKU)
		w.apply.LineBundleQuantities = append(w.apply.LineBundleQuantities, bl.Quantity)
		w.apply.LineBundleVersions = append(w.apply.LineBundleVersions, bl.Version)
	}
	for _, row := range lockOrder {
		k := rowKey(row.SKU, row.Location, row.Pool)
		if q, b := taken[k], promised[k]; q > 0 || b > 0 {
			w.apply.RowSkus = append(w.apply.RowSkus, row.SKU)
			w.apply.RowLocations = append(w.apply.RowLocations, row.Location)
			w.apply.RowPools = append(w.apply.RowPools, row.Pool)
			w.apply.RowQuantities = append(w.apply.RowQuantities, q)
			w.apply.RowBackordered = append(w.apply.RowBackordered, b)
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
	p := batch.NewPipe(conn)
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
	p.Commit()
	var (
		firsts   []db.Reservation
		firstsOf []db.ReservationFirstLinesGetByKeysRow
		after    []db.Reservation
	)
	err := p.RoundTrip(ctx, func() {
		if rereading != nil {
			w.change.readSoldShort()
			after, _ = batch.Collect(rereading.Query)
		}
		if replayed != nil {
			firsts, _ = batch.Collect(replayed.Query)
			firstsOf, _ = batch.Collect(lines.Query)
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
			c.Answer(s.refusal(ctx, c.h, v))
		}
	}
	for _, c := range b.left {
		c.Answer(c.ctx.Err())
	}
	for i, c := range b.stopped {
		c.Answer(b.stopErrs[i])
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
	case l.bundle != nil && v.why == domain.CodeOutOfStock && v.left >= 0:
		return bundleRefusal(l, v)
	case v.why == domain.CodeLimitExceeded && v.limit != "":
		return limitError(h, v)
	case v.why == domain.CodeLimitExceeded:
		return capError(h.req.Campaign, l, v.left)
	case v.why == domain.CodeUnitUnavailable && len(v.units) == 0:
		return &domain.Error{Code: domain.CodeUnitUnavailable, SKU: l.SKU, Pool: l.Pool, Location: l.Location,
			Detail: fmt.Sprintf("SKU %q (pool %s) has no units with an identity%s: adjacent asks for units of one group", l.SKU, l.Pool, where)}
	case v.why == domain.CodeUnitUnavailable:
		return stock.ErrUnitsUnavailable(l.SKU, l.Pool, v.units)
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
	case l.Pool != stock.MainPool && v.why != domain.CodeOutOfStock:
		// A campaign's pool that is missing or paused: the campaign may
		// have ended meanwhile, which is what the caller must hear.
		return s.whyNot(ctx, l, v.why)
	case v.why == domain.CodeUnknownSKU && l.Location != "":
		return s.whyNot(ctx, l, v.why)
	case v.why == domain.CodeUnknownSKU:
		return &domain.Error{Code: domain.CodeUnknownSKU, Reference: true, SKU: l.SKU, Pool: l.Pool, Detail: fmt.Sprintf("SKU %q has no stock", l.SKU)}
	case v.why == domain.CodeSKUPaused:
		return s.whyNot(ctx, l, v.why)
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
		linesOf[l.ReservationID] = append(linesOf[l.ReservationID], promisedLine(
			withBundle(lineOf(l.Sku, l.Location, l.Pool, l.Quantity, l.Units), l.BundleSku, grantedBundle(l.BundleQuantity, l.SkuGranted, l.BundlePer), l.BundleVersion),
			l.Backordered, l.ExpectedOn))
	}
	for _, c := range calls {
		r, ok := byKey[[2]string{c.h.req.Client, c.h.req.IdempotencyKey}]
		switch {
		case !ok:
			// Committed reservations are never deleted, and ON CONFLICT
			// only skips a committed one: this cannot happen.
			c.Answer(fmt.Errorf("idempotency key %q conflicted but has no reservation", c.h.req.IdempotencyKey))
		case r.RequestHash != c.h.hash:
			c.Answer(errKeyReused(c.h.req.IdempotencyKey, r.ID))
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
