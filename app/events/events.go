// Package events turns the ledger into a feed of events (stock.changed,
// hold.created, hold.confirmed, hold.released, hold.expired, stock.low,
// hold.backorder_filled, stock.paused, stock.resumed, transfer.created, transfer.received,
// transfer.closed, transfer.cancelled, inbound.created, inbound.received,
// inbound.closed, inbound.cancelled) that a reader pulls from a cursor,
// and that webhooks push. The ledger is the outbox: every flow already writes its
// ledger rows in the transaction that changes stock, so an event exists if
// and only if its change committed, and there is no second table to keep in
// step.
//
// The feed's order is (feed_xid, ledger id), where feed_xid is the greatest
// transaction id that had changed the row's (sku, pool) when the row was
// written (see migrations/00060_events.sql). Rows are served only once
// their feed_xid is older than every transaction still running, so a
// transaction that commits late can never add a row before a position
// already served, and along one (sku, location, pool) the order is the
// order of its changes. A position therefore survives restarts: it is the ledger row and
// the event within it.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Event types.
const (
	StockChanged  = "stock.changed"
	StockLow      = "stock.low"
	StockPaused   = "stock.paused"
	StockResumed  = "stock.resumed"
	StockRepaired = "stock.repaired"
	HoldCreated   = "hold.created"
	HoldConfirmed = "hold.confirmed"
	HoldReleased  = "hold.released"
	HoldExpired   = "hold.expired"
	// HoldBackorderFilled: a receipt filled units a hold was promised
	// beyond the stock (one per hold filled).
	HoldBackorderFilled = "hold.backorder_filled"
	// A transfer between locations: created (its units left from),
	// received (some arrived at to), closed (what never arrived written
	// off as lost in transit), cancelled (given back to from).
	TransferCreated   = "transfer.created"
	TransferReceived  = "transfer.received"
	TransferClosed    = "transfer.closed"
	TransferCancelled = "transfer.cancelled"
	// A supplier's inbound notice, per line: created (its units are
	// incoming), received (some arrived), closed (what never came written
	// off incoming), cancelled (its incoming taken back).
	InboundCreated   = "inbound.created"
	InboundReceived  = "inbound.received"
	InboundClosed    = "inbound.closed"
	InboundCancelled = "inbound.cancelled"
)

// Types lists every event type.
var Types = []string{StockChanged, StockLow, StockPaused, StockResumed, StockRepaired, HoldCreated, HoldConfirmed, HoldReleased, HoldExpired,
	HoldBackorderFilled,
	TransferCreated, TransferReceived, TransferClosed, TransferCancelled,
	InboundCreated, InboundReceived, InboundClosed, InboundCancelled}

// Known reports whether t is an event type.
func Known(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}

// Position is a place in the feed: the ledger row (its feed_xid and id) and
// the event within it (a row gives its own, then the stock.changed and
// stock.low of the stock version it ends, then a stock.low for each bundle
// that version took to its threshold). Its string form, "<xid>-<id>-<n>",
// is an event's id and a reader's cursor.
type Position struct {
	Xid uint64
	ID  int64
	N   int
}

// Start is the position before every event.
var Start = Position{}

// Slots of the events one ledger row gives, in order.
const (
	slotOwn     = 0 // hold.* or stock.paused / stock.resumed
	slotChanged = 1 // stock.changed, on the last row of a stock version
	slotLow     = 2 // stock.low, likewise
	// slotBundleLow and on: a stock.low of each bundle the version took to
	// its threshold, in bundle SKU order.
	slotBundleLow = 3
	// maxSlot bounds the slot of a cursor (a webhook keeps it as an integer).
	maxSlot = math.MaxInt32
)

func (p Position) String() string { return fmt.Sprintf("%d-%d-%d", p.Xid, p.ID, p.N) }

// After reports whether p comes after q in the feed.
func (p Position) After(q Position) bool {
	if p.Xid != q.Xid {
		return p.Xid > q.Xid
	}
	if p.ID != q.ID {
		return p.ID > q.ID
	}
	return p.N > q.N
}

// ParsePosition reads an event id (a cursor).
func ParsePosition(s string) (Position, error) {
	parts := strings.Split(s, "-")
	bad := domain.Invalid("cursor %q is not an event id (such as 7412-1039-0)", s)
	if len(parts) != 3 || len(s) > 64 {
		return Position{}, bad
	}
	xid, err1 := strconv.ParseUint(parts[0], 10, 64)
	id, err2 := strconv.ParseInt(parts[1], 10, 64)
	n, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || id < 0 || n < 0 || n > maxSlot {
		return Position{}, bad
	}
	return Position{Xid: xid, ID: id, N: n}, nil
}

// Event is one event of the feed. ReservationID is null for stock events.
// Data depends on the type (see docs/guides/events.md and openapi.json):
//   - hold.*: quantity, order_ref, client (null once retention deleted the
//     hold), actor, reason, ledger_kind; hold.released also partial (some
//     units of a hold that stays held); units, the ids of the units with
//     an identity it moved (none: left out);
//   - stock.changed: the pool's counters after the change, every state
//     (total, available, reserved, sold, quality_control, damaged,
//     safety_stock, incoming), the change itself (delta) and the stock
//     row's version; units, the ids of the units with an identity the
//     change moved (none: left out);
//   - stock.low: threshold, available, version; for a bundle (its
//     availability at the location, computed from its components) also
//     component, the SKU whose change took it there, and version counts
//     its crossings;
//   - stock.paused, stock.resumed: actor, reason, and refs when the
//     operator named any;
//   - stock.repaired: actor, reason, refs (when any), to (ledger or
//     counters) and the pool's counters after the repair;
//   - transfer.*: transfer_id, from, to, quantity (the units this step
//     moved), actor, reason;
//   - inbound.*: inbound_id, supplier_ref, expected_on, quantity (the
//     units of the line this step moved), actor, reason.
//
// Every event names the stock row it is about: sku, location, pool (a
// transfer event's row is its from location's for created and cancelled,
// its to location's for received and closed).
type Event struct {
	ID            string         `json:"id"`
	Type          string         `json:"type"`
	At            time.Time      `json:"at"`
	SKU           string         `json:"sku"`
	Location      string         `json:"location"`
	Pool          string         `json:"pool"`
	ReservationID *uuid.UUID     `json:"reservation_id"`
	Data          map[string]any `json:"data"`

	Position Position `json:"-"`
}

// Counters are a pool's counters, every state, or a change to them.
type Counters struct {
	Total          int64 `json:"total"`
	Available      int64 `json:"available"`
	Reserved       int64 `json:"reserved"`
	Sold           int64 `json:"sold"`
	QualityControl int64 `json:"quality_control"`
	Damaged        int64 `json:"damaged"`
	SafetyStock    int64 `json:"safety_stock"`
	Incoming       int64 `json:"incoming"`
}

// expand returns the events of one ledger row, in order: its pool's, then
// its bundles'.
func expand(r db.EventRowsAfterRow) []Event {
	if r.FeedXid == nil {
		return nil
	}
	at := func(n int, typ string, data map[string]any) Event {
		p := Position{Xid: *r.FeedXid, ID: r.ID, N: n}
		e := Event{ID: p.String(), Type: typ, At: r.At, SKU: r.Sku, Location: r.Location, Pool: r.Pool, Data: data, Position: p}
		if n == slotOwn {
			// A change of a pool is no one hold's, even when a hold made it.
			e.ReservationID = r.ReservationID
		}
		return e
	}
	return append(poolEvents(r, at), bundleLows(r, at)...)
}

// poolEvents are the events of r about its own pool: its own, and on the
// last row of a stock version the version's stock.changed and stock.low.
func poolEvents(r db.EventRowsAfterRow, at func(int, string, map[string]any) Event) []Event {
	var out []Event
	if typ := ownType(r); typ != "" {
		out = append(out, at(slotOwn, typ, ownData(typ, r)))
	}
	if !r.LastOfVersion || len(r.VersionDeltas) != 8 || r.TotalAfter == nil || r.AvailableAfter == nil ||
		r.ReservedAfter == nil || r.SoldAfter == nil {
		return out
	}
	d := r.VersionDeltas
	delta := Counters{Total: d[0], Available: d[1], Reserved: d[2], Sold: d[3], QualityControl: d[4], Damaged: d[5], SafetyStock: d[6], Incoming: d[7]}
	if delta == (Counters{}) {
		return out // a pause or resume: the counters did not move
	}
	// Rows written before locations existed have no states after: zero.
	after := Counters{Total: *r.TotalAfter, Available: *r.AvailableAfter, Reserved: *r.ReservedAfter, Sold: *r.SoldAfter,
		QualityControl: value(r.QualityControlAfter), Damaged: value(r.DamagedAfter), SafetyStock: value(r.SafetyStockAfter),
		Incoming: value(r.IncomingAfter)}
	changed := map[string]any{
		"total": after.Total, "available": after.Available, "reserved": after.Reserved, "sold": after.Sold,
		"quality_control": after.QualityControl, "damaged": after.Damaged, "safety_stock": after.SafetyStock,
		"incoming": after.Incoming, "delta": delta, "version": r.StockVersion,
	}
	if len(r.VersionUnits) > 0 {
		changed["units"] = r.VersionUnits
	}
	out = append(out, at(slotChanged, StockChanged, changed))
	// Once per crossing: from above the threshold to at or below it.
	if t := r.Threshold; t >= 0 && after.Available-delta.Available > t && after.Available <= t {
		out = append(out, at(slotLow, StockLow, map[string]any{
			"threshold": t, "available": after.Available, "version": r.StockVersion,
		}))
	}
	return out
}

// bundleLow is a crossing of a bundle's threshold that a ledger row's
// stock version made (queries/events.sql, bundle_lows).
type bundleLow struct {
	SKU       string `json:"sku"`
	Location  string `json:"location"`
	Threshold int64  `json:"threshold"`
	Available int64  `json:"available"`
	Crossing  int64  `json:"crossing"`
}

// bundleLows are the stock.low events of the bundles r's stock version
// took to their threshold, after r's other events: at r's location, or at
// any for a bundle of which r's SKU is a split component.
func bundleLows(r db.EventRowsAfterRow, at func(int, string, map[string]any) Event) []Event {
	if len(r.BundleLows) == 0 {
		return nil
	}
	var lows []bundleLow
	if err := json.Unmarshal(r.BundleLows, &lows); err != nil {
		return nil // written by bundle_low_check as jsonb_build_object: cannot happen
	}
	out := make([]Event, 0, len(lows))
	for i, l := range lows {
		e := at(slotBundleLow+i, StockLow, map[string]any{
			"threshold": l.Threshold, "available": l.Available, "version": l.Crossing, "component": r.Sku,
		})
		e.SKU, e.Location, e.Pool = l.SKU, l.Location, stock.MainPool
		out = append(out, e)
	}
	return out
}

// ownData is the data of a ledger row's own event, of type typ: a
// transfer's, a hold's, or another change's.
func ownData(typ string, r db.EventRowsAfterRow) map[string]any {
	var data map[string]any
	switch {
	case strings.HasPrefix(typ, "transfer."):
		q := r.DeltaTotal
		if q == 0 {
			q = r.DeltaIncoming
		}
		if q < 0 {
			q = -q
		}
		data = map[string]any{"transfer_id": r.Ref, "from": r.TransferFrom, "to": r.TransferTo, "quantity": q,
			"actor": r.Actor, "reason": r.Reason}
	case strings.HasPrefix(typ, "inbound."):
		var expected *string
		if r.InboundExpectedOn.Valid {
			day := r.InboundExpectedOn.Time.Format(time.DateOnly)
			expected = &day
		}
		data = map[string]any{"inbound_id": r.Ref, "supplier_ref": r.InboundSupplierRef, "expected_on": expected,
			"quantity": abs(r.DeltaIncoming), "actor": r.Actor, "reason": r.Reason}
	case r.ReservationID != nil:
		q := abs(r.DeltaReserved + r.DeltaBackordered) // the units promised are the hold's too
		if typ == HoldBackorderFilled {
			q = -r.DeltaBackordered
		}
		data = map[string]any{"quantity": q, "order_ref": r.OrderRef, "client": r.Client,
			"actor": r.Actor, "reason": r.Reason, "ledger_kind": r.Kind}
		if r.DeltaBackordered != 0 {
			data["backordered"] = abs(r.DeltaBackordered)
		}
		if typ == HoldReleased {
			data["partial"] = stock.LedgerKind(r.Kind) == stock.LedgerReleasePartial
		}
		if len(r.Units) > 0 {
			data["units"] = r.Units
		}
	default:
		data = map[string]any{"actor": r.Actor, "reason": r.Reason}
		if len(r.Refs) > 0 {
			data["refs"] = r.Refs
		}
		if typ == StockRepaired {
			data["to"] = strings.TrimPrefix(domain.Value(r.Ref), "to ")
			if r.TotalAfter != nil && r.AvailableAfter != nil && r.ReservedAfter != nil && r.SoldAfter != nil {
				data["counters"] = Counters{Total: *r.TotalAfter, Available: *r.AvailableAfter, Reserved: *r.ReservedAfter, Sold: *r.SoldAfter,
					QualityControl: domain.Value(r.QualityControlAfter), Damaged: domain.Value(r.DamagedAfter),
					SafetyStock: domain.Value(r.SafetyStockAfter), Incoming: domain.Value(r.IncomingAfter)}
			}
		}
	}
	return data
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func value(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ownType is the event a ledger row gives by itself, if any: by its kind,
// and for a transfer's rows by which side it is (a cancel writes one row at
// each location: the event is on the one at from; a loss is a transfer's
// when it writes off units in transit, a write-off's otherwise).
func ownType(r db.EventRowsAfterRow) string {
	switch stock.LedgerKind(r.Kind) {
	case stock.LedgerTransferOut:
		return TransferCreated
	case stock.LedgerReceive:
		return TransferReceived
	case stock.LedgerLoss:
		if r.DeltaIncoming != 0 {
			return TransferClosed
		}
		return ""
	case stock.LedgerTransferCancel:
		if r.DeltaTotal > 0 {
			return TransferCancelled
		}
		return ""
	case stock.LedgerInbound:
		return InboundCreated
	case stock.LedgerInboundReceive:
		return InboundReceived
	case stock.LedgerInboundShort:
		return InboundClosed
	case stock.LedgerInboundCancel:
		return InboundCancelled
	}
	switch stock.LedgerKind(r.Kind) {
	case stock.LedgerReserve:
		return HoldCreated
	case stock.LedgerConfirm:
		return HoldConfirmed
	case stock.LedgerRelease, stock.LedgerReleasePartial, stock.LedgerRollback:
		return HoldReleased
	case stock.LedgerExpire:
		return HoldExpired
	case stock.LedgerBackorderFill:
		return HoldBackorderFilled
	case stock.LedgerPause:
		return StockPaused
	case stock.LedgerResume:
		return StockResumed
	case stock.LedgerRepair:
		return StockRepaired
	}
	return ""
}

// MaxPage bounds one page of the feed.
const MaxPage = 1000

// Page is a page of the feed and where to continue: Next is the id of its
// last event, or the position read from when it is empty (the reader is
// caught up).
type Page struct {
	Events []Event
	Next   Position
}

// Read returns up to limit events after position after, in feed order. An
// empty page means no event after it can be served yet. From Start it reads
// from the end of the ledger's archive; a position before that end is
// refused (domain.CodeArchived): its events were archived.
func Read(ctx context.Context, q *db.Queries, after Position, limit int) (Page, error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, domain.Invalid("limit must be from 1 to %d", MaxPage)
	}
	archived, err := q.LedgerArchived(ctx)
	if err != nil {
		return Page{}, fmt.Errorf("read how far the ledger is archived: %w", err)
	}
	if end := (Position{Xid: archived.FeedXid, ID: archived.FeedID, N: slotChanged}); end.After(after) {
		if after != Start {
			return Page{}, domain.Archived("the events up to %s were archived on %s: read from there (or without a cursor)",
				end, archived.ToAt.UTC().Format(time.RFC3339))
		}
		after = end
	}
	page := Page{Events: []Event{}, Next: after}
	from := after
	for {
		// One row more than events wanted: the first row may give only
		// events at or before after.
		rows, err := q.EventRowsAfter(ctx, from.Xid, from.ID, int32(limit+1))
		if err != nil {
			return Page{}, fmt.Errorf("read the event feed: %w", err)
		}
		for _, r := range rows {
			for _, e := range expand(r) {
				if !e.Position.After(after) {
					continue
				}
				page.Events = append(page.Events, e)
				page.Next = e.Position
				if len(page.Events) == limit {
					return page, nil
				}
			}
		}
		if len(rows) <= limit {
			return page, nil // every row there is was read
		}
		// Rows that gave no event (written by hand, without counters):
		// read on from the last one.
		last := rows[len(rows)-1]
		from = Position{Xid: *last.FeedXid, ID: last.ID + 1}
	}
}

// StartNow returns the position from which every event still to be served
// is after: a new subscription starts there, so it gets what happens from
// now on rather than the whole history.
func StartNow(ctx context.Context, q *db.Queries) (Position, error) {
	xmin, err := q.EventFeedStart(ctx)
	if err != nil {
		return Position{}, fmt.Errorf("read the feed's start: %w", err)
	}
	// Every row not served yet has feed_xid >= xmin, and ledger ids
	// start at 1: they all come after (xmin, 0, 0).
	return Position{Xid: xmin}, nil
}

// Feed reads the feed on a pool of its own: what GET /v1/events serves.
type Feed struct{ pool *pgxpool.Pool }

// NewFeed returns the feed read on pool.
func NewFeed(pool *pgxpool.Pool) *Feed { return &Feed{pool: pool} }

// Read returns up to limit events after a position (see the function Read).
func (f *Feed) Read(ctx context.Context, after Position, limit int) (Page, error) {
	return Read(ctx, db.New(f.pool), after, limit)
}
