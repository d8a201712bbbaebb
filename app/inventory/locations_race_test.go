package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestAllocationRacesTransfersMovesCounts races holds allocated across
// three locations (allocated, named and split lines, multi-line holds)
// with confirms and releases, transfers between the locations (created,
// received in part, closed short, cancelled), moves between states,
// counts and restocks. Meanwhile a watcher reads every stock row: no
// location is ever below zero in any state. Afterwards the books close per
// location (dbtest.RequireInvariants: counters against lines and ledger,
// incoming against the transfers in transit), and every acknowledged hold
// is where its answer said.
func TestAllocationRacesTransfersMovesCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, b := setup(t, nil)
	locations := []string{"p1", "p2", "p3"}
	for i, l := range locations {
		dbtest.Location(t, b.pool, l, int32(i%2)) // p1 and p3 tie at 0: p1 first by id
	}
	skus := []string{"A", "B", "C", "D"}
	for _, sku := range skus {
		for _, l := range locations {
			dbtest.StockInAt(t, b.pool, sku, l, 40)
		}
	}

	type acked struct {
		id    uuid.UUID
		lines []inventory.Line
	}
	var (
		mu     sync.Mutex
		holds  []acked
		errs   = make(chan error, 100)
		counts sync.Map // outcome -> *atomic.Int64
		stop   = make(chan struct{})
	)
	tally := func(what string) {
		v, _ := counts.LoadOrStore(what, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	// expected says whether err is one of the refusals the work may meet.
	expected := func(what string, err error, codes ...domain.Code) bool {
		if err == nil {
			tally(what + " ok")
			return true
		}
		var de *domain.Error
		if errors.As(err, &de) && (slices.Contains(codes, de.Code) || de.Code == domain.CodeBusy) {
			tally(what + " " + string(de.Code))
			return true
		}
		errs <- fmt.Errorf("%s: %w", what, err)
		return false
	}

	var work sync.WaitGroup
	for w := range 6 {
		work.Add(1)
		go func() {
			defer work.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 25))
			for i := range 60 {
				var items []inventory.Item
				for _, sku := range rng.Perm(len(skus))[:1+rng.IntN(2)] {
					it := inventory.Item{SKU: skus[sku], Quantity: 1 + int64(rng.IntN(4))}
					switch rng.IntN(4) {
					case 0:
						it.Location = locations[rng.IntN(len(locations))]
					case 1:
						it.Split, it.Quantity = true, it.Quantity+int64(rng.IntN(10))
					}
					items = append(items, it)
				}
				r, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("w%d-%d", w, i), Items: items})
				if !expected("hold", err, domain.CodeOutOfStock, domain.CodeSKUPaused) || err != nil {
					continue
				}
				mu.Lock()
				holds = append(holds, acked{id: r.ID, lines: r.Lines()})
				mu.Unlock()
				switch rng.IntN(3) {
				case 0:
					_, err = svc.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
					expected("confirm", err)
				case 1:
					_, err = svc.Release(ctx, r.ID, inventory.Caller{Name: "shop"}, "")
					expected("release", err)
				}
			}
		}()
	}
	work.Add(1)
	go func() { // transfers: sent, received in part, closed short or cancelled
		defer work.Done()
		rng := rand.New(rand.NewPCG(7, 25))
		for i := range 40 {
			from, to := rng.IntN(3), rng.IntN(3)
			if from == to {
				to = (to + 1) % 3
			}
			tr, _, err := svc.CreateTransferOnce(ctx, key(fmt.Sprint("t", i)), stock.NewTransfer{SKU: skus[rng.IntN(len(skus))],
				From: locations[from], To: locations[to], Quantity: 1 + int64(rng.IntN(5)), Reason: "rebalance", Actor: "ops"})
			if !expected("transfer", err, domain.CodeInsufficientAvailable) || err != nil {
				continue
			}
			step := stock.TransferStep{ID: tr.ID, Actor: "ops", Reason: "race"}
			switch rng.IntN(3) {
			case 0:
				_, err = svc.CancelTransfer(ctx, step)
				expected("cancel", err)
			default:
				step.Quantity = 1 + int64(rng.IntN(int(tr.Quantity)))
				_, err = svc.ReceiveTransfer(ctx, step)
				expected("receive", err)
				if step.Quantity < tr.Quantity {
					_, err = svc.CloseTransfer(ctx, step)
					expected("close", err)
				}
			}
		}
	}()
	work.Add(1)
	go func() { // moves among the states, write-offs, counts and restocks
		defer work.Done()
		rng := rand.New(rand.NewPCG(9, 25))
		states := []string{stock.StateAvailable, stock.StateQualityControl, stock.StateDamaged, stock.StateSafetyStock}
		for i := range 60 {
			sku, loc := skus[rng.IntN(len(skus))], locations[rng.IntN(len(locations))]
			switch rng.IntN(4) {
			case 0, 1:
				to := states[rng.IntN(len(states))]
				from := states[rng.IntN(len(states))]
				if from == to {
					to = stock.StateLost
				}
				_, _, err := svc.MoveOnce(ctx, key(fmt.Sprint("m", i)), stock.Move{SKU: sku, Location: loc, From: from, To: to,
					Quantity: 1 + int64(rng.IntN(2)), Reason: "race", Actor: "ops"})
				expected("move", err, domain.CodeInsufficientAvailable, domain.CodeInsufficientQualityControl,
					domain.CodeInsufficientDamaged, domain.CodeInsufficientSafetyStock)
			case 2:
				st, err := svc.GetStock(ctx, sku) // racing, on purpose: the count may find less than is held by now
				if err != nil {
					errs <- err
					continue
				}
				var onShelf int64
				for _, p := range st.Pools {
					if p.Location == loc && p.Pool == stock.MainPool {
						onShelf = p.Available + p.Reserved + p.QualityControl + p.Damaged + p.SafetyStock
					}
				}
				_, _, err = svc.CountOnce(ctx, key(fmt.Sprint("c", i)), stock.StockCount{SKU: sku, Location: loc,
					Counted: max(onShelf+int64(rng.IntN(5))-2, 0), Reason: "race", Actor: "ops"})
				expected("count", err, domain.CodeCountBelowHeld)
			default:
				_, err := svc.Adjust(ctx, stock.Adjustment{SKU: sku, Location: loc, Delta: 3, Reason: "restock", Actor: "ops"})
				expected("restock", err)
			}
		}
	}()
	watched := make(chan int)
	go func() { // no location ever below zero in any state
		n := 0
		defer func() { watched <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var negative int
			err := b.pool.QueryRow(ctx, `SELECT count(*) FROM stock WHERE least(total, available, reserved, sold,
				quality_control, damaged, safety_stock, incoming) < 0`).Scan(&negative)
			if err != nil {
				errs <- err
				return
			}
			if negative > 0 {
				errs <- fmt.Errorf("%d stock rows below zero", negative)
			}
			n++
		}
	}()
	work.Wait()
	close(stop)
	require.Positive(t, <-watched, "the watcher looked")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Every acknowledged hold is where its answer said.
	require.NotEmpty(t, holds)
	split := 0
	for _, h := range holds {
		got, err := svc.Get(ctx, h.id, inventory.Caller{Name: "shop"})
		require.NoError(t, err)
		require.Equal(t, h.lines, got.Lines(), "hold %s", h.id)
		for _, it := range got.Items {
			if len(it.Allocations) > 0 {
				split++
			}
		}
	}
	var summary []string
	counts.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(summary)
	t.Logf("%d holds acknowledged, %d split across locations; %v", len(holds), split, summary)
	for _, must := range []string{"hold ok", "transfer ok", "receive ok", "close ok", "cancel ok", "move ok", "count ok"} {
		v, ok := counts.Load(must)
		require.True(t, ok && v.(*atomic.Int64).Load() > 0, "the race did %s", must)
	}
	require.Positive(t, split, "some holds were split")
}

// TestClosedLocationTakesNoLaterHold: once closing a location (making it
// inactive, or stopping its sales) has answered, no hold takes stock
// there. A hold batch that read the location open and is still running
// when the close is asked for (held up on the location's stock row,
// which another session keeps locked) carries every kind of line that
// can land there: one naming it, one allocated to it, one split across it
// and another location, and a hold elsewhere. The close waits for it:
// every hold granted at the location was committed when the close
// answered. Without the close's stop-sale lock, it answers at once and
// the batch, which read the location open, commits its holds there
// afterwards.
func TestClosedLocationTakesNoLaterHold(t *testing.T) {
	t.Parallel()
	closes := map[string]func(ctx context.Context, svc *inventory.Service) error{
		"deactivated": func(ctx context.Context, svc *inventory.Service) error {
			off := false
			_, err := svc.UpdateLocation(ctx, stock.LocationChange{ID: "paris", Active: &off, Actor: "alice"})
			return err
		},
		"sales stopped": func(ctx context.Context, svc *inventory.Service) error {
			_, err := svc.SetStopSale(ctx, stock.StopSaleChange{Location: "paris", Active: true, Reason: "flood", Actor: "alice"})
			return err
		},
	}
	for name, closeParis := range closes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc, b := setup(t, &setupOpts{cfg: &inventory.Config{Flights: 1, LockTimeout: 10 * time.Second}})
			dbtest.Location(t, b.pool, "paris", 0)
			dbtest.Location(t, b.pool, "lyon", 1)
			dbtest.StockInAt(t, b.pool, "SHUT", "paris", 10)
			dbtest.StockInAt(t, b.pool, "SHUT", "lyon", 2)
			dbtest.StockInAt(t, b.pool, "OPEN", "lyon", 5)

			locker, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer locker.Rollback(ctx) //nolint:errcheck // rolled back below
			_, err = locker.Exec(ctx, `SELECT 1 FROM stock WHERE sku = 'SHUT' AND location = 'paris' FOR UPDATE`)
			require.NoError(t, err)

			holds := map[string]<-chan outcome{}
			gatedBatch(t, svc, b.pool, func(submit func(context.Context, inventory.HoldRequest) <-chan outcome) {
				holds["named"] = submit(ctx, holdReq("named", inventory.Item{SKU: "SHUT", Quantity: 1, Location: "paris"}))
				holds["allocated"] = submit(ctx, holdReq("allocated", item("SHUT", 3))) // lyon has 2
				holds["split"] = submit(ctx, holdReq("split", inventory.Item{SKU: "SHUT", Quantity: 8, Split: true}))
				holds["elsewhere"] = submit(ctx, holdReq("elsewhere", item("OPEN", 1)))
			})
			waitLockWait(t, b.pool) // the batch has read paris open and waits on its row

			type closed struct {
				err error
				// committed are the holds with a line at paris in the
				// database when the close answered.
				committed map[string]bool
			}
			answered := make(chan closed, 1)
			go func() {
				c := closed{err: closeParis(ctx, svc), committed: map[string]bool{}}
				if c.err == nil {
					rows, err := b.pool.Query(ctx, `SELECT DISTINCT r.idempotency_key FROM reservation_lines l
						JOIN reservations r ON r.id = l.reservation_id WHERE l.location = 'paris'`)
					if err == nil {
						var keys []string
						keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
						for _, k := range keys {
							c.committed[k] = true
						}
					}
					c.err = err
				}
				answered <- c
			}()
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				if len(answered) > 0 {
					return // answered: refused below
				}
				var n int
				assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n))
				assert.Positive(c, n, "the close waits for the batch in flight")
			}, 10*time.Second, 5*time.Millisecond)
			require.Empty(t, answered, "the close answered while a batch that read paris open was running")
			require.NoError(t, locker.Rollback(ctx))

			c := <-answered
			require.NoError(t, c.err)
			atParis := 0
			for key, ch := range holds {
				o := <-ch
				if o.err != nil {
					require.Contains(t, []domain.Code{domain.CodeLocationInactive, domain.CodeStopSale}, code(o.err), "%s: %v", key, o.err)
					continue
				}
				for _, l := range o.r.Lines() {
					if l.Location == "paris" {
						atParis++
						require.True(t, c.committed[key], "hold %s was granted at paris after the close answered", key)
					}
				}
			}
			require.Equal(t, 3, atParis, "the batch that read paris open granted its three holds there before the close")

			// After the close, paris takes nothing; lyon sells.
			_, _, err = svc.Hold(ctx, holdReq("after", inventory.Item{SKU: "SHUT", Quantity: 1, Location: "paris"}))
			require.Contains(t, []domain.Code{domain.CodeLocationInactive, domain.CodeStopSale}, code(err), "%v", err)
			_, _, err = svc.Hold(ctx, holdReq("after-elsewhere", item("OPEN", 1)))
			require.NoError(t, err)
		})
	}
}
