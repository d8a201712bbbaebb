package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/metrics"
)

// Release says how and why holds end when they are handed back.
type Release struct {
	// Status is StatusReleased or StatusExpired.
	Status string
	// Kind is the ledger kind: "release", "expire" or "rollback".
	Kind   string
	Actor  string
	Reason string
}

// Releases of the system's own making.
var (
	releaseByExpiryJob = Release{Status: StatusExpired, Kind: "expire", Actor: "system:release_hold", Reason: "hold expired"}
	releaseBySweeper   = Release{Status: StatusExpired, Kind: "expire", Actor: "system:sweep_expired", Reason: "hold expired (sweeper)"}
	releaseOnConfirm   = Release{Status: StatusExpired, Kind: "expire", Actor: "system:confirm", Reason: "hold expired before payment was confirmed"}
)

// ReleaseTx hands back the stock of every hold among ids that is still held,
// inside the caller's transaction, and returns the ids it released. It is the
// one release every path goes through (cancel, expiry job, sweeper, campaign
// end, manual rollback): a hold that is no longer held is skipped, so no
// path can hand stock back twice. Rows are locked in id order and stock rows
// in (sku, pool) order, the order every other writer uses.
func ReleaseTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, how Release) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q := db.New(tx)
	held, err := q.ReservationsLockHeld(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("lock holds: %w", err)
	}
	if len(held) == 0 {
		return nil, nil
	}
	released, err := q.ReservationsRelease(ctx, db.ReservationsReleaseParams{
		Status: how.Status, Reason: optional(how.Reason), Actor: &how.Actor, Ids: held,
	})
	if err != nil {
		return nil, fmt.Errorf("release holds: %w", err)
	}
	sums, err := q.ReservationLinesSummed(ctx, released)
	if err != nil {
		return nil, fmt.Errorf("sum released lines: %w", err)
	}
	rows := make([]Line, len(sums))
	versions := make([]int64, len(sums))
	for i, sum := range sums {
		row, err := q.StockMove(ctx, db.StockMoveParams{
			Sku: sum.Sku, Pool: sum.Pool, DeltaAvailable: sum.Quantity, DeltaReserved: -sum.Quantity,
		})
		if err != nil {
			return nil, fmt.Errorf("hand back %s/%s: %w", sum.Sku, sum.Pool, err)
		}
		rows[i] = Line{SKU: sum.Sku, Pool: sum.Pool, Quantity: sum.Quantity}
		versions[i] = row.Version
	}
	m := movement{kind: how.Kind, available: +1, reserved: -1, actor: &how.Actor, reason: optional(how.Reason)}
	if err := appendLedger(ctx, q, released, rows, versions, m); err != nil {
		return nil, err
	}
	metrics.Released(how.Status, how.Kind, how.Actor, len(released))
	return released, nil
}

// Confirm turns a held reservation into a sale. Confirming a confirmed hold
// again succeeds with the same answer; a hold that was released or expired
// (including one found past its expiry now) is refused with its status, so a
// late payment never resurrects stock that was handed back.
func (s *Service) Confirm(ctx context.Context, id uuid.UUID, by Caller) (Reservation, error) {
	var (
		out        Reservation
		expiredNow bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := db.New(tx)
		r, err := lockOwned(ctx, q, id, by)
		if err != nil {
			return err
		}
		switch r.Status {
		case StatusConfirmed:
			out, err = reservationOf(ctx, q, r)
			return err
		case StatusReleased, StatusExpired:
			return errNotHeld(id, r.Status)
		}
		row, err := q.ReservationConfirm(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			// Held but past its expiry: its stock belongs to others again,
			// whether or not the expiry job has run yet. Expire it now.
			expiredNow = true
			_, err := ReleaseTx(ctx, tx, []uuid.UUID{id}, releaseOnConfirm)
			return err
		}
		if err != nil {
			return fmt.Errorf("confirm: %w", err)
		}
		sums, err := q.ReservationLinesSummed(ctx, []uuid.UUID{id})
		if err != nil {
			return err
		}
		rows := make([]Line, len(sums))
		versions := make([]int64, len(sums))
		for i, sum := range sums {
			st, err := q.StockMove(ctx, db.StockMoveParams{
				Sku: sum.Sku, Pool: sum.Pool, DeltaReserved: -sum.Quantity, DeltaSold: sum.Quantity,
			})
			if err != nil {
				return fmt.Errorf("sell %s/%s: %w", sum.Sku, sum.Pool, err)
			}
			rows[i] = Line{SKU: sum.Sku, Pool: sum.Pool, Quantity: sum.Quantity}
			versions[i] = st.Version
		}
		if err := appendLedger(ctx, q, []uuid.UUID{id}, rows, versions, movement{kind: "confirm", reserved: -1, sold: +1, actor: &by.Name}); err != nil {
			return err
		}
		out = newReservation(row, rows)
		return nil
	})
	if err == nil && expiredNow {
		return Reservation{}, errNotHeld(id, StatusExpired)
	}
	return out, err
}

// Cancel releases a held reservation at the shop's request. Releasing it
// again answers the same; a confirmed hold is refused with its status; one
// that expired meanwhile is answered as it is, since its stock is back.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID, by Caller, reason string) (Reservation, error) {
	if err := ValidText("reason", reason, MaxTextLength); err != nil {
		return Reservation{}, err
	}
	if reason == "" {
		reason = "cancelled"
	}
	var out Reservation
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := db.New(tx)
		r, err := lockOwned(ctx, q, id, by)
		if err != nil {
			return err
		}
		if r.Status == StatusConfirmed {
			return errNotHeld(id, r.Status)
		}
		if r.Status == StatusHeld {
			how := Release{Status: StatusReleased, Kind: "release", Actor: by.Name, Reason: reason}
			if _, err := ReleaseTx(ctx, tx, []uuid.UUID{id}, how); err != nil {
				return err
			}
			if r, err = q.ReservationGet(ctx, id); err != nil {
				return err
			}
		}
		out, err = reservationOf(ctx, q, r)
		return err
	})
	return out, err
}

// ErrNotYetExpired is returned by Expire for a hold whose time has not come;
// Remaining says how long to wait.
type ErrNotYetExpired struct{ Remaining time.Duration }

func (e *ErrNotYetExpired) Error() string { return fmt.Sprintf("hold expires in %s", e.Remaining) }

// Expire ends hold id if it is still held and past its expiry; it is what the
// release_hold job runs. A hold that already ended is left alone. It reports
// whether this call released it.
func (s *Service) Expire(ctx context.Context, id uuid.UUID) (bool, error) {
	var released bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := db.New(tx).ReservationExpiry(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && r.Status != StatusHeld {
			return nil
		}
		if err != nil {
			return err
		}
		if r.RemainingSeconds > 0 {
			return &ErrNotYetExpired{Remaining: time.Duration(r.RemainingSeconds * float64(time.Second))}
		}
		ids, err := ReleaseTx(ctx, tx, []uuid.UUID{id}, releaseByExpiryJob)
		released = len(ids) == 1
		return err
	})
	return released, err
}

// SweepBatch is how many holds the sweeper releases per transaction.
const SweepBatch = 100

// SweepExpired releases every hold more than grace past its expiry, in
// transactions of SweepBatch, and returns how many it released. It is the
// backstop for expiry jobs that were lost, discarded or never ran.
func (s *Service) SweepExpired(ctx context.Context, grace time.Duration) (int, error) {
	total := 0
	for {
		var n int
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			ids, err := db.New(tx).ReservationsExpiredHeld(ctx, grace.Seconds(), SweepBatch)
			if err != nil {
				return err
			}
			released, err := ReleaseTx(ctx, tx, ids, releaseBySweeper)
			n = len(released)
			return err
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < SweepBatch {
			return total, nil
		}
	}
}

// lockOwned locks reservation id for the rest of the transaction, if the
// caller may see it.
func lockOwned(ctx context.Context, q *db.Queries, id uuid.UUID, by Caller) (db.Reservation, error) {
	r, err := q.ReservationLock(ctx, id)
	if err != nil {
		return db.Reservation{}, notFound(err, "reservation")
	}
	if !by.maySee(r.Client) {
		return db.Reservation{}, ErrNotFound("reservation")
	}
	return r, nil
}

func reservationOf(ctx context.Context, q *db.Queries, r db.Reservation) (Reservation, error) {
	lines, err := linesOf(ctx, q, r.ID)
	if err != nil {
		return Reservation{}, err
	}
	return newReservation(r, lines), nil
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
