package rollbacks_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
)

// The tests here drive rollbacks without River's workers: jobs are only
// inserted, and a test plays the worker by calling the service's steps
// (BatchTx, AcceptTx) with the job ids it finds in river_job.

type bundle struct {
	pool *pgxpool.Pool
	inv  *inventory.Service
}

func setup(t *testing.T) (*rollbacks.Service, *bundle) {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	inv := inventory.New(pool, slog.New(slog.DiscardHandler), inventory.Config{})
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return rollbacks.New(pool, inserter, inv, 0), &bundle{pool: pool, inv: inv}
}

// holds makes n holds of one unit of sku.
func (b *bundle) holds(t *testing.T, sku string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = dbtest.Hold(t, b.pool, sku, nil)
	}
	return ids
}

func (b *bundle) status(t *testing.T, id uuid.UUID) string {
	t.Helper()
	r, err := b.inv.Get(context.Background(), id, inventory.Caller{Ops: true})
	require.NoError(t, err)
	return string(r.Status)
}

// liveBatch is the id of rollback id's batch job still to run.
func (b *bundle) liveBatch(t *testing.T, id int64) int64 {
	t.Helper()
	var job int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT j.id FROM river_job j
		WHERE j.kind = 'rollback_batch' AND (j.args->>'rollback_id')::bigint = $1 AND j.state IN ('available', 'scheduled')`, id).Scan(&job))
	return job
}

// work plays the worker: it runs batch job of rollback id in a transaction
// of its own, and finishes the job as River would.
func (b *bundle) work(t *testing.T, svc *rollbacks.Service, id, job int64) rollbacks.Batch {
	t.Helper()
	ctx := context.Background()
	var out rollbacks.Batch
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		out, err = svc.BatchTx(ctx, tx, id, job)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, job)
		return err
	}))
	return out
}

func create(t *testing.T, svc *rollbacks.Service, pool *pgxpool.Pool, req rollbacks.Request) (rollbacks.Created, error) {
	t.Helper()
	var out rollbacks.Created
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) (err error) {
		out, err = svc.CreateTx(context.Background(), tx, req)
		return err
	})
	return out, err
}

func invalid(t *testing.T, err error, contains string) {
	t.Helper()
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeInvalid, de.Code, de.Detail)
	require.Contains(t, de.Detail, contains)
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	later := time.Now().Add(time.Hour)
	ok := rollbacks.Request{Operator: "alice", Reason: "outage", Scope: rollbacks.Scope{SKU: "A1"}}
	require.NoError(t, ok.Validate())
	for _, c := range []struct {
		name     string
		change   func(*rollbacks.Request)
		contains string
	}{
		{"no operator", func(r *rollbacks.Request) { r.Operator = "" }, "operator is required"},
		{"no reason", func(r *rollbacks.Request) { r.Reason = "" }, "reason is required"},
		{"no scope", func(r *rollbacks.Request) { r.Scope = rollbacks.Scope{} }, "exactly one scope"},
		{"two scopes", func(r *rollbacks.Request) { r.Scope.Campaign = "bf" }, "exactly one scope"},
		{"empty ids", func(r *rollbacks.Request) { r.Scope = rollbacks.Scope{ReservationIDs: []uuid.UUID{}} }, "reservation_ids is empty"},
		{"ids and a SKU", func(r *rollbacks.Request) { r.Scope.ReservationIDs = []uuid.UUID{id} }, "exactly one scope"},
		{"too many ids", func(r *rollbacks.Request) {
			r.Scope = rollbacks.Scope{ReservationIDs: make([]uuid.UUID, rollbacks.MaxIDs+1)}
		}, "at most"},
		{"pool without SKU", func(r *rollbacks.Request) { r.Scope = rollbacks.Scope{Campaign: "bf", Pool: "bf"} }, "pool goes with sku"},
		{"held_before without SKU", func(r *rollbacks.Request) { r.Scope = rollbacks.Scope{Campaign: "bf", HeldBefore: &later} }, "held_before goes with sku or location"},
		{"location and a campaign", func(r *rollbacks.Request) { r.Scope = rollbacks.Scope{Campaign: "bf", Location: "berlin"} }, "exactly one scope"},
	} {
		req := ok
		c.change(&req)
		invalid(t, req.Validate(), c.contains)
	}
}

// TestCreateIsOneTransaction: a request is recorded pending with its
// manual_rollback job in the caller's transaction, or not at all.
func TestCreateIsOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	req := rollbacks.Request{Operator: "alice", Reason: "outage", Scope: rollbacks.Scope{SKU: "A1"}, Source: rollbacks.SourceCLI}

	boom := errors.New("the caller's next step fails")
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := svc.CreateTx(ctx, tx, req)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM rollback_requests`))
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.ManualRollbackArgs{}, nil)

	created, err := create(t, svc, b.pool, req)
	require.NoError(t, err)
	r, err := svc.Get(ctx, created.RollbackID)
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusPending, r.Status)
	require.Equal(t, "main", r.Scope.Pool, "a SKU's pool is main unless given")
	require.Equal(t, rollbacks.SourceCLI, r.Source)
	require.NotNil(t, r.JobID)
	require.Equal(t, created.JobID, *r.JobID)
	job := rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.ManualRollbackArgs{}, nil)
	require.Equal(t, created.JobID, job.ID)
	require.Equal(t, created.RollbackID, job.Args.RollbackID)

	// Bad requests record nothing.
	later := time.Now().Add(time.Hour)
	_, err = create(t, svc, b.pool, rollbacks.Request{Operator: "alice", Reason: "x", Scope: rollbacks.Scope{SKU: "A1", HeldBefore: &later}})
	invalid(t, err, "later than now")
	_, err = create(t, svc, b.pool, rollbacks.Request{Operator: "alice", Reason: "x", Scope: rollbacks.Scope{Campaign: "bf", Cutoff: &later}})
	invalid(t, err, "cutoff")
	_, err = create(t, svc, b.pool, rollbacks.Request{Operator: "alice", Scope: rollbacks.Scope{SKU: "A1"}})
	invalid(t, err, "reason is required")
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM rollback_requests`))
	rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.ManualRollbackArgs{}, nil) // still the one

	_, err = svc.Get(ctx, created.RollbackID+1)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// TestBatchesReleaseOnlyWhatWasHeldBefore runs a SKU's rollback batch by
// batch: at most BatchSize holds each, only holds of its SKU and pool made
// before it was requested, then it succeeds; a duplicated batch changes
// nothing.
func TestBatchesReleaseOnlyWhatWasHeldBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 300)
	dbtest.StockIn(t, b.pool, "B1", 10)
	before := b.holds(t, "A1", 250)
	other := b.holds(t, "B1", 3)

	var started rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		started, err = svc.StartTx(ctx, tx, rollbacks.Request{
			Operator: "alice", Reason: "clear A1", Scope: rollbacks.Scope{SKU: "A1"}, Source: rollbacks.SourceCLI,
		})
		return err
	}))
	after := b.holds(t, "A1", 5) // made after the request: out of reach

	job := started.JobID
	var batches []rollbacks.Batch
	for range 10 {
		batch := b.work(t, svc, started.RollbackID, job)
		batches = append(batches, batch)
		if batch.Finished {
			require.Nil(t, batch.Next)
			break
		}
		require.NotNil(t, batch.Next, "an unfinished batch enqueues the next")
		require.Equal(t, b.liveBatch(t, started.RollbackID), batch.Next.ID)
		job = batch.Next.ID
	}
	var released []int
	for _, batch := range batches {
		released = append(released, batch.Released)
	}
	require.Equal(t, []int{100, 100, 50}, released)
	last := batches[len(batches)-1].Rollback
	require.Equal(t, rollbacks.StatusSucceeded, last.Status)
	require.EqualValues(t, 250, last.ReleasedCount)
	require.EqualValues(t, 250, last.ReleasedUnits)
	require.EqualValues(t, 3, last.Batches)
	require.NotNil(t, last.FinishedAt)

	for _, id := range before {
		require.Equal(t, string(inventory.StatusReleased), b.status(t, id))
	}
	for _, id := range append(after, other...) {
		require.Equal(t, string(inventory.StatusHeld), b.status(t, id), "out of scope or made after the request")
	}
	require.Equal(t, 250, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE kind = 'rollback' AND actor = 'alice' AND reason = 'clear A1'`))

	// The last batch again (River ran it twice): nothing more.
	again := b.work(t, svc, started.RollbackID, job)
	require.Zero(t, again.Released)
	require.False(t, again.Finished)
	require.Nil(t, again.Next)
	require.Equal(t, 250, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE kind = 'rollback'`))
}

// TestCutoffOfItsOwn: a cutoff, given with any scope, keeps a rollback away
// from holds made at or after it, however much later the rollback is
// requested: the real run of a dry run releases what the dry run counted.
func TestCutoffOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 100)
	early := b.holds(t, "A1", 3)
	var cut time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&cut))
	late := b.holds(t, "A1", 2)

	for _, scope := range []rollbacks.Scope{
		{ReservationIDs: append(append([]uuid.UUID{}, early[:2]...), late...), Cutoff: &cut},
		{SKU: "A1", Cutoff: &cut},
	} {
		var started rollbacks.Created
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
			started, err = svc.StartTx(ctx, tx, rollbacks.Request{Operator: "alice", Reason: "cut", Scope: scope, Source: rollbacks.SourceCLI})
			return err
		}))
		r, err := svc.Get(ctx, started.RollbackID)
		require.NoError(t, err)
		require.True(t, r.Cutoff().Equal(cut), "the cut-off is the scope's, earlier than the request")
		require.True(t, r.Scope.Cutoff.Equal(cut), "and recorded with the scope")
		batch := b.work(t, svc, started.RollbackID, started.JobID)
		require.True(t, batch.Finished)
	}
	for _, id := range early {
		require.Equal(t, string(inventory.StatusReleased), b.status(t, id))
	}
	for _, id := range late {
		require.Equal(t, string(inventory.StatusHeld), b.status(t, id), "made after the cut-off")
	}
}

// TestDuplicateBatchesRaceReleaseOnce runs two copies of every batch at
// once, as two workers would after a rescue: each hold is released exactly
// once and the chain stays one chain.
func TestDuplicateBatchesRaceReleaseOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 300)
	ids := b.holds(t, "A1", 230)
	var started rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		started, err = svc.StartTx(ctx, tx, rollbacks.Request{
			Operator: "alice", Reason: "race", Scope: rollbacks.Scope{ReservationIDs: ids}, Source: rollbacks.SourceHTTP,
		})
		return err
	}))

	job := started.JobID
	for round := 0; ; round++ {
		require.Less(t, round, 10)
		type result struct {
			batch rollbacks.Batch
			err   error
		}
		results := make(chan result, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out rollbacks.Batch
				err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
					out, err = svc.BatchTx(ctx, tx, started.RollbackID, job)
					return err
				})
				results <- result{out, err}
			}()
		}
		wg.Wait()
		close(results)
		var nexts []int64
		finished := false
		for r := range results {
			require.NoError(t, r.err)
			if r.batch.Next != nil {
				nexts = append(nexts, r.batch.Next.ID)
			}
			finished = finished || r.batch.Finished
		}
		if finished {
			require.Empty(t, nexts)
			break
		}
		require.Len(t, nexts, 1, "the twin that ran second sees the next batch queued and adds none")
		_, err := b.pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, job)
		require.NoError(t, err)
		job = nexts[0]
	}
	r, err := svc.Get(ctx, started.RollbackID)
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusSucceeded, r.Status)
	require.EqualValues(t, 230, r.ReleasedCount)
	require.Equal(t, 230, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE kind = 'rollback'`))
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM (SELECT reservation_id FROM ledger WHERE kind = 'rollback'
		GROUP BY reservation_id HAVING count(*) > 1) twice`), "no hold released twice")
}

// TestAcceptPlainSQLJobAndDryRun: a manual_rollback job inserted with
// plain SQL (no request row) is recorded when accepted, with the job's
// enqueue time as its cut-off; a dry run only counts; bad args are refused
// as such, never retried.
func TestAcceptPlainSQLJobAndDryRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 100)
	b.holds(t, "A1", 7)
	enqueued := time.Now()
	b.holds(t, "A1", 2) // after the job was enqueued

	accept := func(jobID int64, args rollbacks.ManualRollbackArgs) (rollbacks.Rollback, error) {
		var out rollbacks.Rollback
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
			out, err = svc.AcceptTx(ctx, tx, jobID, enqueued, args)
			return err
		})
		return out, err
	}
	dry, err := accept(1001, rollbacks.ManualRollbackArgs{Operator: "carol", Reason: "what if", DryRun: true, Scope: rollbacks.Scope{SKU: "A1"}})
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusSucceeded, dry.Status)
	require.Equal(t, rollbacks.SourceSQL, dry.Source)
	require.NotNil(t, dry.MatchedCount)
	require.EqualValues(t, 7, *dry.MatchedCount, "holds made after the job was enqueued are out of reach")
	require.EqualValues(t, 7, *dry.MatchedUnits)
	require.WithinDuration(t, enqueued, dry.RequestedAt, time.Millisecond)
	require.Zero(t, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE kind = 'rollback'`), "a dry run releases nothing")
	rivertest.RequireNotInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.RollbackBatchArgs{}, nil) // nor enqueues a batch

	// The same job accepted again (retried) finds its request.
	again, err := accept(1001, rollbacks.ManualRollbackArgs{Operator: "carol", Reason: "what if", DryRun: true, Scope: rollbacks.Scope{SKU: "A1"}})
	require.NoError(t, err)
	require.Equal(t, dry.ID, again.ID)

	real, err := accept(1002, rollbacks.ManualRollbackArgs{Operator: "carol", Reason: "for real", Scope: rollbacks.Scope{SKU: "A1"}})
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusRunning, real.Status)
	first := rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.RollbackBatchArgs{}, nil) // its first batch
	require.Equal(t, real.ID, first.Args.RollbackID)

	for _, args := range []rollbacks.ManualRollbackArgs{
		{Reason: "no operator", Scope: rollbacks.Scope{SKU: "A1"}},
		{Operator: "bob", Scope: rollbacks.Scope{SKU: "A1"}},
		{Operator: "bob", Reason: "no scope"},
		{Operator: "bob", Reason: "later", Scope: rollbacks.Scope{SKU: "A1", HeldBefore: new(enqueued.Add(time.Minute))}},
		{Operator: "bob", Reason: "later", Scope: rollbacks.Scope{Campaign: "bf", Cutoff: new(enqueued.Add(time.Minute))}},
		{RollbackID: 424242, Operator: "bob", Reason: "gone", Scope: rollbacks.Scope{SKU: "A1"}},
	} {
		_, err := accept(2000, args)
		require.ErrorIs(t, err, rollbacks.ErrRefused, "%+v", args)
	}
	require.Equal(t, 2, dbtest.Count(t, b.pool, `SELECT count(*) FROM rollback_requests`))
}

// TestResumeGivesAStrandedRequestAJob: a running request whose chain of
// jobs was deleted gets a new batch, once; one with a live job, or a
// finished one, is left alone.
func TestResumeGivesAStrandedRequestAJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.StockIn(t, b.pool, "A1", 10)
	b.holds(t, "A1", 3)
	var started rollbacks.Created
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
		started, err = svc.StartTx(ctx, tx, rollbacks.Request{Operator: "alice", Reason: "x", Scope: rollbacks.Scope{SKU: "A1"}, Source: rollbacks.SourceCLI})
		return err
	}))

	r, err := svc.Resume(ctx, started.RollbackID, "bob")
	require.NoError(t, err)
	require.False(t, r.Resumed, "its first batch is live")
	require.Equal(t, &started.JobID, r.JobID)

	_, err = b.pool.Exec(ctx, `DELETE FROM river_job`)
	require.NoError(t, err)
	r, err = svc.Resume(ctx, started.RollbackID, "bob")
	require.NoError(t, err)
	require.True(t, r.Resumed)
	require.NotNil(t, r.JobID)
	require.Equal(t, b.liveBatch(t, started.RollbackID), *r.JobID)
	got, err := svc.Get(ctx, started.RollbackID)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Resumes)
	require.Equal(t, "bob", *got.ResumedBy)

	again, err := svc.Resume(ctx, started.RollbackID, "bob")
	require.NoError(t, err)
	require.False(t, again.Resumed, "resuming is idempotent")
	require.Equal(t, r.JobID, again.JobID)

	done := b.work(t, svc, started.RollbackID, *r.JobID)
	require.True(t, done.Finished)
	fin, err := svc.Resume(ctx, started.RollbackID, "bob")
	require.NoError(t, err)
	require.False(t, fin.Resumed)
	require.Nil(t, fin.JobID, "a finished request needs no job")
	require.Equal(t, rollbacks.StatusSucceeded, fin.Status)

	_, err = svc.Resume(ctx, started.RollbackID+1, "bob")
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = svc.Resume(ctx, started.RollbackID, "")
	require.Error(t, err, "resuming needs a name")
}

// TestCreateOnceReplays: the same key and request answer the same
// rollback without recording another; the key with another request is
// refused.
func TestCreateOnceReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	req := rollbacks.Request{Operator: "alice", Reason: "outage", Scope: rollbacks.Scope{SKU: "A1"}, Source: rollbacks.SourceHTTP}
	key := idempotency.NewKey("alice", "k", []byte(`{"sku": "A1"}`))
	first, replayed, err := svc.CreateOnce(ctx, key, req)
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := svc.CreateOnce(ctx, key, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first, again)
	_, _, err = svc.CreateOnce(ctx, idempotency.NewKey("alice", "k", []byte(`{"sku": "B1"}`)), req)
	require.ErrorIs(t, err, domain.ErrKeyReused)
	require.Equal(t, 1, dbtest.Count(t, b.pool, `SELECT count(*) FROM rollback_requests`))
	rivertest.RequireInserted(ctx, t, riverpgxv5.New(b.pool), rollbacks.ManualRollbackArgs{}, nil) // the one job
}

// TestScopedRollbackReleasesOnlyItsLines replays a reviewer's sequence: a
// rollback of SKU SC1 at paris released whole holds, their SC1 lines at
// berlin and another SKU's line with them (5 units where 2 were at
// paris), while its help and dry run spoke of lines at paris. A rollback
// scoped by SKU, location or both hands back the lines in scope only (a
// partial release: the hold stays held with the rest, or is released
// whole when nothing else is left), and its dry run counts the same holds
// and units the real run releases. Each scope is run the three ways a
// rollback starts: recorded then started (HTTP, CLI), and accepted from a
// job inserted with plain SQL.
func TestScopedRollbackReleasesOnlyItsLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t)
	dbtest.Location(t, b.pool, "paris", 1)
	dbtest.Location(t, b.pool, "berlin", 2)
	for _, at := range []struct {
		sku, location string
	}{{"SC1", "paris"}, {"SC1", "berlin"}, {"X1", "paris"}} {
		dbtest.StockInAt(t, b.pool, at.sku, at.location, 20)
	}
	hold := func(items ...inventory.Item) uuid.UUID {
		t.Helper()
		r, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: uuid.NewString(), Items: items})
		require.NoError(t, err)
		return r.ID
	}
	at := func(sku string, n int64, location string) inventory.Item {
		return inventory.Item{SKU: sku, Quantity: n, Location: location}
	}
	h1 := hold(at("SC1", 2, "paris"), at("SC1", 3, "berlin"), at("X1", 1, "paris"))
	h2 := hold(at("SC1", 2, "paris"))
	h3 := hold(at("SC1", 1, "berlin"), at("X1", 1, "paris"))
	h4 := hold(at("X1", 1, "paris"))
	type line struct {
		SKU, Location string
		Quantity      int64
	}
	lines := func(id uuid.UUID) (string, []line) {
		t.Helper()
		r, err := b.inv.Get(ctx, id, inventory.Caller{Ops: true})
		require.NoError(t, err)
		var out []line
		for _, it := range r.Items {
			for _, a := range it.Allocations {
				out = append(out, line{it.SKU, a.Location, a.Quantity})
			}
			if it.Allocations == nil {
				out = append(out, line{it.SKU, it.Location, it.Quantity})
			}
		}
		return string(r.Status), out
	}
	reserved := func(sku, location string) int {
		return dbtest.Count(t, b.pool, `SELECT reserved FROM stock WHERE sku = $1 AND location = $2 AND pool = 'main'`, sku, location)
	}

	var job int64 = 5000
	// run dry-runs scope, then runs it for real (recorded and started, or
	// accepted as a plain SQL job) and requires the two to agree.
	run := func(scope rollbacks.Scope, sql bool, holds int32, units int64) {
		t.Helper()
		var dry rollbacks.Created
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
			dry, err = svc.StartTx(ctx, tx, rollbacks.Request{Operator: "alice", Reason: "dry", Scope: scope, DryRun: true, Source: rollbacks.SourceCLI})
			return err
		}))
		counted := b.work(t, svc, dry.RollbackID, dry.JobID).Rollback
		require.Equal(t, holds, *counted.MatchedCount, "%+v: holds with a line in scope", scope)
		require.Equal(t, units, *counted.MatchedUnits, "%+v: units of the lines in scope", scope)

		var id int64
		if sql {
			job++
			var accepted rollbacks.Rollback
			require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
				accepted, err = svc.AcceptTx(ctx, tx, job, time.Now(), rollbacks.ManualRollbackArgs{Operator: "alice", Reason: "scoped", Scope: scope})
				return err
			}))
			require.Equal(t, rollbacks.SourceSQL, accepted.Source)
			id = accepted.ID
		} else {
			var started rollbacks.Created
			require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
				started, err = svc.StartTx(ctx, tx, rollbacks.Request{Operator: "alice", Reason: "scoped", Scope: scope, Source: rollbacks.SourceHTTP})
				return err
			}))
			id = started.RollbackID
		}
		batch := b.work(t, svc, id, b.liveBatch(t, id))
		require.True(t, batch.Finished, "%+v", scope)
		require.Equal(t, holds, batch.Rollback.ReleasedCount, "%+v: the holds the dry run counted", scope)
		require.Equal(t, units, batch.Rollback.ReleasedUnits, "%+v: the units the dry run counted", scope)
	}

	// SC1 at paris: h1's SC1 line there (h1 keeps its berlin line and X1),
	// and h2 whole (its one line).
	run(rollbacks.Scope{SKU: "SC1", Location: "paris"}, false, 2, 4)
	st, got := lines(h1)
	require.Equal(t, string(inventory.StatusHeld), st)
	require.ElementsMatch(t, []line{{"SC1", "berlin", 3}, {"X1", "paris", 1}}, got)
	st, _ = lines(h2)
	require.Equal(t, string(inventory.StatusReleased), st)
	require.Zero(t, reserved("SC1", "paris"))
	require.Equal(t, 4, reserved("SC1", "berlin"))
	require.Equal(t, 3, reserved("X1", "paris"))

	// SC1 anywhere, as a plain SQL job: h1's and h3's SC1 lines at berlin,
	// never their X1 lines.
	run(rollbacks.Scope{SKU: "SC1"}, true, 2, 4)
	for _, id := range []uuid.UUID{h1, h3} {
		st, got := lines(id)
		require.Equal(t, string(inventory.StatusHeld), st)
		require.Equal(t, []line{{"X1", "paris", 1}}, got)
	}
	require.Zero(t, reserved("SC1", "berlin"))
	require.Equal(t, 3, reserved("X1", "paris"))

	// Everything at paris: what is left of h1, h3 and h4, each whole now.
	run(rollbacks.Scope{Location: "paris"}, false, 3, 3)
	for _, id := range []uuid.UUID{h1, h3, h4} {
		st, _ := lines(id)
		require.Equal(t, string(inventory.StatusReleased), st)
	}
	require.Zero(t, reserved("X1", "paris"))

	// The lines handed back from holds that stayed held are partial
	// releases, by the rollback's operator and for its reason; the holds
	// ended by a rollback are rolled back.
	require.Equal(t, 3, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE kind = 'release_partial' AND actor = 'alice' AND reason = 'scoped'`))
	require.Equal(t, 4, dbtest.Count(t, b.pool, `SELECT count(DISTINCT reservation_id) FROM ledger WHERE kind = 'rollback' AND actor = 'alice' AND reason = 'scoped'`))
}
