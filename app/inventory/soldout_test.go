package inventory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/holdstats"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// memoryCount counts the holds an instance refused from memory.
type memoryCount struct {
	holdstats.Recorder
	n atomic.Int64
}

func (m *memoryCount) SoldOutInMemory() { m.n.Add(1) }

func withMemoryCount(cfg inventory.Config) (inventory.Config, *memoryCount) {
	m := &memoryCount{Recorder: inventory.NopRecorder()}
	cfg.Recorder = m
	return cfg, m
}

// fromMemory asks svc for a hold of n units of sku under a new key each
// time and reports its error and whether memory answered it.
func fromMemory(ctx context.Context, svc *inventory.Service, m *memoryCount, key string, sku string, n int64) (error, bool) {
	before := m.n.Load()
	_, _, err := svc.Hold(ctx, holdReq(key, item(sku, n)))
	return err, m.n.Load() > before
}

// TestSoldOutAnsweredFromMemory: once a batch finds nothing left, holds
// for the SKU are refused from memory with the batch's own answer, a
// retried request whose first attempt was granted still gets that first
// answer, and this instance's own restock or release makes the next hold
// go to the database at once.
func TestSoldOutAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, mem := withMemoryCount(inventory.Config{})
	svc, b := setup(t, &setupOpts{cfg: &cfg})
	dbtest.StockIn(t, b.pool, "GONE", 2)
	first, _, err := svc.Hold(ctx, holdReq("g1", item("GONE", 1)))
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("g2", item("GONE", 1)))
	require.NoError(t, err)

	// The batch refuses; then memory does, in the same words.
	batch, inMemory := fromMemory(ctx, svc, mem, "g3", "GONE", 3)
	require.False(t, inMemory)
	require.Equal(t, domain.CodeOutOfStock, code(batch))
	var memory error
	i := 0
	require.Eventually(t, func() bool {
		i++
		memory, inMemory = fromMemory(ctx, svc, mem, fmt.Sprintf("m%d", i), "GONE", 3)
		return inMemory
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, batch.Error(), memory.Error())
	var de *domain.Error
	require.ErrorAs(t, memory, &de)
	require.Equal(t, "GONE", de.SKU)

	// A retry of a granted request is a replay, not a refusal.
	again, replayed, err := svc.Hold(ctx, holdReq("g1", item("GONE", 1)))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.ID, again.ID)

	// Nor does it answer for another SKU.
	dbtest.StockIn(t, b.pool, "PLENTY", 5)
	_, inMemory = fromMemory(ctx, svc, mem, "p1", "PLENTY", 1)
	require.False(t, inMemory)

	// This instance's restock: the very next hold is granted.
	_, _, err = svc.AdjustOnce(ctx, idempotency.NewKey("ops", "restock"), stock.Adjustment{SKU: "GONE", Delta: 1, Reason: "found one", Actor: "ops"})
	require.NoError(t, err)
	h4, _, err := svc.Hold(ctx, holdReq("g4", item("GONE", 1)))
	require.NoError(t, err)

	// Sold out again, remembered again; this instance's release: the very
	// next hold is granted.
	require.Eventually(t, func() bool {
		i++
		_, inMemory = fromMemory(ctx, svc, mem, fmt.Sprintf("m%d", i), "GONE", 1)
		return inMemory
	}, 10*time.Second, time.Millisecond)
	_, err = svc.Release(ctx, h4.ID, shop, "")
	require.NoError(t, err)
	_, _, err = svc.Hold(ctx, holdReq("g5", item("GONE", 1)))
	require.NoError(t, err)
}

// TestSoldOutCorrectedAcrossInstances: instance A answers a sold-out SKU
// from memory; stock added through instance B is holdable on A within
// STOCKHOLD_SOLDOUT_RECHECK of B's commit: A never answers from memory a
// hold it was asked for later than that.
func TestSoldOutCorrectedAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const recheck = 250 * time.Millisecond
	cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: recheck})
	a, b := setup(t, &setupOpts{cfg: &cfg})
	other := b.another(inventory.Config{SoldOutRecheck: recheck})
	dbtest.StockIn(t, b.pool, "TOUR", 1)
	_, _, err := a.Hold(ctx, holdReq("t0", item("TOUR", 1)))
	require.NoError(t, err)
	i := 0
	require.Eventually(t, func() bool {
		i++
		_, inMemory := fromMemory(ctx, a, mem, fmt.Sprintf("a%d", i), "TOUR", 1)
		return inMemory
	}, 10*time.Second, time.Millisecond)

	_, _, err = other.AdjustOnce(ctx, idempotency.NewKey("ops", "more"), stock.Adjustment{SKU: "TOUR", Delta: 5, Reason: "second show", Actor: "ops"})
	require.NoError(t, err)
	committed := time.Now()
	for {
		i++
		asked := time.Now()
		err, inMemory := fromMemory(ctx, a, mem, fmt.Sprintf("a%d", i), "TOUR", 1)
		if err == nil {
			break
		}
		require.Equal(t, domain.CodeOutOfStock, code(err))
		require.False(t, inMemory && asked.Sub(committed) > recheck,
			"a hold asked %s after the restock's commit was refused from memory", asked.Sub(committed))
		require.Less(t, time.Since(committed), time.Minute, "A never saw the stock B added")
	}
}

// TestSoldOutStepsAsideForStopSale: memory answers no hold its batch would
// answer stop_sale. A client stopped through another instance is answered
// stop_sale on this one within STOCKHOLD_SOLDOUT_RECHECK of the flip's
// commit, one stopped through this instance at once, while other clients'
// holds are still refused from memory; the switch for everything turned
// on here stops memory at once; a location's stop-sale lifted here makes
// its stock holdable at once.
func TestSoldOutStepsAsideForStopSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const recheck = 250 * time.Millisecond
	cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: recheck})
	a, b := setup(t, &setupOpts{cfg: &cfg})
	other := b.another(inventory.Config{SoldOutRecheck: recheck})
	for _, name := range []string{"shop-b", "shop-c"} {
		_, err := auth.Create(ctx, b.pool, name, auth.RoleShop)
		require.NoError(t, err)
	}
	dbtest.StockIn(t, b.pool, "HUSH", 1)
	_, _, err := a.Hold(ctx, holdReq("h0", item("HUSH", 1)))
	require.NoError(t, err)
	i := 0
	ask := func(client string) (error, bool) {
		i++
		before := mem.n.Load()
		_, _, err := a.Hold(ctx, inventory.HoldRequest{Client: client, IdempotencyKey: fmt.Sprint("k", i), Items: []inventory.Item{item("HUSH", 1)}})
		return err, mem.n.Load() > before
	}
	remembered := func(client string) {
		t.Helper()
		require.Eventually(t, func() bool {
			err, inMemory := ask(client)
			return inMemory && code(err) == domain.CodeOutOfStock
		}, 10*time.Second, time.Millisecond, "%s is never refused from memory", client)
	}
	remembered("shop-b")

	// shop-b stopped through the other instance.
	_, err = other.SetStopSale(ctx, stock.StopSaleChange{Client: "shop-b", Active: true, Reason: "channel audit", Actor: "alice"})
	require.NoError(t, err)
	committed := time.Now()
	for {
		asked := time.Now()
		err, inMemory := ask("shop-b")
		if code(err) == domain.CodeStopSale {
			break
		}
		require.Equal(t, domain.CodeOutOfStock, code(err))
		require.False(t, inMemory && asked.Sub(committed) > recheck,
			"a hold by a stopped client asked %s after the flip's commit was refused out_of_stock from memory", asked.Sub(committed))
		require.Less(t, time.Since(committed), time.Minute, "this instance never saw shop-b stopped")
	}
	remembered("shop-a")
	for range 20 {
		err, inMemory := ask("shop-b")
		require.Equal(t, domain.CodeStopSale, code(err))
		require.False(t, inMemory)
	}

	// shop-c stopped through this instance: at once, even once a batch
	// (shop-a's, the first hold after the flip) has read the rows again.
	remembered("shop-a")
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Client: "shop-c", Active: true, Reason: "channel audit", Actor: "alice"})
	require.NoError(t, err)
	err, inMemory := ask("shop-a")
	require.Equal(t, domain.CodeOutOfStock, code(err))
	require.False(t, inMemory, "the flip is a write: the next hold goes to its batch")
	err, inMemory = ask("shop-c")
	require.Equal(t, domain.CodeStopSale, code(err))
	require.False(t, inMemory)
	remembered("shop-a")

	// Everything stopped through this instance: at once.
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Active: true, Reason: "count", Actor: "alice"})
	require.NoError(t, err)
	err, inMemory = ask("shop-a")
	require.Equal(t, domain.CodeStopSale, code(err))
	require.False(t, inMemory)
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Active: false, Reason: "counted", Actor: "alice"})
	require.NoError(t, err)

	// The only location stopped: its stock is out of sale, answered
	// stop_sale by every batch and never remembered sold out; lifted
	// here: the very next hold is granted.
	dbtest.StockIn(t, b.pool, "SHUT", 2)
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Location: stock.DefaultLocation, Active: true, Reason: "stocktake", Actor: "alice"})
	require.NoError(t, err)
	for range 20 {
		i++
		err, inMemory := fromMemory(ctx, a, mem, fmt.Sprint("s", i), "SHUT", 1)
		require.Equal(t, domain.CodeStopSale, code(err))
		require.False(t, inMemory)
	}
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Location: stock.DefaultLocation, Active: false, Reason: "counted", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = a.Hold(ctx, holdReq("s-after", item("SHUT", 1)))
	require.NoError(t, err)
}

// TestSoldOutStaysAsideWhileEverythingIsStopped: while the switch for
// everything is on, memory answers no hold, for as long as it stays on
// and however often the recheck loop reads the remembered pools again:
// turned on through another instance, holds asked on this one later than
// STOCKHOLD_SOLDOUT_RECHECK after the flip's commit are answered stop_sale
// by their batch; turned on through this one, from the first hold after
// it. Lifted, the pool is remembered again.
func TestSoldOutStaysAsideWhileEverythingIsStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const recheck = 100 * time.Millisecond
	cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: recheck})
	a, b := setup(t, &setupOpts{cfg: &cfg})
	other := b.another(inventory.Config{SoldOutRecheck: recheck})
	dbtest.StockIn(t, b.pool, "HUSH", 1)
	_, _, err := a.Hold(ctx, holdReq("h0", item("HUSH", 1)))
	require.NoError(t, err)
	i := 0
	remembered := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			i++
			err, inMemory := fromMemory(ctx, a, mem, fmt.Sprint("k", i), "HUSH", 1)
			return inMemory && code(err) == domain.CodeOutOfStock
		}, 10*time.Second, time.Millisecond, "HUSH is never refused from memory")
	}
	// stopped asks for holds on a for five rechecks after the flip that
	// committed at committed: each asked later than trusted after it is
	// answered stop_sale, not from memory.
	stopped := func(committed time.Time, trusted time.Duration) {
		t.Helper()
		n := 0
		for time.Since(committed) < 5*recheck || n < 10 {
			i++
			n++
			asked := time.Now()
			err, inMemory := fromMemory(ctx, a, mem, fmt.Sprint("k", i), "HUSH", 1)
			if asked.Sub(committed) <= trusted {
				continue
			}
			require.False(t, inMemory, "a hold asked %s after the stop-sale's commit was refused from memory: %v", asked.Sub(committed), err)
			require.Equal(t, domain.CodeStopSale, code(err), "%v", err)
		}
	}

	remembered()
	_, err = other.SetStopSale(ctx, stock.StopSaleChange{Active: true, Reason: "payments down", Actor: "alice"})
	require.NoError(t, err)
	stopped(time.Now(), recheck)
	_, err = other.SetStopSale(ctx, stock.StopSaleChange{Active: false, Reason: "payments back", Actor: "alice"})
	require.NoError(t, err)

	remembered()
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Active: true, Reason: "payments down", Actor: "alice"})
	require.NoError(t, err)
	stopped(time.Now(), 0)
	_, err = a.SetStopSale(ctx, stock.StopSaleChange{Active: false, Reason: "payments back", Actor: "alice"})
	require.NoError(t, err)
	remembered()
}

// TestSoldOutSeatsCorrectedAcrossInstances: a plain quantity naming its
// location on a pool of seats, refused and remembered on instance A; a
// seat released on instance B, and later one added there: each is
// holdable on A within STOCKHOLD_SOLDOUT_RECHECK of B's commit (the
// recheck decided without the pool's units, and the entry never cleared).
func TestSoldOutSeatsCorrectedAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const recheck = 250 * time.Millisecond
	cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: recheck})
	a, b := setup(t, &setupOpts{cfg: &cfg})
	other := b.another(inventory.Config{SoldOutRecheck: recheck})
	addUnits(t, other, "STALLS", venue(1, 2))
	taken, _, err := other.Hold(ctx, holdReq("taken", seats("STALLS", "A-1", "A-2")))
	require.NoError(t, err)
	ask := inventory.Item{SKU: "STALLS", Quantity: 1, Location: stock.DefaultLocation}
	i := 0
	remembered := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			i++
			before := mem.n.Load()
			_, _, err := a.Hold(ctx, holdReq(fmt.Sprint("a", i), ask))
			return code(err) == domain.CodeOutOfStock && mem.n.Load() > before
		}, 10*time.Second, time.Millisecond, "never refused from memory")
	}
	holdable := func(what string) {
		t.Helper()
		committed := time.Now()
		for {
			i++
			asked := time.Now()
			before := mem.n.Load()
			_, _, err := a.Hold(ctx, holdReq(fmt.Sprint("a", i), ask))
			if err == nil {
				return
			}
			require.Equal(t, domain.CodeOutOfStock, code(err))
			require.False(t, mem.n.Load() > before && asked.Sub(committed) > recheck,
				"%s: a hold asked %s after the commit was refused from memory", what, asked.Sub(committed))
			require.Less(t, time.Since(committed), 10*time.Second, "%s: A never saw the seat", what)
		}
	}

	remembered()
	_, err = other.ReleaseItems(ctx, taken.ID, shop, "", []inventory.Item{seats("STALLS", "A-2")})
	require.NoError(t, err)
	holdable("a seat released on B")

	remembered()
	addUnits(t, other, "STALLS", []stock.UnitSpec{{ID: "A-3"}})
	holdable("a seat added on B")
}

// waitRemembered waits until svc refuses a hold of one unit of sku from
// memory, asking under new keys ("fresh1", "fresh2", ...), and returns how
// many it asked. Memory answers no one before the recheck loop's first
// read, half of SoldOutRecheck after the first refusal and later on a
// loaded machine: the wait is answerWait, well past it.
func waitRemembered(t *testing.T, svc *inventory.Service, mem *memoryCount, sku string) int {
	t.Helper()
	i := 0
	require.Eventually(t, func() bool {
		i++
		_, inMemory := fromMemory(context.Background(), svc, mem, fmt.Sprint("fresh", i), sku, 1)
		return inMemory
	}, answerWait, time.Millisecond)
	return i
}

// TestSoldOutRetryGetsItsFirstAnswer replays the reviewer's sequence: a
// SKU sold out and remembered on instance A; on instance B one unit is
// added and a hold granted under key K; the same request under K sent to
// A right after gets B's answer (a replay of the same hold), not
// out_of_stock from memory, ten times in a row; the same key with another
// body is 422 idempotency_key_reused. Then the same, eight at once, while
// other clients' new keys are still refused from memory (the memory
// keeps answering them).
func TestSoldOutRetryGetsItsFirstAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A trusts its reads for 10 s: only the key lookup stands between a
	// retry and memory.
	cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: 10 * time.Second})
	a, b := setup(t, &setupOpts{cfg: &cfg})
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "LAST", 1)
	_, _, err := a.Hold(ctx, holdReq("first", item("LAST", 1)))
	require.NoError(t, err)
	i := waitRemembered(t, a, mem, "LAST")

	restock := func(key string) {
		_, _, err := other.AdjustOnce(ctx, idempotency.NewKey("ops", key), stock.Adjustment{SKU: "LAST", Delta: 1, Reason: "one more", Actor: "ops"})
		require.NoError(t, err)
	}
	for round := range 10 {
		k := fmt.Sprint("k", round)
		restock(k)
		granted, replayed, err := other.Hold(ctx, holdReq(k, item("LAST", 1)))
		require.NoError(t, err)
		require.False(t, replayed)
		again, replayed, err := a.Hold(ctx, holdReq(k, item("LAST", 1)))
		require.NoError(t, err, "round %d: the retry on A was refused", round)
		require.True(t, replayed)
		require.Equal(t, granted.ID, again.ID)
		_, _, err = a.Hold(ctx, holdReq(k, item("LAST", 2)))
		require.Equal(t, domain.CodeKeyReused, code(err), "round %d", round)
		i++
		err, inMemory := fromMemory(ctx, a, mem, fmt.Sprint("fresh", i), "LAST", 1)
		require.Equal(t, domain.CodeOutOfStock, code(err))
		require.True(t, inMemory, "round %d: a new key is still answered from memory", round)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		problems []string
		stop     atomic.Bool
	)
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	hammer := make(chan struct{})
	go func() {
		defer close(hammer)
		for n := 0; !stop.Load(); n++ {
			_, _, err := a.Hold(ctx, holdReq(fmt.Sprint("hammer", n), item("LAST", 1)))
			if err != nil && code(err) != domain.CodeOutOfStock && code(err) != domain.CodeBusy {
				report("a new key on A: %v", err)
				return
			}
		}
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 5 {
				k := fmt.Sprint("g", g, "-", round)
				if _, _, err := other.AdjustOnce(ctx, idempotency.NewKey("ops", k), stock.Adjustment{SKU: "LAST", Delta: 1, Reason: "one more", Actor: "ops"}); err != nil && code(err) != domain.CodeBusy {
					report("%s: restock: %v", k, err)
					return
				}
				granted, _, err := other.Hold(ctx, holdReq(k, item("LAST", 1)))
				if err != nil {
					continue // another goroutine's hold took the unit, or the row was busy
				}
				// Busy (the row is hot across both instances) is the
				// contract's "send it again", which a client sends
				// through its load balancer: the answer that counts is
				// the first that is not, and it must be the first answer.
				var (
					again    inventory.Reservation
					replayed bool
				)
				_, err = untilAnswered(func() (err error) {
					again, replayed, err = a.Hold(ctx, holdReq(k, item("LAST", 1)))
					return err
				})
				if err != nil || !replayed || again.ID != granted.ID {
					report("%s: the retry on A answered %v (replayed %v)", k, err, replayed)
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-hammer
	require.Empty(t, problems)
}

// TestSoldOutRetryAnsweredWhileTheRowIsLocked: a retry on instance A,
// which remembers the pool sold out, of a hold instance B granted gets its
// first answer at once while another transaction keeps the pool's stock
// row locked: a replay changes no stock, so it waits for no row lock and
// never answers busy. Before, the retry went to a hold batch, which locked
// the row: on a row kept hot by the other instance's batches it answered
// busy.
func TestSoldOutRetryAnsweredWhileTheRowIsLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, mem := withMemoryCount(inventory.Config{SoldOutRecheck: 10 * time.Second, LockTimeout: 100 * time.Millisecond})
	a, b := setup(t, &setupOpts{cfg: &cfg})
	other := b.another(inventory.Config{})
	dbtest.StockIn(t, b.pool, "LAST", 1)
	_, _, err := a.Hold(ctx, holdReq("first", item("LAST", 1)))
	require.NoError(t, err)
	waitRemembered(t, a, mem, "LAST")
	_, _, err = other.AdjustOnce(ctx, idempotency.NewKey("ops", "one more"), stock.Adjustment{SKU: "LAST", Delta: 1, Reason: "one more", Actor: "ops"})
	require.NoError(t, err)
	granted, _, err := other.Hold(ctx, holdReq("k", item("LAST", 1)))
	require.NoError(t, err)

	unlock := lockRow(t, b.pool, "LAST")
	for try := range 3 {
		again, replayed, err := a.Hold(ctx, holdReq("k", item("LAST", 1)))
		require.NoError(t, err, "try %d: the retry on A while the row is locked", try)
		require.True(t, replayed)
		require.Equal(t, granted, again, "the first answer")
	}
	_, _, err = a.Hold(ctx, holdReq("k", item("LAST", 2)))
	require.Equal(t, domain.CodeKeyReused, code(err))
	err, inMemory := fromMemory(ctx, a, mem, "new while locked", "LAST", 1)
	require.Equal(t, domain.CodeOutOfStock, code(err), "%v", err)
	require.True(t, inMemory, "a new key is still refused from memory")
	unlock()
}
