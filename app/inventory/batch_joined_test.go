package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// blockBatch makes the hold batch that decides the hold with order
// reference "blocker" wait, once it has locked its rows, until the
// function returned is called; started is closed when it waits.
func blockBatch(svc *inventory.Service) (started <-chan struct{}, release func()) {
	s, g := make(chan struct{}), make(chan struct{})
	var once sync.Once
	inventory.SetBeforeGrant(svc, func(r inventory.HoldRequest) {
		if r.OrderRef == "blocker" {
			close(s)
			<-g
		}
	})
	return s, func() { once.Do(func() { close(g) }) }
}

// sameTransaction reports whether the ledger rows of holds a and b (of
// kinds ka and kb) were written by one transaction: the ledger is never
// updated, so a row's xmin is the transaction that wrote it.
func sameTransaction(t *testing.T, b *bundle, a uuid.UUID, ka string, bb uuid.UUID, kb string) bool {
	t.Helper()
	return dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger x JOIN ledger y ON x.xmin::text = y.xmin::text
		WHERE x.reservation_id = $1 AND x.kind = $2 AND y.reservation_id = $3 AND y.kind = $4`, a, ka, bb, kb) == 1
}

// TestReleaseJoinsTheRowsHoldBatch: a release of a hold on a row a hold
// batch is busy with goes with the next hold batch on that row, in its
// transaction, instead of a transaction of its own; so does a
// confirm, and a release of a hold whose row no batch is busy with goes
// through the confirm/release batches as before.
func TestReleaseJoinsTheRowsHoldBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	addUnits(t, svc, "ARENA", venue(2, 10))
	h1, _, err := svc.Hold(ctx, holdReq("h1", seats("ARENA", "A-1", "A-2")))
	require.NoError(t, err)
	h2, _, err := svc.Hold(ctx, holdReq("h2", seats("ARENA", "A-3")))
	require.NoError(t, err)
	quiet, _, err := svc.Hold(ctx, holdReq("quiet", seats("ARENA", "A-4")))
	require.NoError(t, err)

	// No batch busy with the row: a release goes on its own.
	_, err = svc.Release(ctx, quiet.ID, shop, "")
	require.NoError(t, err)

	started, release := blockBatch(svc)
	defer release()
	blocker := holdReq("blocker", seats("ARENA", "B-1"))
	blocker.OrderRef = "blocker"
	held := make(chan error, 4)
	go func() {
		_, _, err := svc.Hold(ctx, blocker)
		held <- err
	}()
	<-started
	type answer struct {
		r   inventory.Reservation
		err error
	}
	cancelled, confirmed := make(chan answer, 1), make(chan answer, 1)
	go func() {
		r, err := svc.Release(ctx, h1.ID, shop, "changed my mind")
		cancelled <- answer{r, err}
	}()
	go func() {
		r, err := svc.Confirm(ctx, h2.ID, shop)
		confirmed <- answer{r, err}
	}()
	var next inventory.Reservation
	require.Eventually(t, func() bool { return inventory.PendingHolds(svc) == 2 }, 10*time.Second, time.Millisecond,
		"the release and the confirm wait for the hold batch busy with their row")
	go func() {
		r, _, err := svc.Hold(ctx, holdReq("next", seats("ARENA", "A-1")))
		next = r
		held <- err
	}()
	require.Eventually(t, func() bool { return inventory.PendingHolds(svc) == 3 }, 10*time.Second, time.Millisecond)
	release()

	c := <-cancelled
	require.NoError(t, c.err)
	require.Equal(t, inventory.StatusReleased, c.r.Status)
	require.Equal(t, []string{"A-1", "A-2"}, c.r.Items[0].Units)
	f := <-confirmed
	require.NoError(t, f.err)
	require.Equal(t, inventory.StatusConfirmed, f.r.Status)
	require.NoError(t, <-held)
	require.NoError(t, <-held)
	// The next batch released A-1 and held it again, in one transaction.
	require.Equal(t, []string{"A-1"}, next.Items[0].Units)
	require.True(t, sameTransaction(t, b, h1.ID, "release", next.ID, "reserve"))
	require.True(t, sameTransaction(t, b, h2.ID, "confirm", next.ID, "reserve"))
	require.False(t, sameTransaction(t, b, quiet.ID, "release", next.ID, "reserve"))

	status, holder := unitsByStatus(t, b.pool, "ARENA")
	require.Equal(t, "held", status["A-1"])
	require.Equal(t, next.ID, holder["A-1"])
	require.Equal(t, "available", status["A-2"])
	require.Equal(t, "sold", status["A-3"])
	dbtest.RequireInvariants(t, b.pool)
}

// TestExpiryKeepsPaceOnAHotRow: while holds keep coming on one SKU, the
// holds that fall due on it expire with the burst's own hold batches,
// each once, on time, and no holder is told busy.
func TestExpiryKeepsPaceOnAHotRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	dbtest.StockIn(t, b.pool, "HOT", 1_000_000)

	var (
		wg      sync.WaitGroup
		made    atomic.Int64
		errs    = make(chan error, 16)
		stop    = make(chan struct{})
		holders = 16
	)
	for w := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := svc.Hold(ctx, holdReq(fmt.Sprintf("w%d-%d", w, i), item("HOT", 1))); err != nil {
					errs <- err
					return
				}
				made.Add(1)
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	require.Eventually(t, func() bool { return made.Load() >= 500 }, 60*time.Second, time.Millisecond)

	// The holds made so far fall due, in SQL, while the holders go on.
	due := dbtest.Count(t, b.pool, `WITH d AS (UPDATE reservations SET expires_at = now() - interval '1 second'
		WHERE status = 'held' RETURNING 1) SELECT count(*) FROM d`)
	// What the loop does with due holds depends on whether the holders'
	// batches keep the row busy (hotRows: 10 batches in a second or two);
	// on a loaded machine they may not have yet, and the loop's own pass
	// then expires them all, which is not what this test is about.
	require.Eventually(t, func() bool { return inventory.HotRow(svc, "HOT", "default", "main") }, 60*time.Second, time.Millisecond,
		"the holders' batches never made the row hot")
	loop, stopLoop := context.WithCancel(ctx)
	type ran struct {
		run inventory.ExpiryRun
		err error
	}
	looped := make(chan ran, 1)
	go func() {
		run, err := svc.ExpireLoop(loop, time.Now().Add(time.Minute))
		looped <- ran{run, err}
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, dbtest.Count(t, b.pool, `SELECT count(*) FROM reservations WHERE status = 'expired'`), due)
	}, 60*time.Second, 10*time.Millisecond)
	close(stop)
	wg.Wait()
	stopLoop()
	r := <-looped
	select {
	case err := <-errs:
		require.NoError(t, err, "a holder was refused while holds expired on its row")
	default:
	}

	require.Equal(t, due, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger WHERE sku = 'HOT' AND kind = 'expire'`), "each expired once")
	// Whether a batch that carried expiries also carried a hold is up to
	// the scheduler (the holders may all be waiting on the batch before),
	// so the loop's own count says where they went.
	require.Positive(t, r.run.WithHolds, "expiries went with the burst's hold batches, in their transactions: %+v", r.run)
	require.LessOrEqual(t, r.run.WithHolds, r.run.Released)
	dbtest.RequireInvariants(t, b.pool)
}

// TestJoinedReleaseIsPickable: the seats a release hands back in a hold
// batch it joined are the batch's to pick: a hold of a quantity of seats
// takes them, and one asking for seats together goes on to the next
// batch, which reads them free, rather than being refused while the
// counters say they are there (it was refused "has 1 available, 1
// requested").
func TestJoinedReleaseIsPickable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	addUnits(t, svc, "HALL", venue(3, 2))
	held := map[string]inventory.Reservation{}
	for _, ids := range [][]string{{"A-1"}, {"A-2"}, {"B-1", "B-2"}, {"C-2"}} {
		r, _, err := svc.Hold(ctx, holdReq("h-"+ids[0], seats("HALL", ids...)))
		require.NoError(t, err)
		held[ids[0]] = r
	}

	for _, c := range []struct {
		name    string
		release string
		ask     inventory.Item
		want    []string
	}{
		{"a quantity", "A-1", item("HALL", 1), []string{"A-1"}},
		{"seats together", "B-1", inventory.Item{SKU: "HALL", Quantity: 2, Adjacent: true}, []string{"B-1", "B-2"}},
	} {
		started, release := blockBatch(svc)
		blocker := holdReq("blocker-"+c.release, seats("HALL", "C-1"))
		blocker.OrderRef = "blocker"
		blocked := make(chan error, 1)
		go func() {
			r, _, err := svc.Hold(ctx, blocker)
			if err == nil {
				_, err = svc.Release(ctx, r.ID, shop, "")
			}
			blocked <- err
		}()
		<-started
		cancelled := make(chan error, 1)
		go func() {
			_, err := svc.Release(ctx, held[c.release].ID, shop, "")
			cancelled <- err
		}()
		require.Eventually(t, func() bool { return inventory.PendingHolds(svc) == 1 }, 10*time.Second, time.Millisecond,
			"the release waits for the hold batch busy with its row")
		type answer struct {
			r   inventory.Reservation
			err error
		}
		asked := make(chan answer, 1)
		go func() {
			r, _, err := svc.Hold(ctx, holdReq("ask-"+c.release, c.ask))
			asked <- answer{r, err}
		}()
		require.Eventually(t, func() bool { return inventory.PendingHolds(svc) == 2 }, 10*time.Second, time.Millisecond)
		inventory.SetBeforeGrant(svc, nil)
		release()
		require.NoError(t, <-cancelled, c.name)
		a := <-asked
		require.NoError(t, a.err, c.name)
		require.Equal(t, c.want, a.r.Items[0].Units, c.name)
		require.NoError(t, <-blocked, c.name)
	}
	dbtest.RequireInvariants(t, b.pool)
}

// availableRequested reads a refusal's "has N available, M requested".
var availableRequested = regexp.MustCompile(`has (\d+) available, (\d+) requested`)

// TestJoinedReleasesUnderLoad replays the reviewer's race on one
// instance: 40 seats, 38 of them held for good, buyers of a quantity and
// buyers naming one of the other two, each giving back at once what it
// got (so their releases join the hold batches busy with the row). No
// refusal says, in its own detail, that the seats asked for were there.
func TestJoinedReleasesUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	addUnits(t, svc, "DOME", venue(4, 10))
	var kept []string
	for _, r := range "ABCD" {
		for p := 1; p <= 10; p++ {
			if id := fmt.Sprintf("%c-%d", r, p); id != "A-1" && id != "A-2" {
				kept = append(kept, id)
			}
		}
	}
	_, _, err := svc.Hold(ctx, holdReq("kept", seats("DOME", kept...)))
	require.NoError(t, err)

	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		contradictions []string
		granted        atomic.Int64
		failures       []error
	)
	until := time.Now().Add(3 * time.Second)
	buyer := func(w int, ask func(i int) inventory.Item) {
		defer wg.Done()
		for i := 0; time.Now().Before(until); i++ {
			r, _, err := svc.Hold(ctx, holdReq(fmt.Sprintf("b%d-%d", w, i), ask(i)))
			var de *domain.Error
			switch {
			case err == nil:
				granted.Add(1)
				_, err = svc.Release(ctx, r.ID, shop, "")
			case errors.As(err, &de) && de.Code == domain.CodeOutOfStock:
				if m := availableRequested.FindStringSubmatch(de.Detail); m != nil {
					have, _ := strconv.Atoi(m[1])
					asked, _ := strconv.Atoi(m[2])
					if have >= asked {
						mu.Lock()
						contradictions = append(contradictions, de.Detail)
						mu.Unlock()
					}
				}
				err = nil
			case errors.As(err, &de) && (de.Code == domain.CodeUnitUnavailable || de.Code == domain.CodeBusy):
				err = nil
			}
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				return
			}
		}
	}
	for w := range 4 {
		wg.Add(1)
		go buyer(w, func(int) inventory.Item { return item("DOME", 1) })
	}
	for w := 4; w < 6; w++ {
		wg.Add(1)
		go buyer(w, func(i int) inventory.Item { return seats("DOME", fmt.Sprintf("A-%d", 1+(w+i)%2)) })
	}
	wg.Wait()
	require.Empty(t, failures)
	if len(contradictions) > 0 {
		t.Fatalf("%d refusals while the seats asked for were there, the first: %s", len(contradictions), contradictions[0])
	}
	require.Positive(t, granted.Load())
	joined := dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger x JOIN ledger y ON x.xmin::text = y.xmin::text
		WHERE x.sku = 'DOME' AND y.sku = 'DOME' AND x.kind = 'release' AND y.kind = 'reserve'`)
	require.Positive(t, joined, "no release joined a hold batch: the race was not run")
}
