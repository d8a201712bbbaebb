// Package retention deletes what stockhold no longer needs once it is older
// than the retention period (STOCKHOLD_RETENTION): holds that ended
// (released or expired) with their lines, and the stored answers of
// creating POSTs (idempotency records). It deletes in small batches, each
// its own short transaction, so it never holds many locks or a long
// transaction against live traffic.
//
// What it keeps: the ledger, whole (it explains every unit, and names the
// deleted holds by id); confirmed holds, whose lines are what
// reconciliation checks each pool's sold against, so deleting them would
// raise a false books-out-of-balance alarm; and held holds, which are live.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// DefaultBatch is how many rows one transaction deletes.
const DefaultBatch = 500

// Config tunes a Service.
type Config struct {
	// After is the retention period: what is older is deleted.
	After time.Duration
	// Batch is the rows one transaction deletes; 0 means DefaultBatch.
	Batch int
	// Budget bounds one Run; what is left waits for the next. 0 means
	// no bound (the context's).
	Budget time.Duration
	Log    *slog.Logger
}

// Service deletes what is older than the retention period.
type Service struct {
	pool *pgxpool.Pool
	cfg  Config
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool, cfg Config) *Service {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Service{pool: pool, cfg: cfg}
}

// Result counts what a run deleted.
type Result struct {
	Holds           int `json:"holds"`
	Lines           int `json:"lines"`
	IdempotencyKeys int `json:"idempotency_keys"`
	// Done is false when the run stopped at its budget with more to delete.
	Done bool `json:"done"`
}

// Run deletes, batch by batch, ended holds and idempotency records older
// than the retention period, until none is left or the budget is spent.
// Each batch commits on its own, so a run cut short keeps what it did, and
// the next run goes on.
func (s *Service) Run(ctx context.Context) (Result, error) {
	var res Result
	var deadline time.Time
	if s.cfg.Budget > 0 {
		deadline = time.Now().Add(s.cfg.Budget)
	}
	older := s.cfg.After.Seconds()
	lim := int32(s.cfg.Batch)
	q := db.New(s.pool)
	holdsDone, keysDone := false, false
	for !holdsDone || !keysDone {
		if !deadline.IsZero() && time.Now().After(deadline) {
			s.log(ctx, res)
			return res, nil
		}
		if !holdsDone {
			n, err := q.ReservationsDeleteEnded(ctx, older, lim)
			if err != nil {
				return res, fmt.Errorf("delete ended holds: %w", err)
			}
			res.Holds += int(n.Holds)
			res.Lines += int(n.Lines)
			holdsDone = n.Holds < lim
		}
		if !keysDone {
			n, err := q.IdempotencyKeysDeleteOld(ctx, older, lim)
			if err != nil {
				return res, fmt.Errorf("delete idempotency records: %w", err)
			}
			res.IdempotencyKeys += int(n)
			keysDone = n < lim
		}
	}
	res.Done = true
	s.log(ctx, res)
	return res, nil
}

func (s *Service) log(ctx context.Context, res Result) {
	if res.Holds+res.IdempotencyKeys == 0 {
		return
	}
	s.cfg.Log.InfoContext(ctx, "retention deleted old rows", "holds", res.Holds, "lines", res.Lines,
		"idempotency_keys", res.IdempotencyKeys, "done", res.Done, "older_than", s.cfg.After)
}
