package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// StopSaleLockName names the advisory lock between hold batches (shared)
// and flips of the stop-sale switch (exclusive): see queueStopSale.
const StopSaleLockName = "stockhold.stop_sale"

// stopSale is the switch for everything as a hold batch read it.
type stopSale struct {
	on     bool
	reason string
}

// stopSaleRead is the stop-sale step of a hold batch's first round trip.
type stopSaleRead struct {
	reading *db.StopSaleReadBatchResults
}

// queueStopSale queues, on a hold batch's first round trip, its share of
// the stop-sale lock and then, in a later statement, the read of the
// switch. A flip takes the lock exclusively (StopSaleLock) before it writes
// and commits: it waits for the batches that hold a share, and the batches
// that ask for one after it wait for its commit and then read what it
// wrote. So once a flip has committed, no hold batch that read the switch
// before it is still running: every hold committed after a stop-sale was
// decided with the switch on. Two tiny statements in a round trip the batch
// makes anyway, and a lock that lives in memory.
func queueStopSale(ctx context.Context, q *db.Queries) stopSaleRead {
	q.StopSaleShare(ctx, []string{StopSaleLockName})
	return stopSaleRead{reading: q.StopSaleRead(ctx, []bool{true})}
}

func readStopSale(r stopSaleRead) stopSale {
	rows, _ := collect(r.reading.Query)
	if len(rows) == 0 || !rows[0].Active {
		return stopSale{}
	}
	return stopSale{on: true, reason: domain.Value(rows[0].Reason)}
}

// refuseAll is the verdict on every hold of a batch while sales are
// stopped: refused, taking nothing.
func (st stopSale) refuseAll(n int) []verdict {
	out := make([]verdict, n)
	for i := range out {
		out[i] = verdict{why: domain.CodeStopSale, reason: st.reason}
	}
	return out
}

func errStopSale(reason string) error {
	return &domain.Error{Code: domain.CodeStopSale,
		Detail: fmt.Sprintf("sales are stopped (%s): no new holds until an operator lifts the stop-sale; confirms, releases and reads go on", reason)}
}

// StopSale is the switch for everything: while Active, every new hold is
// refused (503 stop_sale); confirms, releases and reads go on.
type StopSale struct {
	Active bool    `json:"active"`
	Reason *string `json:"reason"`
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

// StopSaleChange flips the stop-sale switch.
type StopSaleChange struct {
	Active bool
	Reason string
	Actor  string
	// Rule names the automatic trip that flips it; empty for a person.
	Rule string
}

// StopSale returns the stop-sale switch as the last flip left it.
func (s *Service) StopSale(ctx context.Context) (StopSale, error) {
	r, err := db.New(s.pool).StopSaleGet(ctx)
	if err != nil {
		return StopSale{}, fmt.Errorf("read the stop-sale switch: %w", err)
	}
	return newStopSale(r), nil
}

// SetStopSale turns the stop-sale switch on or off, with who and why (a
// reason is required both ways). It takes the stop-sale lock exclusively
// first (see queueStopSale), so once it returns no hold batch that read the
// switch before the flip is still running. Turning on what is on, or off
// what is off, records the new reason and actor.
func (s *Service) SetStopSale(ctx context.Context, c StopSaleChange) (StopSale, error) {
	if c.Reason == "" {
		return StopSale{}, domain.Invalid("reason is required: why sales stop or start again")
	}
	if err := domain.ValidText("reason", c.Reason, domain.MaxTextLength); err != nil {
		return StopSale{}, err
	}
	var out StopSale
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.StopSaleLock(ctx); err != nil {
			return fmt.Errorf("take the stop-sale lock: %w", err)
		}
		r, err := q.StopSaleSet(ctx, db.StopSaleSetParams{
			Active: c.Active, Reason: &c.Reason, Actor: &c.Actor, ActorKey: domain.KeyName(ctx), Rule: domain.Optional(c.Rule),
		})
		if err != nil {
			return fmt.Errorf("set the stop-sale switch: %w", err)
		}
		out = newStopSale(r)
		return nil
	})
	if err != nil {
		return StopSale{}, err
	}
	s.log.InfoContext(ctx, "stop-sale switched", "active", c.Active, "actor", c.Actor, "reason", c.Reason, "rule", c.Rule)
	return out, nil
}
