package stock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// Units with an identity: seats, tickets, serial numbers. A pool that holds
// units (a serialized pool) changes only through them: each is one unit of
// its counters, and the database keeps the counters equal to its units by
// status (migration 00120). A hold line names units or asks for a number
// of them; the rule every change to a hold follows moves its units with its
// stock.

// Unit statuses.
const (
	UnitAvailable = "available"
	UnitHeld      = "held"
	UnitSold      = "sold"
	UnitRetired   = "retired"
)

// Limits on units.
const (
	// MaxUnitsPerRequest bounds the units one request adds or retires.
	MaxUnitsPerRequest = 10_000
	// MaxUnitAttributes bounds one unit's attributes, as JSON.
	MaxUnitAttributes = 2_048
	// MaxUnitsPage bounds one page of a unit listing.
	MaxUnitsPage = 1_000
	// MaxUnitPosition bounds a unit's position within its group.
	MaxUnitPosition = 1_000_000
)

// UnitSpec is a unit to add: its id (unique within its SKU), and where it
// is, optionally: a group (a row, a section) and a position within it.
type UnitSpec struct {
	ID         string          `json:"id"`
	Group      string          `json:"group,omitempty"`
	Position   *int32          `json:"position,omitempty"`
	Attributes json.RawMessage `json:"attributes,omitempty"`
}

// Unit is a unit as the API shows it.
type Unit struct {
	ID         string          `json:"id"`
	SKU        string          `json:"sku"`
	Location   string          `json:"location"`
	Pool       string          `json:"pool"`
	Group      *string         `json:"group"`
	Position   *int32          `json:"position"`
	Attributes json.RawMessage `json:"attributes"`
	Status     string          `json:"status"`
	// ReservationID is the hold that holds it, or bought it: null for a
	// shop when the hold is another shop's.
	ReservationID *string `json:"reservation_id"`
}

func newUnit(u db.Unit) Unit {
	out := Unit{ID: u.ID, SKU: u.Sku, Location: u.Location, Pool: u.Pool, Group: u.GroupName, Position: u.Position,
		Attributes: json.RawMessage(u.Attributes), Status: u.Status}
	if u.ReservationID != nil {
		id := u.ReservationID.String()
		out.ReservationID = &id
	}
	return out
}

// UnitsChange adds units to a pool, or retires some of its units. A pool
// of units lives at one location: Location empty means DefaultLocation
// when adding, and wherever the pool is when retiring.
type UnitsChange struct {
	SKU, Location, Pool string
	Reason              string
	Ref                 string
	Actor               string
	// Units are the units to add (their specs), or to retire (their ids).
	Units []UnitSpec
}

func (c *UnitsChange) validate(adding bool) error {
	if c.Pool == "" {
		c.Pool = MainPool
	}
	if err := domain.ValidName("sku", c.SKU); err != nil {
		return err
	}
	if err := domain.ValidName("pool", c.Pool); err != nil {
		return err
	}
	if c.Location != "" {
		if err := domain.ValidName("location", c.Location); err != nil {
			return err
		}
	}
	if strings.TrimSpace(c.Reason) == "" {
		return domain.Invalid("reason is required: why these units change")
	}
	if err := domain.ValidText("reason", c.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	if err := domain.ValidText("ref", c.Ref, domain.MaxTextLength); err != nil {
		return err
	}
	if len(c.Units) == 0 || len(c.Units) > MaxUnitsPerRequest {
		return domain.Invalid("units must have 1 to %d units", MaxUnitsPerRequest)
	}
	seen := make(map[string]int, len(c.Units))
	places := map[[2]string]int{}
	for i, u := range c.Units {
		if err := domain.ValidName(fmt.Sprintf("units[%d].id", i), u.ID); err != nil {
			return err
		}
		if j, ok := seen[u.ID]; ok {
			return domain.Invalid("units[%d] and units[%d] are both %q", j, i, u.ID)
		}
		seen[u.ID] = i
		if !adding {
			continue
		}
		if u.Group != "" {
			if err := domain.ValidName(fmt.Sprintf("units[%d].group", i), u.Group); err != nil {
				return err
			}
		}
		if u.Position != nil {
			if *u.Position < 0 || *u.Position > MaxUnitPosition {
				return domain.Invalid("units[%d].position must be from 0 to %d", i, MaxUnitPosition)
			}
			if u.Group == "" {
				return domain.Invalid("units[%d].position needs a group: a position is a place within a group", i)
			}
			place := [2]string{u.Group, fmt.Sprint(*u.Position)}
			if j, ok := places[place]; ok {
				return domain.Invalid("units[%d] and units[%d] are both at group %q position %d", j, i, u.Group, *u.Position)
			}
			places[place] = i
		}
		if len(u.Attributes) > 0 {
			var obj map[string]any
			if len(u.Attributes) > MaxUnitAttributes || json.Unmarshal(u.Attributes, &obj) != nil || obj == nil {
				return domain.Invalid("units[%d].attributes must be a JSON object of at most %d bytes", i, MaxUnitAttributes)
			}
		}
	}
	return nil
}

func (c UnitsChange) ids() []string {
	ids := make([]string, len(c.Units))
	for i, u := range c.Units {
		ids[i] = u.ID
	}
	return ids
}

// AddUnitsOnce adds units to a pool at most once per key (see
// idempotency.Do): each is one available unit of the pool, and one
// stock_in ledger row names them all. The main pool is created if it does
// not exist (another pool must exist), and becomes serialized; a pool that
// has stock without units is refused, as are ids or places its SKU has
// already. It returns the SKU's stock.
func (s *Service) AddUnitsOnce(ctx context.Context, key idempotency.Key, c UnitsChange) (Stock, bool, error) {
	if err := c.validate(true); err != nil {
		return Stock{}, false, err
	}
	defer s.writes.Written() // stock may be back: see Writes
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Stock, error) { return addUnitsTx(ctx, tx, c) })
}

func addUnitsTx(ctx context.Context, tx pgx.Tx, c UnitsChange) (Stock, error) {
	q := db.New(tx)
	c.Location = locationOr(c.Location)
	if err := requireLocations(ctx, q, c.Location); err != nil {
		return Stock{}, err
	}
	if err := guardUnits(ctx, q, c.SKU, c.Pool); err != nil {
		return Stock{}, err
	}
	if err := serializedElsewhere(ctx, q, c.SKU, c.Location, c.Pool); err != nil {
		return Stock{}, err
	}
	if c.Pool == MainPool {
		if _, err := q.StockCreate(ctx, c.SKU, c.Location, c.Pool); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return Stock{}, fmt.Errorf("create %s/%s/%s: %w", c.SKU, c.Location, c.Pool, err)
		}
	}
	row, err := q.StockLock(ctx, c.SKU, c.Location, c.Pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stock{}, errNoPool(ctx, q, c.SKU, c.Location, c.Pool, false)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("lock %s/%s/%s: %w", c.SKU, c.Location, c.Pool, err)
	}
	if err := refuseEnded(ctx, q, c.SKU, c.Location, c.Pool); err != nil {
		return Stock{}, err
	}
	if !row.Serialized {
		if err := noPlainStock(ctx, q, c); err != nil {
			return Stock{}, err
		}
	}
	if err := unitsFree(ctx, q, c); err != nil {
		return Stock{}, err
	}
	p := db.UnitsAddParams{Sku: c.SKU, Location: c.Location, Pool: c.Pool, Actor: c.Actor, Reason: domain.Optional(c.Reason), Ref: domain.Optional(c.Ref)}
	for _, u := range c.Units {
		attrs := []byte(u.Attributes)
		if len(attrs) == 0 {
			attrs = []byte("{}")
		}
		pos := int32(-1) // none
		if u.Position != nil {
			pos = *u.Position
		}
		p.Ids = append(p.Ids, u.ID)
		p.Groups = append(p.Groups, u.Group)
		p.Positions = append(p.Positions, pos)
		p.Attributes = append(p.Attributes, attrs)
	}
	if _, err := q.UnitsAdd(ctx, p); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			// Another request added a unit of the same id or place to
			// another pool of the SKU (it locked that pool's row, not
			// this one) and committed first.
			return Stock{}, &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool,
				Detail: fmt.Sprintf("SKU %q: another request added units of the same ids or places at the same time (%s); nothing was added", c.SKU, pgErr.Detail)}
		}
		return Stock{}, fmt.Errorf("add units to %s/%s: %w", c.SKU, c.Pool, err)
	}
	return stockOf(ctx, q, c.SKU)
}

// unitsFree refuses units whose ids the SKU has already, or whose places
// (group, position) another of its units holds.
func unitsFree(ctx context.Context, q *db.Queries, c UnitsChange) error {
	taken, err := q.UnitsExisting(ctx, c.SKU, c.ids())
	if err != nil {
		return err
	}
	if len(taken) > 0 {
		return &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool,
			Detail: fmt.Sprintf("SKU %q has units %s already", c.SKU, QuoteIDs(taken))}
	}
	var groups []string
	var positions []int32
	for _, u := range c.Units {
		if u.Position != nil {
			groups, positions = append(groups, u.Group), append(positions, *u.Position)
		}
	}
	if len(groups) > 0 {
		at, err := q.UnitsPlacesTaken(ctx, groups, positions, c.SKU)
		if err != nil {
			return err
		}
		if len(at) > 0 {
			return &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool,
				Detail: fmt.Sprintf("SKU %q has unit %q at group %q position %d already", c.SKU, at[0].ID, at[0].GroupName, at[0].Position)}
		}
	}
	return nil
}

// noPlainStock refuses units for a pool that holds stock without an
// identity, or expects some, at any location (a pool of units lives at
// one location, alone): stock on hand here or elsewhere, or incoming (a
// transfer in transit to a row of the pool, which could never be received
// into units). The caller holds the pool's guard, so nothing adds such
// stock until it commits.
func noPlainStock(ctx context.Context, q *db.Queries, c UnitsChange) error {
	plain, err := q.StockPoolPlain(ctx, c.SKU, c.Pool)
	if err != nil {
		return fmt.Errorf("look for stock without an identity of %s/%s: %w", c.SKU, c.Pool, err)
	}
	// This location's row first: its own stock is the likelier mistake.
	slices.SortStableFunc(plain, func(a, b db.StockPoolPlainRow) int {
		switch {
		case a.Location == b.Location:
			return 0
		case a.Location == c.Location:
			return -1
		case b.Location == c.Location:
			return 1
		}
		return 0
	})
	for _, r := range plain {
		switch {
		case r.Location == c.Location && r.Total > 0:
			return &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool, Location: c.Location,
				Detail: fmt.Sprintf("SKU %q (pool %s) has %d units of stock without an identity%s: units go into a pool of their own (a new SKU)",
					c.SKU, c.Pool, r.Total, at(c.Location))}
		case r.Total > 0:
			return &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool, Location: c.Location,
				Extra: map[string]any{"stock_location": r.Location, "total": r.Total, "incoming": r.Incoming},
				Detail: fmt.Sprintf("SKU %q (pool %s) has %d units of stock without an identity at %s: a pool of units lives at one location, alone; "+
					"units go into a pool of their own (a new SKU)", c.SKU, c.Pool, r.Total, r.Location)}
		default:
			return &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool, Location: c.Location,
				Extra: map[string]any{"stock_location": r.Location, "total": r.Total, "incoming": r.Incoming},
				Detail: fmt.Sprintf("SKU %q (pool %s) has %d incoming at %s (transfers in transit): units cannot join a pool that expects stock "+
					"without an identity; receive, close or cancel those transfers first (GET /v1/transfers?sku=%s&status=in_transit)",
					c.SKU, c.Pool, r.Incoming, r.Location, c.SKU)}
		}
	}
	return nil
}

// RetireUnitsOnce takes available units out of their pool (a broken seat)
// at most once per key: they become retired, the pool's total and
// available shrink, and one adjust ledger row names them. A unit that is
// not an available unit of the pool refuses the whole request with
// unit_unavailable, naming the units.
func (s *Service) RetireUnitsOnce(ctx context.Context, key idempotency.Key, c UnitsChange) (Stock, bool, error) {
	if err := c.validate(false); err != nil {
		return Stock{}, false, err
	}
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Stock, error) { return retireUnitsTx(ctx, tx, c) })
}

func retireUnitsTx(ctx context.Context, tx pgx.Tx, c UnitsChange) (Stock, error) {
	q := db.New(tx)
	if c.Location == "" {
		where, err := q.StockPoolSerializedAt(ctx, c.SKU, c.Pool)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			c.Location = DefaultLocation
		case err != nil:
			return Stock{}, err
		default:
			c.Location = where
		}
	}
	row, err := q.StockLock(ctx, c.SKU, c.Location, c.Pool)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stock{}, errNoPool(ctx, q, c.SKU, c.Location, c.Pool, false)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("lock %s/%s/%s: %w", c.SKU, c.Location, c.Pool, err)
	}
	if err := refuseEnded(ctx, q, c.SKU, c.Location, c.Pool); err != nil {
		return Stock{}, err
	}
	if !row.Serialized {
		return Stock{}, &domain.Error{Code: domain.CodeConflict, SKU: c.SKU, Pool: c.Pool,
			Detail: fmt.Sprintf("SKU %q (pool %s) has no units", c.SKU, c.Pool)}
	}
	units, err := q.UnitsGet(ctx, c.SKU, c.ids())
	if err != nil {
		return Stock{}, err
	}
	if bad := unavailable(units, c.ids(), c.Pool); len(bad) > 0 {
		return Stock{}, ErrUnitsUnavailable(c.SKU, c.Pool, bad)
	}
	n, err := q.UnitsRetire(ctx, db.UnitsRetireParams{Sku: c.SKU, Location: c.Location, Pool: c.Pool, Ids: c.ids(), Actor: c.Actor,
		Reason: domain.Optional(c.Reason), Ref: domain.Optional(c.Ref)})
	if err != nil {
		return Stock{}, fmt.Errorf("retire units of %s/%s: %w", c.SKU, c.Pool, err)
	}
	if int(n) != len(c.Units) {
		return Stock{}, fmt.Errorf("retire units of %s/%s: %d of %d retired", c.SKU, c.Pool, n, len(c.Units))
	}
	return stockOf(ctx, q, c.SKU)
}

// unavailable returns which of ids are not available units of pool among
// units (as read), in the order ids gives them.
func unavailable(units []db.Unit, ids []string, pool string) []string {
	ok := make(map[string]bool, len(units))
	for _, u := range units {
		ok[u.ID] = u.Pool == pool && u.Status == UnitAvailable
	}
	var bad []string
	for _, id := range ids {
		if !ok[id] {
			bad = append(bad, id)
		}
	}
	return bad
}

func ErrUnitsUnavailable(sku, pool string, ids []string) error {
	return &domain.Error{Code: domain.CodeUnitUnavailable, SKU: sku, Pool: pool, Units: ids,
		Detail: fmt.Sprintf("SKU %q (pool %s): units %s are not available", sku, pool, QuoteIDs(ids))}
}

// errSerialized refuses a change of quantity to a pool of units with an
// identity, which changes only through its units.
func errSerialized(sku, pool string) error {
	return &domain.Error{Code: domain.CodeSerializedPool, SKU: sku, Pool: pool,
		Detail: fmt.Sprintf("SKU %q (pool %s) is units with an identity: add or retire units (POST /v1/skus/%s/units, .../units/retire) instead", sku, pool, sku)}
}

// QuoteIDs writes ids for a person: the first ten, and how many more.
func QuoteIDs(ids []string) string {
	quoted := make([]string, 0, min(len(ids), 10))
	for _, id := range ids[:min(len(ids), 10)] {
		quoted = append(quoted, fmt.Sprintf("%q", id))
	}
	out := strings.Join(quoted, ", ")
	if len(ids) > 10 {
		out += fmt.Sprintf(" and %d more", len(ids)-10)
	}
	return out
}

// UnitsQuery filters a listing of units; empty fields match everything.
type UnitsQuery struct {
	SKU, Pool, Status, Group string
	// After asks for the units after this id (byte order): the previous
	// page's NextAfter.
	After string
	Limit int
	// By is who asks: a unit's reservation_id is shown only for a hold the
	// caller may see (ops: every one; a shop: its own).
	By Viewer
}

// Viewer is who reads units: an API key's owner, and whether it may see
// every client's holds (ops) or only its own (shop).
type Viewer struct {
	Name string
	Ops  bool
}

func (v Viewer) maySee(client string) bool { return v.Ops || v.Name == client }

// UnitsPage is a page of units in id order; NextAfter, when not nil, asks
// for the next page.
type UnitsPage struct {
	Units []Unit `json:"units"`
	// NextCursor is the id to page on from, null on the last page.
	NextCursor *string `json:"next_cursor"`
	// NextAfter is NextCursor under its deprecated name.
	NextAfter *string `json:"next_after"`
}

// ListUnits pages through a SKU's units in id order (a keyset on the id).
// A unit held or sold shows its hold only to a caller who may see it.
func (s *Service) ListUnits(ctx context.Context, uq UnitsQuery) (UnitsPage, error) {
	if err := domain.ValidName("sku", uq.SKU); err != nil {
		return UnitsPage{}, err
	}
	if uq.Limit < 1 || uq.Limit > MaxUnitsPage {
		return UnitsPage{}, domain.Invalid("limit must be from 1 to %d", MaxUnitsPage)
	}
	p := db.UnitsListParams{Sku: uq.SKU, Lim: int32(uq.Limit + 1)}
	for _, f := range []struct {
		name, value string
		into        **string
	}{{"pool", uq.Pool, &p.Pool}, {"group", uq.Group, &p.GroupName}, {"after", uq.After, &p.After}} {
		if f.value == "" {
			continue
		}
		if err := domain.ValidName(f.name, f.value); err != nil {
			return UnitsPage{}, err
		}
		*f.into = &f.value
	}
	switch uq.Status {
	case "":
	case UnitAvailable, UnitHeld, UnitSold, UnitRetired:
		p.Status = &uq.Status
	default:
		return UnitsPage{}, domain.Invalid("status must be available, held, sold or retired")
	}
	q := db.New(s.pool)
	rows, err := q.UnitsList(ctx, p)
	if err != nil {
		return UnitsPage{}, fmt.Errorf("list units: %w", err)
	}
	if len(rows) == 0 {
		// None: a SKU that does not exist is not found, where one with
		// no units (or none that match) is an empty page.
		if _, err := stockOf(ctx, q, uq.SKU); err != nil {
			return UnitsPage{}, err
		}
	}
	page := UnitsPage{Units: make([]Unit, 0, len(rows))}
	if len(rows) > uq.Limit {
		rows = rows[:uq.Limit]
		next := rows[len(rows)-1].Unit.ID
		page.NextCursor, page.NextAfter = &next, &next
	}
	for _, r := range rows {
		u := newUnit(r.Unit)
		if r.Holder != "" && !uq.By.maySee(r.Holder) {
			u.ReservationID = nil // another shop's hold
		}
		page.Units = append(page.Units, u)
	}
	return page, nil
}
