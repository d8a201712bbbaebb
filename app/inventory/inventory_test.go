package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

var quietLog = slog.New(slog.DiscardHandler)

type bundle struct {
	pool *pgxpool.Pool
	// another returns a second Service on the same database: another
	// instance of stockhold.
	another func(cfg inventory.Config) *inventory.Service
}

type setupOpts struct {
	// serial gives every request a transaction of its own, as
	// STOCKHOLD_COALESCE=false does; by default batches carry many.
	serial bool
	// icu gives the database an ICU default collation (en-US), where text
	// sorts by language rules rather than byte by byte.
	icu bool
	// cfg, when set, is the service's whole configuration.
	cfg *inventory.Config
}

func setup(t *testing.T, opts *setupOpts) (*inventory.Service, *bundle) {
	t.Helper()
	if opts == nil {
		opts = &setupOpts{}
	}
	dbOpts := &dbtest.Options{}
	if opts.icu {
		dbOpts.ICULocale = "en-US"
	}
	pool := dbtest.NewWithOptions(t, dbOpts)
	cfg := inventory.Config{Serial: opts.serial}
	if opts.cfg != nil {
		cfg = *opts.cfg
	}
	svc := inventory.New(pool, quietLog, cfg)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return svc, &bundle{pool: pool, another: func(cfg inventory.Config) *inventory.Service {
		return inventory.New(pool, quietLog, cfg)
	}}
}

func pool(t *testing.T, svc *inventory.Service, sku, name string) stock.Pool {
	t.Helper()
	st, err := svc.GetStock(context.Background(), sku)
	require.NoError(t, err)
	for _, p := range st.Pools {
		if p.Pool == name {
			return p
		}
	}
	t.Fatalf("no pool %s for %s", name, sku)
	return stock.Pool{}
}

// pastExpiry moves a hold's expiry a second into the past, as if its time
// had run out, so expiry tests need not wait for a TTL.
func pastExpiry(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) {
	t.Helper()
	tag, err := pool.Exec(context.Background(), "UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1", id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

func holdReq(key string, items ...inventory.Item) inventory.HoldRequest {
	return inventory.HoldRequest{Client: "shop-a", IdempotencyKey: key, OrderRef: "o-" + key, Items: items}
}

func item(sku string, q int64) inventory.Item { return inventory.Item{SKU: sku, Quantity: q} }

var shop = inventory.Caller{Name: "shop-a"}

func code(err error) domain.Code {
	var e *domain.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// answerWait bounds how long untilAnswered sends a request again.
const answerWait = time.Minute

// untilAnswered calls f, a request, as a client of the API does: a busy
// answer (503 busy: a row locked past the lock timeout, "retry in a
// moment") changed nothing, so f is sent again, with the same
// Idempotency-Key, until its answer is not busy or answerWait has passed,
// a moment apart. It returns f's last error and how many busy answers
// came before it.
func untilAnswered(f func() error) (busy int, err error) {
	deadline := time.Now().Add(answerWait)
	for {
		err = f()
		if code(err) != domain.CodeBusy || time.Now().After(deadline) {
			return busy, err
		}
		busy++
		time.Sleep(retryPause)
	}
}

// retryPause is a client's Retry-After between two tries, scaled down to
// a test's time.
const retryPause = 5 * time.Millisecond

func TestHoldConfirmRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)

	r, replayed, err := svc.Hold(ctx, holdReq("k1", item("A1", 2), item("A1", 1)))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, inventory.StatusHeld, r.Status)
	require.Equal(t, []inventory.HeldItem{{SKU: "A1", Pool: "main", Quantity: 3, Location: "default"}}, r.Items, "two lines of one SKU are summed")
	p := pool(t, svc, "A1", "main")
	require.Equal(t, int64(7), p.Available)
	require.Equal(t, int64(3), p.Reserved)

	c, err := svc.Confirm(ctx, r.ID, shop)
	require.NoError(t, err)
	require.Equal(t, inventory.StatusConfirmed, c.Status)
	again, err := svc.Confirm(ctx, r.ID, shop)
	require.NoError(t, err, "confirming twice succeeds")
	require.Equal(t, c, again)
	p = pool(t, svc, "A1", "main")
	require.Equal(t, int64(3), p.Sold)
	require.Zero(t, p.Reserved)

	_, err = svc.Release(ctx, r.ID, shop, "")
	require.Equal(t, domain.CodeNotHeld, code(err), "a confirmed hold cannot be released")

	r2, _, err := svc.Hold(ctx, holdReq("k2", item("A1", 4)))
	require.NoError(t, err)
	rel, err := svc.Release(ctx, r2.ID, shop, "customer changed mind")
	require.NoError(t, err)
	require.Equal(t, inventory.StatusReleased, rel.Status)
	require.Equal(t, "customer changed mind", *rel.ReleaseReason)
	rel2, err := svc.Release(ctx, r2.ID, shop, "")
	require.NoError(t, err, "releasing twice answers the same")
	require.Equal(t, inventory.StatusReleased, rel2.Status)
	_, err = svc.Confirm(ctx, r2.ID, shop)
	require.Equal(t, domain.CodeNotHeld, code(err))
	require.Equal(t, int64(7), pool(t, svc, "A1", "main").Available)

	_, err = svc.Get(ctx, r2.ID, inventory.Caller{Name: "shop-b"})
	require.Equal(t, domain.CodeNotFound, code(err), "another shop cannot see the hold")
}

func TestHoldFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 5)
	dbtest.StockIn(t, b.pool, "B1", 5)

	_, _, err := svc.Hold(ctx, holdReq("k1", item("A1", 1), item("B1", 6)))
	require.Equal(t, domain.CodeOutOfStock, code(err))
	require.Equal(t, "B1", err.(*domain.Error).SKU)
	require.Equal(t, int64(5), pool(t, svc, "A1", "main").Available, "all or nothing: A1 untouched")

	_, _, err = svc.Hold(ctx, holdReq("k2", item("A1", 1), item("ZZ", 1)))
	require.Equal(t, domain.CodeUnknownSKU, code(err))

	_, err = svc.Pause(ctx, stock.SwitchRequest{SKU: "B1", Reason: "count", Actor: "ops"})
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("k3", item("B1", 1)))
	require.Equal(t, domain.CodeSKUPaused, code(err))
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "B1", Reason: "counted", Actor: "ops"}})
	require.NoError(t, err)

	// The failed keys left no trace, so they can be used again.
	_, _, err = svc.Hold(ctx, holdReq("k1", item("A1", 1), item("B1", 1)))
	require.NoError(t, err)

	var n int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM reservations").Scan(&n))
	require.Equal(t, 1, n)
}

func testConcurrentHolds(t *testing.T, coalesce bool) {
	ctx := context.Background()
	svc, b := setup(t, &setupOpts{serial: !coalesce})
	dbtest.StockIn(t, b.pool, "HOT", 100)

	errs := make([]error, 1000)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = svc.Hold(ctx, holdReq(fmt.Sprint("k", i), item("HOT", 1)))
		}()
	}
	wg.Wait()
	var ok, out int
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.Equal(t, domain.CodeOutOfStock, code(err), "unexpected: %v", err)
		out++
	}
	require.Equal(t, 100, ok)
	require.Equal(t, 900, out)
	p := pool(t, svc, "HOT", "main")
	require.Zero(t, p.Available)
	require.Equal(t, int64(100), p.Reserved)
	var jobs int
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&jobs))
	require.Zero(t, jobs, "expiry is a loop over due holds, not a job per hold")
}

func TestConcurrentHoldsPlain(t *testing.T) {
	t.Parallel()
	testConcurrentHolds(t, false)
}

func TestConcurrentHoldsCoalesced(t *testing.T) {
	t.Parallel()
	testConcurrentHolds(t, true)
}

func TestIdempotentHold(t *testing.T) {
	t.Parallel()
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprint("coalesce=", coalesce), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc, b := setup(t, &setupOpts{serial: !coalesce})
			dbtest.StockIn(t, b.pool, "A1", 100)

			results := make([]inventory.Reservation, 50)
			errs := make([]error, 50)
			var wg sync.WaitGroup
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], _, errs[i] = svc.Hold(ctx, holdReq("same", item("A1", 2)))
				}()
			}
			wg.Wait()
			for i, r := range results {
				require.NoError(t, errs[i])
				require.Equal(t, results[0], r)
			}
			var n int
			require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM reservations").Scan(&n))
			require.Equal(t, 1, n)
			require.Equal(t, int64(98), pool(t, svc, "A1", "main").Available)

			_, _, err := svc.Hold(ctx, holdReq("same", item("A1", 3)))
			require.Equal(t, domain.CodeKeyReused, code(err))
		})
	}
}

func TestMultiSKUNoDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	skus := []string{"S1", "S2", "S3", "S4", "S5"}
	for _, s := range skus {
		dbtest.StockIn(t, b.pool, s, 1000)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := rand.Perm(len(skus))
			var items []inventory.Item
			for _, j := range order[:3] {
				items = append(items, item(skus[j], 1))
			}
			r, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("m", i), items...))
			if err != nil {
				errs <- fmt.Errorf("hold %d: %w", i, err)
				return
			}
			if i%2 == 0 {
				_, err = svc.Release(ctx, r.ID, shop, "")
			} else {
				_, err = svc.Confirm(ctx, r.ID, shop)
			}
			if err != nil {
				errs <- fmt.Errorf("settle %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, s := range skus {
		p := pool(t, svc, s, "main")
		require.Zero(t, p.Reserved, "every hold was settled")
		require.Equal(t, int64(1000), p.Available+p.Sold)
	}
}

func TestConfirmReleaseRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 100)
	for i := range 50 {
		r, _, err := svc.Hold(ctx, holdReq(fmt.Sprint("r", i), item("A1", 1)))
		require.NoError(t, err)
		var confirmErr, releaseErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, confirmErr = svc.Confirm(ctx, r.ID, shop) }()
		go func() { defer wg.Done(); _, releaseErr = svc.Release(ctx, r.ID, shop, "") }()
		wg.Wait()
		require.NotEqual(t, confirmErr == nil, releaseErr == nil, "exactly one wins: confirm=%v release=%v", confirmErr, releaseErr)
		loser := confirmErr
		if loser == nil {
			loser = releaseErr
		}
		require.Equal(t, domain.CodeNotHeld, code(loser))
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	req := holdReq("exp", item("A1", 4))
	req.TTLSeconds = 60
	r, _, err := svc.Hold(ctx, req)
	require.NoError(t, err)

	pastExpiry(t, b.pool, r.ID)
	_, err = svc.Confirm(ctx, r.ID, shop)
	require.Equal(t, domain.CodeNotHeld, code(err), "a confirm after expiry is refused")
	require.Equal(t, string(inventory.StatusExpired), err.(*domain.Error).Status)
	require.Equal(t, int64(10), pool(t, svc, "A1", "main").Available)

	// The sweeper catches a hold the expiry loop missed, once.
	r2, _, err := svc.Hold(ctx, req2(60))
	require.NoError(t, err)
	n, err := svc.SweepExpired(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is due yet")
	pastExpiry(t, b.pool, r2.ID)
	n, err = svc.SweepExpired(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = svc.SweepExpired(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n)
	got, err := svc.Get(ctx, r2.ID, shop)
	require.NoError(t, err)
	require.Equal(t, inventory.StatusExpired, got.Status)
}

func req2(ttl int64) inventory.HoldRequest {
	r := holdReq("exp2", item("A1", 2))
	r.TTLSeconds = ttl
	return r
}

func TestReleaseTxSkipsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	r, _, err := svc.Hold(ctx, holdReq("x", item("A1", 1)))
	require.NoError(t, err)
	how := inventory.Outcome{Status: inventory.StatusReleased, Kind: "rollback", Actor: "alice", Reason: "test"}
	for range 3 {
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := svc.ReleaseTx(ctx, tx, []uuid.UUID{r.ID, uuid.New()}, how)
			return err
		})
		require.NoError(t, err)
	}
	require.Equal(t, int64(10), pool(t, svc, "A1", "main").Available)
}

// TestPausedPoolStillConfirmsAndReleases is the protection switch: a paused
// pool refuses new holds, while holds already made can still be paid for or
// cancelled.
func TestPausedPoolStillConfirmsAndReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	paid, _, err := svc.Hold(ctx, holdReq("paid", item("A1", 2)))
	require.NoError(t, err)
	cancelled, _, err := svc.Hold(ctx, holdReq("cancelled", item("A1", 3)))
	require.NoError(t, err)

	_, err = svc.Pause(ctx, stock.SwitchRequest{SKU: "A1", Reason: "counts disagree", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("new", item("A1", 1)))
	require.Equal(t, domain.CodeSKUPaused, code(err))

	c, err := svc.Confirm(ctx, paid.ID, shop)
	require.NoError(t, err)
	require.Equal(t, inventory.StatusConfirmed, c.Status)
	r, err := svc.Release(ctx, cancelled.ID, shop, "")
	require.NoError(t, err)
	require.Equal(t, inventory.StatusReleased, r.Status)

	p := pool(t, svc, "A1", "main")
	require.Equal(t, stock.StockPaused, p.Status)
	require.Equal(t, "counts disagree", *p.PausedReason)
	require.Equal(t, int64(8), p.Available)
	require.Equal(t, int64(2), p.Sold)

	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Actor: "alice"}})
	require.Equal(t, domain.CodeInvalid, code(err), "lifting the switch needs a reason")
	_, err = svc.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "recounted", Actor: "alice"}})
	require.NoError(t, err)
	page, err := svc.Ledger(ctx, "A1", 10, 0)
	require.NoError(t, err)
	moves := page.Movements
	require.Equal(t, "resume", moves[0].Kind)
	require.Equal(t, "alice", moves[0].Actor)
	require.Equal(t, "recounted", *moves[0].Reason)
}

// TestSweepLeavesHoldsWithinTheGrace: the sweeper is the expiry loop's
// backstop, so it leaves a hold alone until the hold is more than the grace
// past its expiry, and releases it then.
func TestSweepLeavesHoldsWithinTheGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	recent, _, err := svc.Hold(ctx, holdReq("recent", item("A1", 1)))
	require.NoError(t, err)
	old, _, err := svc.Hold(ctx, holdReq("old", item("A1", 2)))
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - CASE WHEN id = $1 THEN interval '30 seconds' ELSE interval '90 seconds' END`, recent.ID)
	require.NoError(t, err)

	n, err := svc.SweepExpired(ctx, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, inventory.StatusHeld, mustGet(t, svc, recent.ID).Status, "30 s past expiry is within the grace")
	require.Equal(t, inventory.StatusExpired, mustGet(t, svc, old.ID).Status)
	require.EqualValues(t, 1, pool(t, svc, "A1", "main").Reserved)
}

// TestExpiryGoesOnPastALockedHold: a due hold that another transaction
// keeps locked (a confirm or a cancel working on it, say) holds up
// nothing: one pass of the expiry loop, and the sweeper, expire every
// other due hold, on its stock row and on others, and leave that one to a
// later pass, which expires it once it is free.
func TestExpiryGoesOnPastALockedHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	// Another instance expires, so that no row is hot in its eyes: the
	// holds go through its own expiry transactions.
	expirer := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "A1", 20)
	dbtest.StockIn(t, b.pool, "B1", 20)
	due := func(n int) []uuid.UUID {
		var ids []uuid.UUID
		for i := range n {
			r, _, err := svc.Hold(ctx, holdReq(uuid.NewString(), item([]string{"A1", "B1"}[i%2], 1)))
			require.NoError(t, err)
			ids = append(ids, r.ID)
		}
		// The first is the longest overdue: the first a pass looks at.
		_, err := b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute' * (10 - array_position($1::uuid[], id))
			WHERE id = ANY($1)`, ids)
		require.NoError(t, err)
		return ids
	}
	lock := func(id uuid.UUID) pgx.Tx {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		_, err = tx.Exec(ctx, `SELECT 1 FROM reservations WHERE id = $1 FOR UPDATE`, id)
		require.NoError(t, err)
		return tx
	}
	status := func(ids []uuid.UUID) []inventory.HoldStatus {
		var out []inventory.HoldStatus
		for _, id := range ids {
			out = append(out, mustGet(t, svc, id).Status)
		}
		return out
	}
	expired := inventory.StatusExpired

	ids := due(5)
	locker := lock(ids[0])
	run, err := expirer.ExpireLoop(ctx, time.Now()) // one pass
	require.NoError(t, err)
	require.Equal(t, 4, run.Released)
	require.Equal(t, []inventory.HoldStatus{inventory.StatusHeld, expired, expired, expired, expired}, status(ids))
	require.NoError(t, locker.Rollback(ctx))
	run, err = expirer.ExpireLoop(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, run.Released, "free again, it expires")

	ids = due(3)
	locker = lock(ids[0])
	n, err := expirer.SweepExpired(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []inventory.HoldStatus{inventory.StatusHeld, expired, expired}, status(ids))
	require.NoError(t, locker.Rollback(ctx))
	n, err = expirer.SweepExpired(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestKeyReusedAfterItsCampaignEnded: once a campaign ends, a retry of a
// hold it granted still gets its first answer, and its key sent with
// another body is still 422 idempotency_key_reused, not
// campaign_not_active: the key is judged before the campaign.
func TestKeyReusedAfterItsCampaignEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.Campaign(t, b.pool, "c1", &dbtest.CampaignOptions{Allotments: map[string]int64{"A1": 5}, Active: true})
	req := holdReq("k", item("A1", 2))
	req.Campaign = "c1"
	first, _, err := svc.Hold(ctx, req)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE campaigns SET status = 'ended', ended_at = now() WHERE id = 'c1'`)
	require.NoError(t, err)

	again, replayed, err := svc.Hold(ctx, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first, again)

	other := req
	other.Items = []inventory.Item{item("A1", 1)}
	_, _, err = svc.Hold(ctx, other)
	require.Equal(t, domain.CodeKeyReused, code(err), "%v", err)

	_, _, err = svc.Hold(ctx, holdReq("new", item("A1", 1)))
	require.NoError(t, err, "main still sells")
	fresh := holdReq("fresh", item("A1", 1))
	fresh.Campaign = "c1"
	_, _, err = svc.Hold(ctx, fresh)
	require.Equal(t, domain.CodeCampaignNotActive, code(err), "a new key on the ended campaign")
}
