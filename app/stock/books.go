package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// Counters are the counters of a pool (every state), or what its ledger
// sums to, or the difference between two such.
type Counters struct {
	Total          int64 `json:"total"`
	Available      int64 `json:"available"`
	Reserved       int64 `json:"reserved"`
	Sold           int64 `json:"sold"`
	QualityControl int64 `json:"quality_control"`
	Damaged        int64 `json:"damaged"`
	SafetyStock    int64 `json:"safety_stock"`
	Incoming       int64 `json:"incoming"`
	// Short is the part of Reserved a stock count found missing: held
	// units that leave total as their holds hand them back (never back to
	// available), or are sold as missing (0 <= short <= reserved).
	Short int64 `json:"short"`
	// Backordered is the units promised to held and confirmed holds
	// beyond what the row had on hand (not in total), in the books and a
	// repair's answer; left out when zero (a pool's own backordered is
	// Pool.Backordered).
	Backordered int64 `json:"backordered,omitempty"`
}

// String writes a difference of counters: the four a hold moves, then each
// other state that is not zero.
func (c Counters) String() string {
	s := fmt.Sprintf("total %+d, available %+d, reserved %+d, sold %+d", c.Total, c.Available, c.Reserved, c.Sold)
	for _, o := range []struct {
		state string
		n     int64
	}{{"quality_control", c.QualityControl}, {"damaged", c.Damaged}, {"safety_stock", c.SafetyStock}, {"incoming", c.Incoming}, {"short", c.Short}, {"backordered", c.Backordered}} {
		if o.n != 0 {
			s += fmt.Sprintf(", %s %+d", o.state, o.n)
		}
	}
	return s
}

func (c Counters) minus(o Counters) Counters {
	return Counters{Total: c.Total - o.Total, Available: c.Available - o.Available, Reserved: c.Reserved - o.Reserved,
		Sold: c.Sold - o.Sold, QualityControl: c.QualityControl - o.QualityControl, Damaged: c.Damaged - o.Damaged,
		SafetyStock: c.SafetyStock - o.SafetyStock, Incoming: c.Incoming - o.Incoming, Short: c.Short - o.Short,
		Backordered: c.Backordered - o.Backordered}
}

// Plus is c and o added, counter by counter: two changes as one.
func (c Counters) Plus(o Counters) Counters {
	return Counters{Total: c.Total + o.Total, Available: c.Available + o.Available, Reserved: c.Reserved + o.Reserved,
		Sold: c.Sold + o.Sold, QualityControl: c.QualityControl + o.QualityControl, Damaged: c.Damaged + o.Damaged,
		SafetyStock: c.SafetyStock + o.SafetyStock, Incoming: c.Incoming + o.Incoming, Short: c.Short + o.Short,
		Backordered: c.Backordered + o.Backordered}
}

// Zero reports whether every counter is zero.
func (c Counters) Zero() bool { return c == Counters{} }

// balanced reports whether the counters could be a stock row's: nothing
// negative and total the sum of the others (backordered is not in total).
func (c Counters) balanced() bool {
	return c.Available >= 0 && c.Reserved >= 0 && c.Sold >= 0 && c.QualityControl >= 0 && c.Damaged >= 0 &&
		c.SafetyStock >= 0 && c.Incoming >= 0 && c.Short >= 0 && c.Short <= c.Reserved && c.Backordered >= 0 &&
		c.Total == c.Available+c.Reserved+c.Sold+c.QualityControl+c.Damaged+c.SafetyStock
}

// Books are one pool's counters beside its ledger and the lines of its live
// holds, read under the row's lock.
type Books struct {
	SKU      string   `json:"sku"`
	Location string   `json:"location"`
	Pool     string   `json:"pool"`
	Status   string   `json:"status"`
	Counters Counters `json:"counters"`
	// Ledger is what the pool's ledger rows sum to (from its checkpoint).
	Ledger Counters `json:"ledger"`
	// LinesHeld and LinesConfirmed are the units on the lines of its held
	// and confirmed holds: what reserved and sold should be.
	LinesHeld      int64 `json:"lines_held"`
	LinesConfirmed int64 `json:"lines_confirmed"`
	// LinesBackordered is the units the lines of its held and confirmed
	// holds were promised and have not had filled: what backordered
	// should be.
	LinesBackordered int64 `json:"lines_backordered"`
	// BackorderLimit and BackorderHorizonDays are the pool's backorder
	// policy as the row keeps it: the CHECK stock_backordered allows a
	// backordered up to the limit plus available (plus incoming, with a
	// horizon).
	BackorderLimit       int64  `json:"-"`
	BackorderHorizonDays *int32 `json:"-"`
	// InTransit is what the transfers in transit to it and the open
	// inbound lines at it have not yet delivered or written off: what
	// incoming must be.
	InTransit int64 `json:"in_transit"`
	// Units, for a pool of units with an identity, are its units by
	// status: what available, reserved and sold must be.
	Units *UnitCounts `json:"units,omitempty"`
}

// UnitCounts are a pool's units by status.
type UnitCounts struct {
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
	Sold      int64 `json:"sold"`
}

// unitsClause says how a pool's units disagree with its counters, for a
// refusal's detail; empty when they agree.
func (b Books) unitsClause() string {
	if b.unitsAgree(b.Counters) {
		return ""
	}
	return fmt.Sprintf("; its units are %d available, %d held, %d sold", b.Units.Available, b.Units.Held, b.Units.Sold)
}

// unitsAgree reports whether a pool's counters are its units by status
// (always, for a pool without units).
func (b Books) unitsAgree(c Counters) bool {
	return b.Units == nil || (c.Available == b.Units.Available && c.Reserved == b.Units.Held && c.Sold == b.Units.Sold)
}

// Difference is the counters minus the ledger, per counter.
func (b Books) Difference() Counters { return b.Counters.minus(b.Ledger) }

// Balanced reports whether the counters agree with the ledger, with the
// lines, with the transfers in transit to the row and, for a pool of
// units, with its units.
func (b Books) Balanced() bool {
	return b.Difference().Zero() && b.Counters.Reserved == b.LinesHeld && b.Counters.Sold == b.LinesConfirmed &&
		b.Counters.Backordered == b.LinesBackordered && b.Counters.Incoming == b.InTransit && b.unitsAgree(b.Counters)
}

// promiseClause says how the row's backordered disagrees with its ledger
// or its holds' lines, for a refusal's detail; empty when they agree.
func (b Books) promiseClause() string {
	if b.Counters.Backordered == b.Ledger.Backordered && b.Counters.Backordered == b.LinesBackordered {
		return ""
	}
	return fmt.Sprintf("; backordered %d against %d by the ledger and %d promised on the lines",
		b.Counters.Backordered, b.Ledger.Backordered, b.LinesBackordered)
}

// promiseAllowed reports whether the row's backorder policy lets it keep
// c's backordered (the CHECK stock_backordered).
func (b Books) promiseAllowed(c Counters) bool {
	room := b.BackorderLimit + c.Available
	if b.BackorderHorizonDays != nil {
		room += c.Incoming
	}
	return c.Backordered <= room
}

// transitClause says how the row's incoming disagrees with the transfers
// in transit to it, for a refusal's detail; empty when they agree.
func (b Books) transitClause() string {
	if b.Counters.Incoming == b.InTransit {
		return ""
	}
	return fmt.Sprintf("; incoming %d against %d in transit", b.Counters.Incoming, b.InTransit)
}

func (b Books) problem() map[string]any {
	p := map[string]any{
		"location": b.Location, "pool": b.Pool, "counters": b.Counters, "ledger": b.Ledger, "difference": b.Difference(),
		"lines": map[string]int64{"held": b.LinesHeld, "confirmed": b.LinesConfirmed, "backordered": b.LinesBackordered}, "in_transit": b.InTransit,
	}
	if b.Units != nil {
		p["unit_counts"] = b.Units // "units" names units, in a problem
	}
	return p
}

// booksLocked locks the stock row (sku, location, pool) and then, in a
// later statement, reads its books, so that nothing moves them until tx
// ends.
func booksLocked(ctx context.Context, q *db.Queries, sku, location, pool string) (Books, error) {
	if _, err := q.StockLock(ctx, sku, location, pool); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Books{}, errNoPool(ctx, q, sku, location, pool, false)
		}
		return Books{}, fmt.Errorf("lock %s/%s/%s: %w", sku, location, pool, err)
	}
	r, err := q.StockBooks(ctx, sku, location, pool)
	if err != nil {
		return Books{}, fmt.Errorf("read the books of %s/%s/%s: %w", sku, location, pool, err)
	}
	b := Books{
		SKU: r.Sku, Location: r.Location, Pool: r.Pool, Status: r.Status,
		Counters: Counters{Total: r.Total, Available: r.Available, Reserved: r.Reserved, Sold: r.Sold,
			QualityControl: r.QualityControl, Damaged: r.Damaged, SafetyStock: r.SafetyStock, Incoming: r.Incoming, Short: r.Short,
			Backordered: r.Backordered},
		Ledger: Counters{Total: r.LedgerTotal, Available: r.LedgerAvailable, Reserved: r.LedgerReserved, Sold: r.LedgerSold,
			QualityControl: r.LedgerQualityControl, Damaged: r.LedgerDamaged, SafetyStock: r.LedgerSafetyStock, Incoming: r.LedgerIncoming,
			Short: r.LedgerShort, Backordered: r.LedgerBackordered},
		LinesHeld: r.LinesHeld, LinesConfirmed: r.LinesConfirmed, LinesBackordered: r.LinesBackordered, InTransit: r.InTransit,
		BackorderLimit: r.BackorderLimit, BackorderHorizonDays: r.BackorderHorizonDays,
	}
	if r.Serialized {
		b.Units = &UnitCounts{Available: r.UnitsAvailable, Held: r.UnitsHeld, Sold: r.UnitsSold}
	}
	return b, nil
}
