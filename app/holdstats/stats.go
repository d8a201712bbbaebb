// Package holdstats is how holds are faring, as an operator asks
// (GET /v1/stats, the console's overview) and as the protection switch
// reads it: figures the database knows over a window, the counts only the
// process knows (hold requests by outcome, its confirm times, the requests
// it answered busy on a locked row).
package holdstats

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Bounds of the window Stats looks back over.
const (
	DefaultStatsWindow = 24 * time.Hour
	MinStatsWindow     = time.Second
	MaxStatsWindow     = 720 * time.Hour
)

// StuckAfter is how far past its expiry a held hold must be to count as
// stuck: by then the expiry loop should have released it, and the sweeper
// (with its default grace of a minute) should be on it.
const StuckAfter = time.Minute

// Stats is how holds are faring. It mixes two sources on purpose, and says
// which is which: the database knows every hold that was made and what
// became of it, over any window, across every instance; only the process
// knows the holds it refused, since a refused hold leaves no row.
type Stats struct {
	// AsOf is the database's clock when the figures were read.
	AsOf   time.Time   `json:"as_of"`
	Window StatsWindow `json:"window"`
	// HoldsInWindow are the holds created in the window, by status now.
	HoldsInWindow WindowHolds `json:"holds_in_window"`
	// OpenHolds is the number of holds held now, whenever made.
	OpenHolds int64 `json:"open_holds"`
	// StuckHolds is the number of holds held more than StuckAfter past
	// their expiry now.
	StuckHolds        int64 `json:"stuck_holds"`
	StuckAfterSeconds int64 `json:"stuck_after_seconds"`
	// HoldRequests are this process's hold requests since it started.
	HoldRequests HoldRequests `json:"hold_requests_since_start"`
}

// StatsWindow is the span HoldsInWindow covers: from Since to AsOf.
type StatsWindow struct {
	Duration string    `json:"duration"`
	Seconds  int64     `json:"seconds"`
	Since    time.Time `json:"since"`
}

// WindowHolds counts the holds created in a window by their status now. The
// rates are shares of Created, nil when nothing was created; holds still
// held have not been decided yet, so the rates need not add up to one.
type WindowHolds struct {
	Created     int64    `json:"created"`
	Held        int64    `json:"held"`
	Confirmed   int64    `json:"confirmed"`
	Released    int64    `json:"released"`
	Expired     int64    `json:"expired"`
	ConfirmRate *float64 `json:"confirm_rate"`
	ReleaseRate *float64 `json:"release_rate"`
	ExpiryRate  *float64 `json:"expiry_rate"`
}

// HoldRequests counts hold requests by outcome from the process's
// stockhold_holds_total counter: Held got a hold (201), Replayed were
// answered from an earlier request with the same Idempotency-Key, Refused
// is every other outcome (out of stock, paused, invalid, ...). SuccessRate
// is Held / (Held + Refused), replays left out; nil before any request.
// The counter restarts with the process and each instance has its own: for
// the whole fleet, sum stockhold_holds_total in Prometheus.
type HoldRequests struct {
	Since       time.Time        `json:"since"`
	Attempts    int64            `json:"attempts"`
	Held        int64            `json:"held"`
	Refused     int64            `json:"refused"`
	Replayed    int64            `json:"replayed"`
	SuccessRate *float64         `json:"success_rate"`
	Outcomes    map[string]int64 `json:"outcomes"`
}

// NewHoldRequests sums outcome counts, as HoldCounts keeps them, into
// HoldRequests.
func NewHoldRequests(outcomes map[string]int64, since time.Time) HoldRequests {
	h := HoldRequests{Since: since.UTC(), Outcomes: outcomes}
	if h.Outcomes == nil {
		h.Outcomes = map[string]int64{}
	}
	for outcome, n := range h.Outcomes {
		switch outcome {
		case "held":
			h.Held += n
		case "replayed":
			h.Replayed += n
		default:
			h.Refused += n
		}
	}
	h.Attempts = h.Held + h.Refused
	h.SuccessRate = rate(h.Held, h.Attempts)
	return h
}

// Read reads the holds created in the last window by their status and
// the open and stuck holds, from one snapshot, with requests, the
// process's own hold outcomes (Counts.Requests).
func Read(ctx context.Context, pool *pgxpool.Pool, window time.Duration, requests HoldRequests) (Stats, error) {
	if window < MinStatsWindow || window > MaxStatsWindow {
		return Stats{}, domain.Invalid("window must be from %s to %s", MinStatsWindow, MaxStatsWindow)
	}
	var (
		created db.StatsHoldsCreatedRow
		open    db.StatsHoldsOpenRow
	)
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := db.New(tx)
		var err error
		if open, err = q.StatsHoldsOpen(ctx, StuckAfter.Seconds()); err != nil {
			return err
		}
		created, err = q.StatsHoldsCreated(ctx, window.Seconds())
		return err
	})
	if err != nil {
		return Stats{}, fmt.Errorf("read hold stats: %w", err)
	}
	asOf := open.AsOf
	return Stats{
		AsOf: asOf,
		Window: StatsWindow{
			Duration: window.String(), Seconds: int64(window / time.Second), Since: asOf.Add(-window),
		},
		HoldsInWindow: WindowHolds{
			Created: created.Created, Held: created.Held, Confirmed: created.Confirmed,
			Released: created.Released, Expired: created.Expired,
			ConfirmRate: rate(created.Confirmed, created.Created),
			ReleaseRate: rate(created.Released, created.Created),
			ExpiryRate:  rate(created.Expired, created.Created),
		},
		OpenHolds:         open.Open,
		StuckHolds:        open.Stuck,
		StuckAfterSeconds: int64(StuckAfter / time.Second),
		HoldRequests:      requests,
	}, nil
}

// rate is n / of rounded to four decimals, nil when of is zero.
func rate(n, of int64) *float64 {
	if of == 0 {
		return nil
	}
	r := math.Round(float64(n)/float64(of)*1e4) / 1e4
	return &r
}
