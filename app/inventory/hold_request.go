package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
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
	// Partial takes what is available of the line, up to Quantity and at
	// least MinQuantity (0: one), instead of refusing it (partial.go).
	Partial     bool  `json:"partial,omitempty"`
	MinQuantity int64 `json:"min_quantity,omitempty"`
	// bundle, on a line Reinstate holds again, is the bundle line the
	// ended hold's line was held for: the new line records it, the
	// original's definition version included.
	bundle *BundleLine
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
	// CustomerRef, when set, names who the hold is for, as the shop names
	// them: max_per_customer counts the units of their holds.
	CustomerRef string
	// TTLSeconds is how long the hold lasts unpaid; 0 means the default. A
	// campaign's own TTL wins.
	TTLSeconds int64
	Items      []Item
	// Locations, when not nil, are the only locations the hold may take
	// stock from: the client's API key is bound to them (a sales channel).
	Locations []string
	// Strategy allocates the lines that name no location (strategy.go);
	// empty: DefaultStrategy, the client's key's (empty: the shop's,
	// Config.Strategy; empty: priority), which
	// is not part of the request's identity (its hash). ShipTo is where
	// the order goes, for nearest.
	Strategy        Strategy
	DefaultStrategy Strategy
	ShipTo          *Coordinates
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
			if it.Partial || it.MinQuantity != 0 {
				return domain.Invalid("items[%d]: partial goes with a quantity, not with units named or adjacent", i)
			}
			if err := it.validateUnits(i); err != nil {
				return err
			}
			continue
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			return domain.Invalid("items[%d].quantity must be a whole number from 1 to %d", i, MaxQuantity)
		}
		if it.Partial || it.MinQuantity != 0 {
			if err := r.validatePartial(i); err != nil {
				return err
			}
		}
	}
	if _, err := r.asks(); err != nil {
		return err
	}
	if err := r.validateStrategy(); err != nil {
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
	if err := domain.ValidRef("customer_ref", r.CustomerRef, MaxOrderRefSize); err != nil {
		return err
	}
	return domain.ValidRef("order_ref", r.OrderRef, MaxOrderRefSize)
}

// validateStrategy checks the strategy and ship_to: nearest asked for
// needs ship_to, and coordinates are in range. (A key whose default is
// nearest allocates a hold without ship_to by priority.)
func (r HoldRequest) validateStrategy() error {
	if r.Strategy == "" && r.ShipTo == nil {
		return nil
	}
	if err := ValidStrategy("strategy", r.Strategy); err != nil {
		return err
	}
	if r.ShipTo != nil {
		return stock.ValidCoordinates("ship_to", *r.ShipTo)
	}
	if r.Strategy == StrategyNearest {
		return domain.Invalid("strategy nearest allocates by distance to ship_to: give ship_to (latitude and longitude)")
	}
	return nil
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
		OrderRef string       `json:"order_ref"`
		Campaign string       `json:"campaign"`
		TTL      int64        `json:"ttl_seconds"`
		Items    []Item       `json:"items"`
		Strategy Strategy     `json:"strategy,omitempty"`
		ShipTo   *Coordinates `json:"ship_to,omitempty"`
		Customer string       `json:"customer_ref,omitempty"`
	}{r.OrderRef, r.Campaign, r.TTLSeconds, r.Items, r.Strategy, r.ShipTo, r.CustomerRef})
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
	// Partial takes what there is, up to Quantity and at least Min (see
	// partial.go).
	Partial bool
	Min     int64
	// bundle, on a component of a bundle line, is that line (bundles.go);
	// reheld, that line is an ended hold's, held again by Reinstate with
	// the definition it used then, whatever the current one is.
	bundle *BundleLine
	reheld bool
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
		return []want{{SKU: it.SKU, Location: it.Location, Pool: pool, Quantity: it.count(), Split: it.Split, Partial: it.Partial, Min: it.MinQuantity,
			bundle: it.bundle, reheld: it.bundle != nil}}
	}
	type key struct{ sku, location string }
	sum := map[key]*want{}
	for _, it := range r.Items {
		k := key{it.SKU, it.Location}
		w := sum[k]
		if w == nil {
			w = &want{SKU: it.SKU, Location: it.Location, Pool: pool, bundle: it.bundle, reheld: it.bundle != nil}
			sum[k] = w
		}
		w.Quantity += it.count()
		w.Split = w.Split || it.Split
		w.Partial, w.Min = it.Partial, it.MinQuantity // a partial SKU is one line (validatePartial)
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
	// none. maxPerCustomer is its cap per customer, counted over
	// customerWindow seconds (nil: ever).
	maxPerOrder                    *int64
	maxPerCustomer, customerWindow *int64
	// asks is what it asks of units with an identity, by poolKey (nil:
	// quantities only).
	asks map[string]unitAsk
}

// mayUse reports whether the hold may take stock at location: any, unless
// its client's key is bound to some.
func (h hold) mayUse(location string) bool {
	return h.req.Locations == nil || slices.Contains(h.req.Locations, location)
}
