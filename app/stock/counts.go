package stock

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// StockCount is a count of one stock row's shelf: Counted is what is there
// and not sold (available + reserved + quality control + damaged + safety
// stock). Location empty means DefaultLocation, Pool empty main.
type StockCount struct {
	SKU, Location, Pool string
	Counted             int64
	Reason              string
	Actor               string
	// Force records a count below what holds hold on the shelf (otherwise
	// refused with count_below_held): the held units not found are the
	// row's short, which leaves the books as their holds end; the pool is
	// paused and a critical alert names the holds at risk.
	Force bool
}

// Counted is what a count found and did.
type Counted struct {
	// ID is the count's record (none for a dry run).
	ID       *int64 `json:"id"`
	SKU      string `json:"sku"`
	Location string `json:"location"`
	Pool     string `json:"pool"`
	Counted  int64  `json:"counted"`
	// OnShelf is what the counters said was on the shelf (held units a
	// count already found missing are not); Difference is Counted minus
	// OnShelf, which the count records (ledger kind count).
	OnShelf    int64 `json:"on_shelf"`
	Difference int64 `json:"difference"`
	// Changes is how the difference moved the counters: available first,
	// what available could not give from the states not for sale, and
	// what those could not give into short (held units not on the shelf,
	// owed by their holds: they leave total as the holds end); a count
	// that finds more first finds the held units counted missing before.
	Changes Counters `json:"changes"`
	// ShortOfHeld is how many held units the shelf does not have after the
	// count (the row's short); HoldsAtRisk are the held holds there when
	// the count found held units missing.
	ShortOfHeld int64        `json:"short_of_held"`
	HoldsAtRisk []HoldAtRisk `json:"holds_at_risk,omitempty"`
	// Forced is whether the count was recorded below what holds hold
	// (with force), as its record says.
	Forced bool  `json:"forced"`
	DryRun bool  `json:"dry_run,omitempty"`
	Stock  Stock `json:"stock"`
}

// HoldAtRisk is a held hold on a pool whose count found fewer units than
// its holds hold.
type HoldAtRisk struct {
	ID        string    `json:"id"`
	OrderRef  *string   `json:"order_ref"`
	Quantity  int64     `json:"quantity"`
	ExpiresAt time.Time `json:"expires_at"`
}

// maxAtRisk bounds the holds a count below held names.
const maxAtRisk = 50

func (c *StockCount) validate() error {
	if c.Pool == "" {
		c.Pool = MainPool
	}
	c.Location = locationOr(c.Location)
	for _, check := range []error{domain.ValidName("sku", c.SKU), domain.ValidName("location", c.Location), domain.ValidName("pool", c.Pool)} {
		if check != nil {
			return check
		}
	}
	if c.Counted < 0 || c.Counted > MaxAdjustment {
		return domain.Invalid("counted must be a whole number from 0 to %d: what is on the shelf and not sold", MaxAdjustment)
	}
	return validReason(c.Reason)
}

// CountOnce records a stock count at most once per key (see
// idempotency.Do). A forced count below held also pauses the pool and
// raises a critical count_below_held alert naming the holds at risk.
func (s *Service) CountOnce(ctx context.Context, key idempotency.Key, c StockCount) (Counted, bool, error) {
	if err := c.validate(); err != nil {
		return Counted{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	out, replayed, err := idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Counted, error) { return countTx(ctx, tx, c) })
	if err == nil && !replayed && out.Changes.Short > 0 {
		s.countBelowHeld(ctx, c, out)
	}
	return out, replayed, err
}

// CountPreview answers what CountOnce would (the difference, or the
// refusal), changing nothing.
func (s *Service) CountPreview(ctx context.Context, c StockCount) (Counted, error) {
	if err := c.validate(); err != nil {
		return Counted{}, err
	}
	out, err := preview(ctx, s, func(ctx context.Context, tx pgx.Tx) (Counted, error) { return countTx(ctx, tx, c) })
	if err != nil {
		return Counted{}, err
	}
	out.ID, out.DryRun = nil, true
	return out, nil
}

// countTx locks the row and records the count. The difference goes to
// available; when available cannot give all of a shortfall, the rest is
// taken from safety stock, then damaged, then quality control, and what
// those cannot give either is held units not on the shelf: the row's
// short, owed by their holds, which leave the books as the holds end (see
// ReservationsChange). Such a count leaves nothing on the shelf that is not
// held, and is refused (count_below_held) unless forced; a forced one also
// pauses the pool and names the holds at risk.
func countTx(ctx context.Context, tx pgx.Tx, c StockCount) (Counted, error) {
	q := db.New(tx)
	// A count may put stock on a row that had none: not while the pool is
	// units with an identity at another location.
	if err := notSerializedElsewhere(ctx, q, c.SKU, c.Location, c.Pool); err != nil {
		return Counted{}, err
	}
	row, err := lockRow(ctx, q, c.SKU, c.Location, c.Pool)
	if err != nil {
		return Counted{}, err
	}
	if err := refuseEnded(ctx, q, c.SKU, c.Location, c.Pool); err != nil {
		return Counted{}, err
	}
	d := countChanges(row, c.Counted)
	onShelf := shelfOf(row)
	out := Counted{SKU: c.SKU, Location: c.Location, Pool: c.Pool, Counted: c.Counted, OnShelf: onShelf,
		Difference: c.Counted - onShelf, Changes: d, ShortOfHeld: row.Short + d.Short}
	if d.Short > 0 {
		if !c.Force {
			held := row.Reserved - row.Short
			return Counted{}, &domain.Error{Code: domain.CodeCountBelowHeld, SKU: c.SKU, Pool: c.Pool, Location: c.Location,
				Extra: map[string]any{"counted": c.Counted, "reserved": row.Reserved, "short_of_held": out.ShortOfHeld},
				Detail: fmt.Sprintf("counted %d of SKU %q (pool %s) at %s, but holds hold %d there on the shelf: %d held units are not on the shelf. "+
					"Count again, or record it with \"force\": true and a reason: those units then leave the books as their holds end "+
					"(never back on sale), the pool is paused and an alert names the holds at risk",
					c.Counted, c.SKU, c.Pool, c.Location, held, d.Short)}
		}
		out.Forced = true
	}
	rec, err := q.StockCountRecord(ctx, db.StockCountRecordParams{
		Sku: c.SKU, Location: c.Location, Pool: c.Pool, Counted: c.Counted, OnShelf: onShelf, Difference: out.Difference,
		ShortOfHeld: out.ShortOfHeld, AvailableChange: d.Available, Forced: out.Forced, Reason: c.Reason, Actor: c.Actor,
		ActorKey: domain.KeyName(ctx),
	})
	if err != nil {
		return Counted{}, fmt.Errorf("record the count: %w", err)
	}
	out.ID = &rec.ID
	if !d.Zero() {
		if err := moveRow(ctx, q, c.SKU, c.Location, c.Pool, d, LedgerCount, c.Actor, c.Reason, fmt.Sprintf("count %d", rec.ID)); err != nil {
			return Counted{}, err
		}
	}
	if d.Short > 0 {
		reason := fmt.Sprintf("count %d found %d on the shelf, %d held: %s", rec.ID, c.Counted, row.Reserved-row.Short, c.Reason)
		if row.Status == StockOnSale {
			if err := setStatusTx(ctx, q, SwitchRequest{SKU: c.SKU, Location: c.Location, Pool: c.Pool, Reason: reason, Actor: c.Actor}, StockPaused); err != nil {
				return Counted{}, err
			}
		}
		held, err := q.ReservationsHeldOnPool(ctx, db.ReservationsHeldOnPoolParams{Sku: c.SKU, Location: c.Location, Pool: c.Pool, Lim: maxAtRisk})
		if err != nil {
			return Counted{}, fmt.Errorf("list the holds at risk: %w", err)
		}
		for _, h := range held {
			out.HoldsAtRisk = append(out.HoldsAtRisk, HoldAtRisk{ID: h.ID.String(), OrderRef: h.OrderRef, Quantity: h.Quantity, ExpiresAt: h.ExpiresAt})
		}
	}
	out.Stock, err = stockOf(ctx, q, c.SKU)
	return out, err
}

// shelfOf is what row's counters say is on the shelf: everything not
// sold, less the held units a count already found missing.
func shelfOf(row db.Stock) int64 {
	return row.Available + row.Reserved - row.Short + row.QualityControl + row.Damaged + row.SafetyStock
}

// countChanges is how a count of counted moves row's counters. More than
// the shelf holds: the held units counted missing before are found first
// (short goes down; they never left total), the rest goes to available.
// Less: available gives first, then safety stock, damaged and quality
// control in turn, and what they cannot give is held units not on the
// shelf: short goes up by it, and total only by what the others gave
// (the held units leave total as their holds end).
func countChanges(row db.Stock, counted int64) Counters {
	diff := counted - shelfOf(row)
	var d Counters
	if diff >= 0 {
		found := min(diff, row.Short)
		d.Short = -found
		d.Available = diff - found
		d.Total = diff - found
		return d
	}
	take := -diff
	for _, st := range []struct {
		has  int64
		take *int64
	}{{row.Available, &d.Available}, {row.SafetyStock, &d.SafetyStock}, {row.Damaged, &d.Damaged}, {row.QualityControl, &d.QualityControl}} {
		n := min(take, st.has)
		*st.take = -n
		take -= n
	}
	d.Short = take
	d.Total = diff + take
	return d
}

// countBelowHeld raises the critical alert of a forced count below held.
func (s *Service) countBelowHeld(ctx context.Context, c StockCount, out Counted) {
	if s.cfg.Alert == nil {
		return
	}
	s.cfg.Alert(context.WithoutCancel(ctx), Alert{
		Kind: "count_below_held", Subject: PoolSubject(c.SKU, c.Location, c.Pool), SKU: c.SKU, Location: c.Location, Pool: c.Pool,
		Details: map[string]any{"count_id": out.ID, "counted": out.Counted, "short_of_held": out.ShortOfHeld,
			"holds_at_risk": out.HoldsAtRisk, "actor": c.Actor, "actor_key": domain.KeyName(ctx), "reason": c.Reason},
		Summary: fmt.Sprintf("%s counted %d of SKU %s (pool %s) at %s: %d held units are not on the shelf. They leave the books as "+
			"their holds end (released, expired or rolled back: never back on sale; a confirm sells them and raises sold_short). "+
			"The pool is paused; the holds named may not be fillable: find the units (a count that finds them takes them back), "+
			"or release those holds, or reinstate them elsewhere, then resume the pool.",
			c.Actor, out.Counted, c.SKU, c.Pool, c.Location, out.ShortOfHeld),
	})
}

// RecentCounts lists the latest counts (of sku, or all when empty), newest
// first.
func (s *Service) RecentCounts(ctx context.Context, sku string, limit int) ([]db.StockCount, error) {
	return db.New(s.pool).StockCountsRecent(ctx, domain.Optional(sku), int32(limit))
}
