package inventory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// maxLockTimeouts is how many lock timeouts a request sits through before
// it answers busy even though the rows it needs were free when looked at.
const maxLockTimeouts = 2

// failure classifies why a batch transaction failed as a whole.
type failure int

const (
	// failOther: the database or the connection failed; every request in
	// the batch gets the error.
	failOther failure = iota
	// failLock: a statement waited longer than the lock timeout.
	failLock
	// failRetry: a deadlock or serialization failure; running the batch
	// again settles it.
	failRetry
	// failStatement: the database refused a statement, possibly because of
	// one request in the batch.
	failStatement
	// failSlow: a statement ran past statement_timeout; every request in
	// the batch answers busy.
	failSlow
)

func classify(ctx context.Context, err error) failure {
	var pe *pgconn.PgError
	switch {
	case ctx.Err() != nil || !errors.As(err, &pe):
		return failOther
	case pe.Code == "55P03": // lock_not_available: the lock timeout
		return failLock
	case pe.Code == "40P01" || pe.Code == "40001": // deadlock, serialization failure
		return failRetry
	case pe.Code == "57014": // query_canceled, the batch's own context being live: statement_timeout
		return failSlow
	case pe.Code[:2] == "57" || pe.Code[:2] == "53" || pe.Code[:2] == "08" || pe.Code == "25006":
		// Cancelled, shutting down, out of resources, connection trouble,
		// a server that takes no writes (a standby): not any one
		// request's fault.
		return failOther
	}
	return failStatement
}

// sqlstateRefused is what stockhold_check raises when a change statement
// finds the database disagreeing with what the service decided (see
// change.go): nothing was written.
const sqlstateRefused = "SH001"

// refused turns the database's refusal of a decided change into the
// caller's books_unbalanced, and reports whether err was one. Any other
// error comes back as it is.
func refused(err error) (error, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != sqlstateRefused {
		return err, false
	}
	return &domain.Error{Code: domain.CodeBooksUnbalanced,
		Detail: pe.Message + "; nothing was changed: reconcile the pool and repair its books before retrying"}, true
}

// errSlow is the answer of the requests of a batch that ran past the
// statement timeout.
var errSlow = &domain.Error{Code: domain.CodeBusy, Detail: "the database is too slow to answer in time; retry in a moment"}

// errBusy is the answer of a request that needs row l (an empty location:
// its pool at some location) while another transaction keeps it locked.
func errBusy(l Line) error {
	where := ""
	if l.Location != "" {
		where = " at " + l.Location
	}
	return &domain.Error{Code: domain.CodeBusy, SKU: l.SKU, Pool: l.Pool, Location: l.Location,
		Detail: fmt.Sprintf("SKU %q (pool %s)%s is locked by another transaction; retry in a moment", l.SKU, l.Pool, where)}
}

// lockedStock returns which of rows another transaction has locked right
// now, looking without waiting. A row of rows with an empty location
// stands for its pool at every location: it is locked when any of them
// is. The answer is keyed as rows is, and also by each row locked.
func (s *Service) lockedStock(ctx context.Context, rows map[string]Line) (map[string]Line, error) {
	var skus, pools, locations []string
	for _, l := range rows {
		skus = append(skus, l.SKU)
		pools = append(pools, l.Pool)
		locations = append(locations, l.Location)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := db.New(tx)
	existing, err := q.StockExisting(ctx, skus, pools, locations)
	if err != nil {
		return nil, fmt.Errorf("look for locked stock rows: %w", err)
	}
	free, err := q.StockFree(ctx, skus, pools, locations)
	if err != nil {
		return nil, fmt.Errorf("look for locked stock rows: %w", err)
	}
	isFree := map[string]bool{}
	for _, f := range free {
		isFree[rowKey(f.Sku, f.Location, f.Pool)] = true
	}
	locked := map[string]Line{}
	for _, e := range existing {
		k := rowKey(e.Sku, e.Location, e.Pool)
		if isFree[k] {
			continue
		}
		row := Line{SKU: e.Sku, Location: e.Location, Pool: e.Pool}
		locked[k] = row
		if _, asked := rows[rowKey(e.Sku, "", e.Pool)]; asked {
			locked[rowKey(e.Sku, "", e.Pool)] = row
		}
	}
	return locked, nil
}

// firstLocked returns the first row of wants that is among locked.
func firstLocked(wants []want, locked map[string]Line) (Line, bool) {
	for _, w := range wants {
		if l, ok := locked[w.key()]; ok {
			return l, true
		}
	}
	return Line{}, false
}

func slicesKeys(m map[string]Line) []string { return slices.Collect(maps.Keys(m)) }

// batchCall is a request of either kind of batch: a hold, or a confirm or
// release.
type batchCall interface {
	batch.Request
	// lockTimeouts counts the lock timeouts the request sat through.
	lockTimeouts() *int
}

// failurePolicy is what a batch does when its transaction fails as a
// whole, written once for both kinds of batch: it answers each caller as
// a transaction of its own would have been answered. A lock timeout is
// the kind's own (lockTimedOut: which requests wait on a row still
// locked); a deadlock or serialization failure runs the batch again, up to
// maxLockTimeouts; a statement timeout answers every request busy (slow);
// a statement that fails because of one request is narrowed down to that
// request by halves; anything else answers every request with the error.
type failurePolicy[C batchCall] struct {
	s *Service
	// kind names the batch in logs and alerts: "hold", "confirm/release".
	kind string
	// attempt runs calls as one transaction and answers them, failing
	// through this policy: the batch again, or a half of it.
	attempt func(ctx context.Context, calls []C) []C
	// lockTimedOut answers, or sends again, the calls of a batch that hit
	// its lock timeout, and returns those that go with a later batch.
	lockTimedOut func(ctx context.Context, calls []C) []C
	// subject names a call in the alert of a change the database refused.
	subject func(C) string
	// answerRefusal answers a call whose change the database refused with
	// books_unbalanced; otherwise it gets the error as it is (a 500: a
	// hold granted beyond its rows is the service's bug).
	answerRefusal bool
}

// failed answers calls, whose batch failed with err, by the policy, and
// returns the calls that go again with a later batch.
func (p failurePolicy[C]) failed(ctx context.Context, calls []C, err error) []C {
	switch classify(ctx, err) {
	case failLock:
		return p.lockTimedOut(ctx, calls)
	case failRetry:
		if *calls[0].lockTimeouts() < maxLockTimeouts {
			for _, c := range calls {
				*c.lockTimeouts()++
			}
			return p.attempt(ctx, calls)
		}
	case failSlow:
		err = errSlow
	case failStatement:
		if len(calls) > 1 {
			half := len(calls) / 2
			return append(p.attempt(ctx, calls[:half]), p.attempt(ctx, calls[half:])...)
		}
		if refusal, ok := refused(err); ok {
			p.s.refusedByDatabase(ctx, p.kind, p.subject(calls[0]), err)
			if p.answerRefusal {
				err = refusal
			}
		}
	}
	if len(calls) > 1 {
		p.s.log.Warn(p.kind+" batch failed", "size", len(calls), "err", err)
	}
	for _, c := range calls {
		c.Answer(err)
	}
	return nil
}
