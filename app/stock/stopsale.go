package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// StopSaleLockName names the advisory lock between hold batches (shared)
// and flips of the stop-sale switch (exclusive): see queueStopSale.
const StopSaleLockName = "stockhold.stop_sale"

// StopSale is a stop-sale switch: for everything (Client and Location
// empty), for one client's keys, or for one location. While Active, every
// new hold it covers is refused (503 stop_sale; a hold allocated among
// locations skips a stopped one); confirms, releases and reads go on.
type StopSale struct {
	// Client is the key owner the switch stops; empty for everything.
	Client string `json:"client,omitempty"`
	// Location is the location the switch stops; empty for everything.
	Location string  `json:"location,omitempty"`
	Active   bool    `json:"active"`
	Reason   *string `json:"reason"`
	// Actor is who flipped it last and ActorKey the key that authenticated
	// them; Rule names the automatic trip that did, when one did.
	Actor     *string   `json:"actor"`
	ActorKey  *string   `json:"actor_key"`
	Rule      *string   `json:"rule"`
	ChangedAt time.Time `json:"changed_at"`
}

func newStopSale(r db.StopSale) StopSale {
	return StopSale{Active: r.Active, Reason: r.Reason, Actor: r.Actor, ActorKey: r.ActorKey, Rule: r.Rule, ChangedAt: r.ChangedAt}
}

func newClientStopSale(r db.StopSaleClient) StopSale {
	return StopSale{Client: r.Client, Active: r.Active, Reason: r.Reason, Actor: &r.Actor, ActorKey: r.ActorKey, Rule: r.Rule, ChangedAt: r.ChangedAt}
}

// newLocationStopSale is a location's switch, kept on its row: on while it
// has a reason.
func newLocationStopSale(l db.Location) StopSale {
	out := StopSale{Location: l.ID, Active: l.StopSaleReason != nil, Reason: l.StopSaleReason, Actor: l.StopSaleActor, ActorKey: l.StopSaleKey}
	if l.StopSaleAt != nil {
		out.ChangedAt = *l.StopSaleAt
	}
	return out
}

// StopSales is every stop-sale switch: the one for everything, each
// client's that was ever flipped, by client, and each location's that is
// on, by location.
type StopSales struct {
	StopSale
	Clients   []StopSale `json:"clients"`
	Locations []StopSale `json:"locations"`
}

// StopSaleChange flips a stop-sale switch.
type StopSaleChange struct {
	// Client is the key owner whose holds it stops, Location the location
	// whose sales it stops; both empty for everything (never both).
	Client   string
	Location string
	Active   bool
	Reason   string
	Actor    string
	// Rule names the automatic trip that flips it; empty for a person.
	Rule string
}

// StopSaleFlipped is a switch as a flip left it, and, when the flip turned
// it off, the switch as it was (who turned it on, why, and the rule when
// one did): what the flip lifted.
type StopSaleFlipped struct {
	StopSale
	Lifted *StopSale `json:"lifted"`
}

// StopSale returns the switch for everything as the last flip left it.
func (s *Service) StopSale(ctx context.Context) (StopSale, error) {
	r, err := db.New(s.pool).StopSaleGet(ctx)
	if err != nil {
		return StopSale{}, fmt.Errorf("read the stop-sale switch: %w", err)
	}
	return newStopSale(r), nil
}

// StopSales returns every stop-sale switch.
func (s *Service) StopSales(ctx context.Context) (StopSales, error) {
	q := db.New(s.pool)
	all, err := s.StopSale(ctx)
	if err != nil {
		return StopSales{}, err
	}
	rows, err := q.StopSaleClientList(ctx)
	if err != nil {
		return StopSales{}, fmt.Errorf("read the clients' stop-sale switches: %w", err)
	}
	stopped, err := q.LocationsStopped(ctx)
	if err != nil {
		return StopSales{}, fmt.Errorf("read the locations' stop-sales: %w", err)
	}
	out := StopSales{StopSale: all, Clients: make([]StopSale, len(rows)), Locations: make([]StopSale, len(stopped))}
	for i, r := range rows {
		out.Clients[i] = newClientStopSale(r)
	}
	for i, l := range stopped {
		out.Locations[i] = newLocationStopSale(l)
	}
	return out, nil
}

// SetStopSale turns a stop-sale switch on or off, with who and why (a
// reason is required both ways): the one for everything, or with Client
// the one of that key owner (a name no key ever had is refused, 422
// unknown_client), or with Location that location's (422
// unknown_location for none). It takes the stop-sale lock exclusively
// first (see queueStopSale), so once it returns no hold batch that read the
// switch before the flip is still running. Turning on what is on, or off
// what is off, records the new reason and actor. Turning a switch off
// answers what it lifted.
func (s *Service) SetStopSale(ctx context.Context, c StopSaleChange) (StopSaleFlipped, error) {
	if err := c.validate(); err != nil {
		return StopSaleFlipped{}, err
	}
	out, err := inTxV(ctx, s, func(ctx context.Context, tx pgx.Tx) (StopSaleFlipped, error) { return flipStopSale(ctx, db.New(tx), c) })
	if err != nil {
		return StopSaleFlipped{}, err
	}
	if c.Client != "" {
		s.writes.ClientSwitched(c.Client, c.Active) // inTx told of the write: see Writes
	}
	s.log.InfoContext(ctx, "stop-sale switched", "client", c.Client, "location", c.Location, "active", c.Active, "actor", c.Actor,
		"reason", c.Reason, "rule", c.Rule)
	return out, nil
}

func (c StopSaleChange) validate() error {
	if c.Reason == "" {
		return domain.Invalid("reason is required: why sales stop or start again")
	}
	if err := domain.ValidText("reason", c.Reason, domain.MaxTextLength); err != nil {
		return err
	}
	if c.Client != "" && c.Location != "" {
		return domain.Invalid("give client or location, not both: a switch stops one client's holds, or one location's")
	}
	if c.Client != "" {
		if err := domain.ValidName("client", c.Client); err != nil {
			return err
		}
	}
	if c.Location != "" {
		return domain.ValidName("location", c.Location)
	}
	return nil
}

// flipStopSale flips the switch c names under the stop-sale lock, which
// waits for the hold batches running (see StopSaleLockName).
func flipStopSale(ctx context.Context, q *db.Queries, c StopSaleChange) (StopSaleFlipped, error) {
	if c.Client != "" {
		known, err := q.APIKeyNameExists(ctx, c.Client)
		if err != nil {
			return StopSaleFlipped{}, fmt.Errorf("look up client %s: %w", c.Client, err)
		}
		if !known {
			return StopSaleFlipped{}, &domain.Error{Code: domain.CodeUnknownClient, Reference: true,
				Detail: fmt.Sprintf("no API key was ever named %q: a client is the name of the keys whose holds to stop (stockhold apikey list)", c.Client)}
		}
	}
	if err := q.StopSaleLock(ctx); err != nil {
		return StopSaleFlipped{}, fmt.Errorf("take the stop-sale lock: %w", err)
	}
	flip := flipClient
	switch {
	case c.Location != "":
		flip = flipLocation
	case c.Client == "":
		flip = flipAll
	}
	before, after, err := flip(ctx, q, c)
	if err != nil {
		return StopSaleFlipped{}, err
	}
	out := StopSaleFlipped{StopSale: after}
	if before.Active && !c.Active {
		out.Lifted = &before
	}
	return out, nil
}

// flipLocation flips the switch of location c.Location.
func flipLocation(ctx context.Context, q *db.Queries, c StopSaleChange) (before, after StopSale, err error) {
	l, err := q.LocationGet(ctx, c.Location)
	if errors.Is(err, pgx.ErrNoRows) {
		return before, after, ErrUnknownLocation(c.Location, true)
	}
	if err != nil {
		return before, after, fmt.Errorf("read location %s: %w", c.Location, err)
	}
	before = newLocationStopSale(l)
	var reason *string
	if c.Active {
		reason = &c.Reason
	}
	l, err = q.LocationStopSaleSet(ctx, db.LocationStopSaleSetParams{Reason: reason, Actor: &c.Actor, ActorKey: domain.KeyName(ctx), ID: c.Location})
	if err != nil {
		return before, after, fmt.Errorf("set the stop-sale of %s: %w", c.Location, err)
	}
	after = newLocationStopSale(l)
	if !c.Active {
		// A location's switch keeps no reason while off: the answer says
		// why it went off.
		after.Reason = &c.Reason
	}
	return before, after, nil
}

// flipAll flips the switch for everything.
func flipAll(ctx context.Context, q *db.Queries, c StopSaleChange) (before, after StopSale, err error) {
	r, err := q.StopSaleGet(ctx)
	if err != nil {
		return before, after, fmt.Errorf("read the stop-sale switch: %w", err)
	}
	before = newStopSale(r)
	r, err = q.StopSaleSet(ctx, db.StopSaleSetParams{
		Active: c.Active, Reason: &c.Reason, Actor: &c.Actor, ActorKey: domain.KeyName(ctx), Rule: domain.Optional(c.Rule),
	})
	if err != nil {
		return before, after, fmt.Errorf("set the stop-sale switch: %w", err)
	}
	return before, newStopSale(r), nil
}

// flipClient flips the switch of client c.Client.
func flipClient(ctx context.Context, q *db.Queries, c StopSaleChange) (before, after StopSale, err error) {
	r, err := q.StopSaleClientGet(ctx, c.Client)
	switch {
	case err == nil:
		before = newClientStopSale(r)
	case !errors.Is(err, pgx.ErrNoRows):
		return before, after, fmt.Errorf("read the stop-sale switch of %s: %w", c.Client, err)
	}
	r, err = q.StopSaleClientSet(ctx, db.StopSaleClientSetParams{
		Client: c.Client, Active: c.Active, Reason: &c.Reason, Actor: c.Actor, ActorKey: domain.KeyName(ctx), Rule: domain.Optional(c.Rule),
	})
	if err != nil {
		return before, after, fmt.Errorf("set the stop-sale switch of %s: %w", c.Client, err)
	}
	return before, newClientStopSale(r), nil
}
