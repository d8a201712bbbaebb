package stock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// Locations: where stock is (a warehouse, a store, a venue). Every stock
// row is at one; a write that names none means DefaultLocation. A hold
// line that names no location is allocated by the hold batch (decide.go)
// among the active locations, lowest priority number first.

// Limits on locations.
const (
	MaxLocationName  = 200
	MaxLocationsPage = 1000
	// MaxPriority bounds a location's priority both ways: from
	// -MaxPriority to MaxPriority.
	MaxPriority = 1_000_000
)

// Coordinates are a point on Earth, in degrees: latitude north (-90 to
// 90), longitude east (-180 to 180).
type Coordinates struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
}

// earthRadiusKm is the Earth's mean radius.
const earthRadiusKm = 6371.0

// DistanceKm is the great-circle distance between a and b (haversine).
func DistanceKm(a, b Coordinates) float64 {
	rad := func(d float64) float64 { return d * math.Pi / 180 }
	dLat, dLon := rad(b.Latitude-a.Latitude), rad(b.Longitude-a.Longitude)
	h := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(rad(a.Latitude))*math.Cos(rad(b.Latitude))*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(h)))
}

// ValidCoordinates refuses a latitude or longitude out of range (what
// names them in the refusal).
func ValidCoordinates(what string, c Coordinates) error {
	switch {
	case math.IsNaN(c.Latitude) || c.Latitude < -90 || c.Latitude > 90:
		return domain.Invalid("%s.latitude must be from -90 to 90 degrees, not %v", what, c.Latitude)
	case math.IsNaN(c.Longitude) || c.Longitude < -180 || c.Longitude > 180:
		return domain.Invalid("%s.longitude must be from -180 to 180 degrees, not %v", what, c.Longitude)
	}
	return nil
}

// Location is a location as the API shows it, with the totals of its stock
// over every SKU and pool when they were asked for.
type Location struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	Active   bool   `json:"active"`
	// Latitude and Longitude are where it is (null: not known), for the
	// nearest strategy; Pickup, whether shoppers may collect there.
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
	Pickup    bool     `json:"pickup"`
	// StopSale is why sales are stopped at this location alone, when they
	// are (PUT /v1/stop-sale with a location).
	StopSale  *string         `json:"stop_sale"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Totals    *LocationTotals `json:"totals,omitempty"`
}

// LocationTotals sums a location's stock rows, every state.
type LocationTotals struct {
	Rows int64 `json:"rows"`
	Counters
}

func newLocation(l db.Location) Location {
	return Location{ID: l.ID, Name: l.Name, Priority: l.Priority, Active: l.Active, StopSale: l.StopSaleReason,
		Latitude: l.Latitude, Longitude: l.Longitude, Pickup: l.Pickup, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}

// NewLocation asks to add a location.
type NewLocation struct {
	ID       string
	Name     string
	Priority int32
	// Active is nil for true.
	Active *bool
	// Coordinates, when given, are where it is; Pickup lets shoppers
	// collect there.
	Coordinates *Coordinates
	Pickup      bool
	Actor       string
}

// coordinates are c's latitude and longitude as the database keeps them.
func (c *Coordinates) columns() (*float64, *float64) {
	if c == nil {
		return nil, nil
	}
	return &c.Latitude, &c.Longitude
}

func validPriority(p int32) error {
	if p < -MaxPriority || p > MaxPriority {
		return domain.Invalid("priority must be a whole number from %d to %d (lower is allocated first)", -MaxPriority, MaxPriority)
	}
	return nil
}

func validLocationName(name string) error {
	if name == "" {
		return domain.Invalid("name is required")
	}
	return domain.ValidText("name", name, MaxLocationName)
}

// CreateLocationOnce adds a location, at most once per key (see
// idempotency.Do). An id taken already is 409 conflict.
func (s *Service) CreateLocationOnce(ctx context.Context, key idempotency.Key, n NewLocation) (Location, bool, error) {
	if err := domain.ValidName("id", n.ID); err != nil {
		return Location{}, false, err
	}
	if err := validLocationName(n.Name); err != nil {
		return Location{}, false, err
	}
	if err := validPriority(n.Priority); err != nil {
		return Location{}, false, err
	}
	if n.Coordinates != nil {
		if err := ValidCoordinates("coordinates", *n.Coordinates); err != nil {
			return Location{}, false, err
		}
	}
	lat, lon := n.Coordinates.columns()
	active := n.Active == nil || *n.Active
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Location, error) {
		r, err := db.New(tx).LocationCreate(ctx, db.LocationCreateParams{
			ID: n.ID, Name: n.Name, Priority: n.Priority, Active: active, Latitude: lat, Longitude: lon, Pickup: n.Pickup,
			CreatedBy: n.Actor, CreatedKey: domain.KeyName(ctx),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return Location{}, &domain.Error{Code: domain.CodeConflict, Location: n.ID, Detail: fmt.Sprintf("location %q exists already", n.ID)}
		}
		if err != nil {
			return Location{}, fmt.Errorf("create location %s: %w", n.ID, err)
		}
		s.log.InfoContext(ctx, "location created", "location", n.ID, "priority", n.Priority, "active", active, "actor", n.Actor)
		return newLocation(r), nil
	})
}

// LocationsPage is a page of locations; NextCursor, when not nil, asks for
// the next one.
type LocationsPage struct {
	Locations  []Location `json:"locations"`
	NextCursor *string    `json:"next_cursor"`
}

// Locations lists up to limit locations after the id cursor (empty: from
// the first), in id order, each with its totals.
func (s *Service) Locations(ctx context.Context, cursor string, limit int) (LocationsPage, error) {
	if limit < 1 || limit > MaxLocationsPage {
		return LocationsPage{}, domain.Invalid("limit must be from 1 to %d", MaxLocationsPage)
	}
	if cursor != "" {
		if err := domain.ValidName("cursor", cursor); err != nil {
			return LocationsPage{}, err
		}
	}
	q := db.New(s.pool)
	rows, err := q.LocationsPage(ctx, domain.Optional(cursor), int32(limit+1))
	if err != nil {
		return LocationsPage{}, err
	}
	page := LocationsPage{Locations: []Location{}}
	if len(rows) > limit {
		rows = rows[:limit]
		next := rows[limit-1].ID
		page.NextCursor = &next
	}
	out, err := withTotals(ctx, q, rows)
	if err != nil {
		return LocationsPage{}, err
	}
	page.Locations = append(page.Locations, out...)
	return page, nil
}

// Location returns one location with its totals.
func (s *Service) Location(ctx context.Context, id string) (Location, error) {
	if err := domain.ValidName("location", id); err != nil {
		return Location{}, err
	}
	q := db.New(s.pool)
	r, err := q.LocationGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Location{}, ErrUnknownLocation(id, false)
	}
	if err != nil {
		return Location{}, err
	}
	out, err := withTotals(ctx, q, []db.Location{r})
	if err != nil {
		return Location{}, err
	}
	return out[0], nil
}

func withTotals(ctx context.Context, q *db.Queries, rows []db.Location) ([]Location, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	totals, err := q.LocationTotals(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("sum the locations' stock: %w", err)
	}
	by := make(map[string]LocationTotals, len(totals))
	for _, t := range totals {
		by[t.Location] = LocationTotals{Rows: t.Rows, Counters: Counters{Total: t.Total, Available: t.Available, Reserved: t.Reserved,
			Sold: t.Sold, QualityControl: t.QualityControl, Damaged: t.Damaged, SafetyStock: t.SafetyStock, Incoming: t.Incoming, Short: t.Short}}
	}
	out := make([]Location, len(rows))
	for i, r := range rows {
		out[i] = newLocation(r)
		t := by[r.ID]
		out[i].Totals = &t
	}
	return out, nil
}

// LocationChange changes whichever of a location's name, priority and
// active are not nil.
type LocationChange struct {
	ID          string
	Name        *string
	Priority    *int32
	Active      *bool
	Coordinates *Coordinates
	Pickup      *bool
	Actor       string
}

// UpdateLocation changes a location. Deactivating (or activating) it
// takes the stop-sale lock first, as a stop-sale does (see
// queueStopSale): once it returns, no hold batch that read the location
// active is still running, so no hold committed after it takes stock
// there. Its holds finish normally.
func (s *Service) UpdateLocation(ctx context.Context, c LocationChange) (Location, error) {
	if err := domain.ValidName("location", c.ID); err != nil {
		return Location{}, err
	}
	if c.Name == nil && c.Priority == nil && c.Active == nil && c.Coordinates == nil && c.Pickup == nil {
		return Location{}, domain.Invalid("give at least one of name, priority, active, latitude and longitude, and pickup")
	}
	if c.Coordinates != nil {
		if err := ValidCoordinates("coordinates", *c.Coordinates); err != nil {
			return Location{}, err
		}
	}
	if c.Name != nil {
		if err := validLocationName(*c.Name); err != nil {
			return Location{}, err
		}
	}
	if c.Priority != nil {
		if err := validPriority(*c.Priority); err != nil {
			return Location{}, err
		}
	}
	err := s.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		if c.Active != nil {
			if err := q.StopSaleLock(ctx); err != nil {
				return fmt.Errorf("take the stop-sale lock: %w", err)
			}
		}
		lat, lon := c.Coordinates.columns()
		_, err := q.LocationUpdate(ctx, db.LocationUpdateParams{
			ID: c.ID, Name: c.Name, Priority: c.Priority, Active: c.Active, Pickup: c.Pickup,
			SetCoordinates: c.Coordinates != nil, Latitude: lat, Longitude: lon,
			UpdatedBy: &c.Actor, UpdatedKey: domain.KeyName(ctx),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrUnknownLocation(c.ID, false)
		}
		return err
	})
	if err != nil {
		return Location{}, err
	}
	s.log.InfoContext(ctx, "location changed", "location", c.ID, "actor", c.Actor,
		"name", domain.Value(c.Name), "priority", c.Priority, "active", c.Active)
	return s.Location(ctx, c.ID)
}

// ErrUnknownLocation is the refusal of a location that does not exist:
// named in the body (reference: 422) or addressed by the path (404).
func ErrUnknownLocation(id string, reference bool) error {
	return &domain.Error{Code: domain.CodeUnknownLocation, Reference: reference, Location: id,
		Detail: fmt.Sprintf("location %q does not exist (POST /v1/locations adds one)", id)}
}

// locationOr is location, or DefaultLocation when it is empty: a write
// that names no location is at DefaultLocation.
func locationOr(location string) string {
	if location == "" {
		return DefaultLocation
	}
	return location
}

// RequireLocations is requireLocations in the caller's transaction: a
// campaign's allotments name where they are carved from, a rollback's
// scope where its lines are.
func RequireLocations(ctx context.Context, tx pgx.Tx, ids ...string) error {
	return requireLocations(ctx, db.New(tx), ids...)
}

// At is " at location", or nothing for the default location: how messages
// name where a row is.
func At(location string) string { return at(location) }

// requireLocations checks that every one of ids exists (the stock rows a
// write creates must be somewhere real): unknown_location naming the
// first that does not, as a reference from the request's body.
func requireLocations(ctx context.Context, q *db.Queries, ids ...string) error {
	var want []string
	for _, id := range ids {
		if id != DefaultLocation && !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	found, err := q.LocationsGet(ctx, want)
	if err != nil {
		return fmt.Errorf("look up locations: %w", err)
	}
	for _, id := range want {
		if !slices.ContainsFunc(found, func(l db.Location) bool { return l.ID == id }) {
			return ErrUnknownLocation(id, true)
		}
	}
	return nil
}

// PickupStock is where a SKU can be collected now: its main stock at the
// pickup locations that can sell it (GET /v1/skus/{sku}/pickup).
type PickupStock struct {
	SKU       string        `json:"sku"`
	Locations []PickupPlace `json:"locations"`
}

// PickupPlace is one pickup location with the SKU's stock there.
type PickupPlace struct {
	Location  string   `json:"location"`
	Name      string   `json:"name"`
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
	Available int64    `json:"available"`
}

// Pickup lists the pickup locations where sku's main stock can be held
// now (active, sales not stopped there, the row on sale, some available),
// by priority then id; a SKU without stock anywhere is unknown_sku.
func (s *Service) Pickup(ctx context.Context, sku string) (PickupStock, error) {
	if err := domain.ValidName("sku", sku); err != nil {
		return PickupStock{}, err
	}
	q := db.New(s.pool)
	rows, err := q.StockPickupBySKU(ctx, sku)
	if err != nil {
		return PickupStock{}, fmt.Errorf("read the pickup stock of %s: %w", sku, err)
	}
	out := PickupStock{SKU: sku, Locations: make([]PickupPlace, len(rows))}
	for i, r := range rows {
		out.Locations[i] = PickupPlace{Location: r.Location, Name: r.Name, Latitude: r.Latitude, Longitude: r.Longitude, Available: r.Available}
	}
	if len(rows) == 0 {
		if exists, err := q.StockSKUExists(ctx, sku); err != nil {
			return PickupStock{}, fmt.Errorf("look for SKU %s: %w", sku, err)
		} else if !exists {
			return PickupStock{}, &domain.Error{Code: domain.CodeUnknownSKU, SKU: sku, Detail: fmt.Sprintf("SKU %q has no stock", sku)}
		}
	}
	return out, nil
}
