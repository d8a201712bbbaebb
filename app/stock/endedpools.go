package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// A campaign's pools after its end. When the end finishes (the last
// rollback batch's FinishTx), GiveBackTx moves everything on hand in each
// of its pools that no hold holds or bought back to main at the same
// location, each state to the same state. From the end on, an operator's
// write into or out of those pools is refused (refuseEnded: 409
// campaign_ended), and what was in transit to or from one when it ended
// lands in main when its transfer is received or cancelled (lockLanding).
// So no unit is ever left in the pool of a finished campaign but those it
// sold: those stay, as the record of the sale.

// refuseEnded refuses, with 409 campaign_ended, a write into or out of
// pool (of sku at location) when pool is the pool of a campaign that has
// ended. Call it after the stock rows are locked: a campaign's end pauses
// its rows and its finish locks them, so a read in a later statement sees
// an end that committed before the lock was had, and an end that commits
// after it finds what this write left (and gives it back).
func refuseEnded(ctx context.Context, q *db.Queries, sku, location, pool string) error {
	if pool == MainPool {
		return nil
	}
	ended, err := q.CampaignsEnded(ctx, []string{pool})
	if err != nil {
		return fmt.Errorf("read campaign %s: %w", pool, err)
	}
	if len(ended) == 0 {
		return nil
	}
	return errCampaignEnded(sku, location, pool, ended[0].Status)
}

// refuseEndedLines is refuseEnded for the lines of a bulk adjustment, their
// rows locked: the first line naming the pool of a campaign that has
// ended refuses them all.
func refuseEndedLines(ctx context.Context, q *db.Queries, lines []BulkLine) error {
	var pools []string
	for _, l := range lines {
		if l.Pool != MainPool && !slices.Contains(pools, l.Pool) {
			pools = append(pools, l.Pool)
		}
	}
	if len(pools) == 0 {
		return nil
	}
	ended, err := q.CampaignsEnded(ctx, pools)
	if err != nil {
		return fmt.Errorf("read campaigns %v: %w", pools, err)
	}
	for i, l := range lines {
		for _, c := range ended {
			if c.ID == l.Pool {
				e := errCampaignEnded(l.SKU, l.Location, l.Pool, c.Status)
				n := i
				e.Line, e.Detail = &n, fmt.Sprintf("lines[%d]: %s", i, e.Detail)
				return e
			}
		}
	}
	return nil
}

func errCampaignEnded(sku, location, pool, status string) *domain.Error {
	return &domain.Error{Code: domain.CodeCampaignEnded, SKU: sku, Pool: pool, Location: location,
		Extra: map[string]any{"campaign": pool, "campaign_status": status},
		Detail: fmt.Sprintf("campaign %q has ended (%s): its pool of SKU %q%s takes no new stock and gives none. "+
			"What it held on hand goes back to main at the same location when its end finishes; name main instead",
			pool, status, sku, at(location))}
}

// LockGiveBackTx locks, inside the caller's transaction and in the one
// lock order ((sku, location, pool) byte-wise, in one statement), every
// stock row that giving campaign pool's rows back to main changes: each
// row of the pool and main's row at the same SKU and location. Main's rows
// that are missing where the pool holds anything it did not sell are made
// first (empty, in the same order), before any row is locked, so that
// making one waits, if at all, while the transaction holds no stock row. A
// transaction that changes some of the pool's rows before it gives them
// back (the last batch of a campaign's end, which releases the campaign's
// holds first) calls it before it changes any: holding the pool's rows
// while it waited for main's, it would deadlock with a transaction that
// locked main's first (a bulk adjustment naming both, a transfer of the
// pool landing in main, a hold batch on both pools).
func LockGiveBackTx(ctx context.Context, tx pgx.Tx, pool string) error {
	if pool == MainPool {
		return domain.Invalid("main gives nothing back to itself")
	}
	q := db.New(tx)
	rows, err := q.CampaignPools(ctx, pool)
	if err != nil {
		return fmt.Errorf("list the rows of pool %s: %w", pool, err)
	}
	if len(rows) == 0 {
		return nil
	}
	var (
		skus, locations, pools []string
		makeSKUs, makeAt       []string
	)
	for _, r := range rows {
		skus = append(skus, r.Sku, r.Sku)
		locations = append(locations, r.Location, r.Location)
		pools = append(pools, pool, MainPool)
		if r.Total > r.Sold {
			makeSKUs, makeAt = append(makeSKUs, r.Sku), append(makeAt, r.Location)
		}
	}
	if len(makeSKUs) > 0 {
		if err := q.StockCreateMainMany(ctx, makeSKUs, makeAt); err != nil {
			return fmt.Errorf("make main's rows beside pool %s: %w", pool, err)
		}
	}
	if _, err := q.StockLockForAdjust(ctx, skus, locations, pools); err != nil {
		return fmt.Errorf("lock the rows of pool %s and main's beside them: %w", pool, err)
	}
	return nil
}

// GiveBack asks GiveBackTx to empty one pool of a campaign into main.
type GiveBack struct {
	SKU, Location, Pool string
	Actor, Reason       string
	// Ref ties the ledger rows together (the campaign's id).
	Ref string
}

// GiveBackTx moves everything on hand in (SKU, Location, Pool) that no
// hold holds or bought (available, quality control, damaged, safety
// stock) to main at the same location, each state to the same state,
// inside the caller's transaction: one ledger row of kind transfer on each
// side, naming every state moved. Main's row is made if it has none. A
// pool of units with an identity moves its available units (its units
// have no other state). Reserved and sold stay: the lines of holds are
// theirs, as are available units that confirmed holds' promises wait on
// (waitingOn). It returns what moved (zero when nothing was on hand).
func GiveBackTx(ctx context.Context, tx pgx.Tx, g GiveBack) (Counters, error) {
	g.Location = locationOr(g.Location)
	if g.Pool == MainPool {
		return Counters{}, domain.Invalid("main gives nothing back to itself")
	}
	q := db.New(tx)
	rows, err := q.StockLockForAdjust(ctx, []string{g.SKU, g.SKU}, []string{g.Location, g.Location}, []string{g.Pool, MainPool})
	if err != nil {
		return Counters{}, fmt.Errorf("lock %s/%s at %s: %w", g.SKU, g.Pool, g.Location, err)
	}
	var (
		from    db.Stock
		found   bool
		hasMain bool
	)
	for _, r := range rows {
		switch r.Pool {
		case g.Pool:
			from, found = r, true
		case MainPool:
			hasMain = true
		}
	}
	if !found {
		return Counters{}, nil
	}
	if from.Serialized {
		if from.Available == 0 {
			return Counters{}, nil
		}
		err := PoolTransferTx(ctx, tx, PoolTransfer{SKU: g.SKU, Location: g.Location, From: g.Pool, To: MainPool,
			Quantity: from.Available, Actor: g.Actor, Reason: g.Reason, Ref: g.Ref})
		return Counters{Total: from.Available, Available: from.Available}, err
	}
	// Available units holds were promised and wait on stay theirs.
	d := Counters{Available: from.Available - waitingOn(from), QualityControl: from.QualityControl, Damaged: from.Damaged, SafetyStock: from.SafetyStock}
	d.Total = d.Available + d.QualityControl + d.Damaged + d.SafetyStock
	if d.Total == 0 {
		return Counters{}, nil
	}
	if !hasMain {
		if _, err := q.StockCreate(ctx, g.SKU, g.Location, MainPool); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return Counters{}, fmt.Errorf("create %s/%s/%s: %w", g.SKU, g.Location, MainPool, err)
		}
	}
	return d, handOver(ctx, q, g.SKU, g.Location, g.Pool, d, g.Actor, g.Reason, g.Ref)
}

// handOver moves d from (sku, location, pool) to main there, both rows
// locked already, with a ledger row of kind transfer on each side.
func handOver(ctx context.Context, q *db.Queries, sku, location, pool string, d Counters, actor, reason, ref string) error {
	if err := moveRow(ctx, q, sku, location, pool, Counters{}.minus(d), LedgerTransfer, actor, reason, ref); err != nil {
		return err
	}
	return moveRow(ctx, q, sku, location, MainPool, d, LedgerTransfer, actor, reason, ref)
}

// landing is where a transfer's step puts the units it gives back to a
// location: its own pool, or main there once the pool's campaign has
// ended (ended true).
type landing struct {
	ended     bool
	sku, pool string
	location  string
	campaign  string // the campaign's status, when ended
}

// lockLanding locks, in the global order, the rows a step of a transfer
// or an inbound notice (what names it) changes (sku's pool at each of
// locations) and, for a campaign's pool, main at land, where the step's
// units land; then reads whether the campaign has ended (after the locks:
// see refuseEnded). Once it has, main's row at land is made if it has
// none, and give hands what the step landed to it. For main it does
// nothing: the step locks its rows itself.
//
// Main's row is never made while the step holds a row of the pool: the
// campaign's finish makes the same row before it locks the pool's (see
// LockGiveBackTx), and would wait for the step while the step waited for
// it. A campaign already ended has its row made before the locks; one that
// ends between that read and the locks has them taken in a savepoint,
// which is let go, so the row is made holding none, and taken again.
func lockLanding(ctx context.Context, tx pgx.Tx, sku, pool, what, land string, locations ...string) (landing, error) {
	l := landing{sku: sku, pool: pool, location: land}
	if pool == MainPool {
		return l, nil
	}
	q := db.New(tx)
	ended, err := q.CampaignsEnded(ctx, []string{pool})
	if err != nil {
		return l, fmt.Errorf("read campaign %s: %w", pool, err)
	}
	if len(ended) > 0 {
		if err := makeMain(ctx, q, sku, land); err != nil {
			return l, err
		}
	}
	skus, locs, pools := []string{sku}, []string{land}, []string{MainPool}
	for _, loc := range locations {
		skus, locs, pools = append(skus, sku), append(locs, loc), append(pools, pool)
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return l, fmt.Errorf("savepoint before the rows of %s: %w", what, err)
	}
	defer func() { _ = sp.Rollback(ctx) }() // after a release, a no-op
	rows, err := q.StockLockForAdjust(ctx, skus, locs, pools)
	if err != nil {
		return l, fmt.Errorf("lock the rows of %s: %w", what, err)
	}
	if ended, err = q.CampaignsEnded(ctx, []string{pool}); err != nil {
		return l, fmt.Errorf("read campaign %s: %w", pool, err)
	}
	if len(ended) > 0 {
		l.ended, l.campaign = true, ended[0].Status
	}
	if !l.ended || slices.ContainsFunc(rows, func(r db.Stock) bool { return r.Pool == MainPool }) {
		if err := sp.Commit(ctx); err != nil {
			return l, fmt.Errorf("release the savepoint of %s: %w", what, err)
		}
		return l, nil
	}
	// The campaign ended after the first read: let the rows go, make
	// main's, and lock them all again.
	if err := sp.Rollback(ctx); err != nil {
		return l, fmt.Errorf("let go of the rows of %s: %w", what, err)
	}
	if err := makeMain(ctx, q, sku, land); err != nil {
		return l, err
	}
	if _, err := q.StockLockForAdjust(ctx, skus, locs, pools); err != nil {
		return l, fmt.Errorf("lock the rows of %s: %w", what, err)
	}
	return l, nil
}

// makeMain makes main's row of sku at location, empty, unless it has one.
func makeMain(ctx context.Context, q *db.Queries, sku, location string) error {
	if _, err := q.StockCreate(ctx, sku, location, MainPool); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("create %s/%s/%s: %w", sku, location, MainPool, err)
	}
	return nil
}

// give hands n units the step just made available in the campaign's pool
// at the landing's location to main there, when the campaign has ended
// (else it does nothing): the transfer's units never stay in the pool of
// a campaign that ended. what says which step landed them, for the
// ledger's reason.
func (l landing) give(ctx context.Context, q *db.Queries, n int64, actor, what string) error {
	if !l.ended || n == 0 {
		return nil
	}
	reason := fmt.Sprintf("campaign %s has ended (%s): %s goes to main", l.pool, l.campaign, what)
	return handOver(ctx, q, l.sku, l.location, l.pool, Counters{Total: n, Available: n}, actor, reason, l.pool)
}
