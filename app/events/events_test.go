package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/jobs"
)

var quiet = slog.New(slog.DiscardHandler)

func setup(t *testing.T) (*pgxpool.Pool, *inventory.Service) {
	t.Helper()
	pool := dbtest.NewWithConfig(t, func(c *pgxpool.Config) { c.MaxConns = 30 })
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.NewServices(config.Defaults(), pool, inserter, quiet)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return pool, deps.Inventory
}

func adjustTx(t *testing.T, tx pgx.Tx, sku string, delta int64) {
	t.Helper()
	_, err := stock.AdjustTx(context.Background(), tx, stock.Adjustment{SKU: sku, Delta: delta, Actor: "test"})
	require.NoError(t, err)
}

// readN waits until n events after after can be served (other tests'
// transactions on the same server hold the feed back for a moment: its
// horizon is the server's oldest running transaction) and returns them.
func readN(t *testing.T, pool *pgxpool.Pool, after events.Position, n int) []events.Event {
	t.Helper()
	var got []events.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if len(got) > 0 {
			after = got[len(got)-1].Position
		}
		got = append(got, eventstest.ReadAll(c, pool, after)...)
		assert.Len(c, got, n)
	}, 30*time.Second, 5*time.Millisecond)
	return got
}

func changesOf(evs []events.Event, sku string) []events.Event {
	var out []events.Event
	for _, e := range evs {
		if e.SKU == sku && e.Type == events.StockChanged {
			out = append(out, e)
		}
	}
	return out
}

// TestFeedWaitsForOlderTransactions is the out-of-order commit: a
// transaction that wrote its ledger row first (the smaller id) commits
// after a younger one. A reader going by id would serve the younger row,
// move its cursor past it, and never see the older one. The feed serves
// neither until the older transaction has ended, then both, in order.
func TestFeedWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, inv := setup(t)
	for _, sku := range []string{"A1", "B1"} {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 10, Actor: "test"})
		require.NoError(t, err)
	}
	start := readN(t, pool, events.Start, 2)
	cursor := start[1].Position

	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(ctx) }()
	adjustTx(t, older, "A1", 1) // the smaller ledger id, not committed
	younger, err := pool.Begin(ctx)
	require.NoError(t, err)
	adjustTx(t, younger, "B1", 1)
	require.NoError(t, younger.Commit(ctx))
	var olderID, youngerID int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) FROM ledger`).Scan(&youngerID))
	require.NoError(t, older.QueryRow(ctx, `SELECT max(id) FROM ledger WHERE sku = 'A1'`).Scan(&olderID))
	require.Less(t, olderID, youngerID, "the open transaction holds the smaller id")

	require.Empty(t, eventstest.ReadAll(t, pool, cursor), "nothing is served while an older transaction may still commit")

	require.NoError(t, older.Commit(ctx))
	got := readN(t, pool, cursor, 2)
	require.Equal(t, []string{"A1", "B1"}, []string{got[0].SKU, got[1].SKU}, "both, the older first")
	all := append(start, got...)
	eventstest.RequireMatchesLedger(t, pool, all)
}

// TestFeedKeepsEachPoolInOrderOfItsChanges is the other half: a
// transaction that got its id first (it wrote elsewhere) changes a stock
// row after a younger transaction changed it. In transaction-id order its
// change would come first; the feed keeps the row's own order.
func TestFeedKeepsEachPoolInOrderOfItsChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, inv := setup(t)
	for _, sku := range []string{"A1", "C1"} {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 10, Actor: "test"})
		require.NoError(t, err)
	}
	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(ctx) }()
	adjustTx(t, older, "C1", 1) // takes its transaction id
	younger, err := pool.Begin(ctx)
	require.NoError(t, err)
	adjustTx(t, younger, "A1", 5)
	require.NoError(t, younger.Commit(ctx))
	adjustTx(t, older, "A1", -3) // after the younger one's change
	require.NoError(t, older.Commit(ctx))

	all := readN(t, pool, events.Start, 5)
	a1 := changesOf(all, "A1")
	require.Len(t, a1, 3)
	var avail []any
	for _, e := range a1 {
		avail = append(avail, e.Data["available"])
	}
	require.Equal(t, []any{int64(10), int64(15), int64(12)}, avail, "A1's changes in the order they happened")
	eventstest.RequireMatchesLedger(t, pool, all)
}

// retryBusy calls f again while it answers busy (a lock wait past the lock
// timeout on a loaded machine), as a caller told Retry-After would.
func retryBusy(f func() error) error {
	for {
		err := f()
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != domain.CodeBusy {
			return err
		}
	}
}

// TestFeedUnderConcurrentWriters runs holds, confirms, partial and whole
// releases and adjustments from many goroutines over a few SKUs (group
// commit puts many in one transaction, several transactions run at once
// and commit in any order) while a reader pulls small pages. The reader
// sees every event exactly once, each (sku, pool) in the order of its
// changes, and the counters it walks end where the rows are.
func TestFeedUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, inv := setup(t)
	skus := []string{"A1", "B2", "C3", "D4"}
	for _, sku := range skus {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 1000, Actor: "test"})
		require.NoError(t, err)
	}

	stop := make(chan struct{})
	var (
		seen    []events.Event
		readErr error
		reader  sync.WaitGroup
	)
	reader.Add(1)
	go func() {
		defer reader.Done()
		after := events.Start
		q := db.New(pool)
		for {
			page, err := events.Read(ctx, q, after, 1+rand.IntN(7))
			if err != nil {
				readErr = err
				return
			}
			seen = append(seen, page.Events...)
			after = page.Next
			if len(page.Events) == 0 {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
	}()

	errs := make(chan error, 64)
	var writers sync.WaitGroup
	for w := range 12 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			by := inventory.Caller{Name: "shop"}
			for i := range 40 {
				a, b := skus[r.IntN(len(skus))], skus[r.IntN(len(skus))]
				items := []inventory.Item{{SKU: a, Quantity: 1 + int64(r.IntN(3))}, {SKU: b, Quantity: 1}}
				var h inventory.Reservation
				err := retryBusy(func() (err error) {
					h, _, err = inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint(w, "-", i), Items: items})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				op := r.IntN(5)
				err = retryBusy(func() (err error) {
					switch op {
					case 0:
						_, err = inv.Confirm(ctx, h.ID, by)
					case 1:
						_, err = inv.Release(ctx, h.ID, by, "")
					case 2:
						_, err = inv.ReleaseItems(ctx, h.ID, by, "", []inventory.Item{{SKU: h.Items[0].SKU, Quantity: 1}})
					case 3:
						_, err = inv.Adjust(ctx, stock.Adjustment{SKU: a, Delta: 2, Actor: "restock"})
					}
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("after hold %s: %w", h.ID, err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Writers are done: the reader drains what is left, then stops.
	close(stop)
	reader.Wait()
	require.NoError(t, readErr)
	var want int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&want))
	all := append(seen, readAtLeast(t, pool, lastPosition(seen), func(got []events.Event) bool {
		return countRows(append(seen, got...)) == want
	})...)
	eventstest.RequireMatchesLedger(t, pool, all)
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&rows))
	t.Logf("%d events from %d ledger rows, read in small pages while written", len(all), rows)
}

// readAtLeast reads on from after until done says what it read (with
// what came before) is complete.
func readAtLeast(t *testing.T, pool *pgxpool.Pool, after events.Position, done func([]events.Event) bool) []events.Event {
	t.Helper()
	var got []events.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		from := after
		if len(got) > 0 {
			from = got[len(got)-1].Position
		}
		got = append(got, eventstest.ReadAll(c, pool, from)...)
		assert.True(c, done(got), "every ledger row read")
	}, 30*time.Second, 5*time.Millisecond)
	return got
}

// countRows counts the ledger rows events came from.
func countRows(evs []events.Event) int {
	rows := map[[2]uint64]bool{}
	for _, e := range evs {
		rows[[2]uint64{e.Position.Xid, uint64(e.Position.ID)}] = true
	}
	return len(rows)
}

func lastPosition(evs []events.Event) events.Position {
	if len(evs) == 0 {
		return events.Start
	}
	return evs[len(evs)-1].Position
}

func TestPositionRoundTrip(t *testing.T) {
	t.Parallel()
	for _, p := range []events.Position{events.Start, {Xid: 1 << 40, ID: 9_000_000_000, N: 2}, {Xid: 7, ID: 3, N: 1},
		{Xid: 7, ID: 3, N: 3}, {Xid: 7, ID: 3, N: 1<<31 - 1}} { // N from 3: a bundle's stock.low

		got, err := events.ParsePosition(p.String())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	for _, bad := range []string{"", "1-2", "1-2-2147483648", "1-2--1", "a-1-0", "1--1-0", "-1-2-0", "1-2-0-0", "18446744073709551616-1-0"} {
		_, err := events.ParsePosition(bad)
		require.Error(t, err, "%q", bad)
	}
	require.True(t, events.Position{Xid: 2}.After(events.Position{Xid: 1, ID: 99, N: 2}))
	require.True(t, events.Position{Xid: 1, ID: 2}.After(events.Position{Xid: 1, ID: 1, N: 2}))
	require.False(t, events.Position{Xid: 1, ID: 1, N: 1}.After(events.Position{Xid: 1, ID: 1, N: 1}))
}

// TestEventsNameUnits: on a pool of units with an identity, hold.* events
// and stock.changed name the units they moved.
func TestEventsNameUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, inv := setup(t)
	start, err := events.StartNow(ctx, db.New(pool))
	require.NoError(t, err)
	_, _, err = inv.AddUnitsOnce(ctx, idempotency.NewKey("ops", "plan"), stock.UnitsChange{SKU: "SHOW", Reason: "plan", Actor: "ops",
		Units: []stock.UnitSpec{{ID: "A-1"}, {ID: "A-2"}, {ID: "A-3"}}})
	require.NoError(t, err)
	h, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h", Items: []inventory.Item{{SKU: "SHOW", Units: []string{"A-3", "A-1"}}}})
	require.NoError(t, err)
	_, err = inv.ReleaseItems(ctx, h.ID, inventory.Caller{Name: "shop"}, "", []inventory.Item{{SKU: "SHOW", Units: []string{"A-3"}}})
	require.NoError(t, err)

	evs := readN(t, pool, start, 5) // stock.changed (added), hold.created, stock.changed, hold.released, stock.changed
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s %v", e.Type, e.Data["units"]))
	}
	require.Equal(t, []string{
		"stock.changed [A-1 A-2 A-3]",
		"hold.created [A-1 A-3]", "stock.changed [A-1 A-3]",
		"hold.released [A-3]", "stock.changed [A-3]",
	}, got)
}

// TestTransferAndStateEvents: a transfer gives transfer.created (on its
// from location's row), transfer.received and transfer.closed (on its to
// location's row), a cancelled one transfer.cancelled; each step's
// stock.changed names its location and carries every state; a move to
// damaged and a write-off to lost are stock.changed alone. The feed's
// counters walk each (sku, location, pool) to where it is.
func TestTransferAndStateEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, inv := setup(t)
	dbtest.Location(t, pool, "paris", 1)
	dbtest.Location(t, pool, "berlin", 2)
	start, err := events.StartNow(ctx, db.New(pool))
	require.NoError(t, err)
	dbtest.StockInAt(t, pool, "A1", "paris", 10)
	key := func(k string) idempotency.Key { return idempotency.NewKey("ops", k) }
	tr, _, err := inv.CreateTransferOnce(ctx, key("t1"), stock.NewTransfer{SKU: "A1", From: "paris", To: "berlin", Quantity: 6, Reason: "rebalance", Actor: "ops"})
	require.NoError(t, err)
	_, err = inv.ReceiveTransfer(ctx, stock.TransferStep{ID: tr.ID, Quantity: 4, Actor: "bob"})
	require.NoError(t, err)
	_, err = inv.CloseTransfer(ctx, stock.TransferStep{ID: tr.ID, Reason: "lost", Actor: "bob"})
	require.NoError(t, err)
	t2, _, err := inv.CreateTransferOnce(ctx, key("t2"), stock.NewTransfer{SKU: "A1", From: "paris", To: "berlin", Quantity: 1, Reason: "more", Actor: "ops"})
	require.NoError(t, err)
	_, err = inv.CancelTransfer(ctx, stock.TransferStep{ID: t2.ID, Reason: "not needed", Actor: "bob"})
	require.NoError(t, err)
	_, _, err = inv.MoveOnce(ctx, key("m1"), stock.Move{SKU: "A1", Location: "berlin", From: "available", To: "damaged", Quantity: 1, Reason: "dropped", Actor: "ops"})
	require.NoError(t, err)
	_, _, err = inv.MoveOnce(ctx, key("m2"), stock.Move{SKU: "A1", Location: "berlin", From: "damaged", To: "lost", Quantity: 1, Reason: "scrapped", Actor: "ops"})
	require.NoError(t, err)

	// Stock in (1 changed); a transfer (created, 2 changed), its receipt
	// (received, changed) and close (closed, changed); another (created,
	// 2 changed) cancelled (cancelled, 2 changed); two moves (changed).
	all := readN(t, pool, start, 16)
	var own []string
	for _, e := range all {
		if e.Type != events.StockChanged {
			own = append(own, e.Type+"@"+e.Location)
		}
	}
	require.Equal(t, []string{"transfer.created@paris", "transfer.received@berlin", "transfer.closed@berlin",
		"transfer.created@paris", "transfer.cancelled@paris"}, own)
	for _, e := range all {
		if e.Type == events.TransferClosed {
			require.Equal(t, map[string]any{"transfer_id": ptr(tr.ID.String()), "from": ptr("paris"), "to": ptr("berlin"), "quantity": int64(2),
				"actor": "bob", "reason": ptr("lost in transit: lost")}, e.Data)
		}
	}
	berlin := changesOf(all, "A1")
	last := berlin[len(berlin)-1]
	require.Equal(t, "berlin", last.Location)
	after, delta, _ := eventstest.Counters(t, last.Data)
	require.Equal(t, events.Counters{Total: 3, Available: 3}, after, "the write-off leaves 3 at berlin")
	require.Equal(t, events.Counters{Total: -1, Damaged: -1}, delta)
	eventstest.RequireMatchesLedger(t, pool, eventstest.ReadAll(t, pool, events.Start))
}

func ptr(s string) *string { return &s }

// TestInboundEvents: a supplier's notice gives, per line, inbound.created
// when it is expected, inbound.received for each receipt, inbound.closed
// for what a close wrote off, and inbound.cancelled for a cancelled one;
// each names the notice, its supplier reference and expected day, and the
// units of the line the step moved.
func TestInboundEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, inv := setup(t)
	start, err := events.StartNow(ctx, db.New(pool))
	require.NoError(t, err)
	key := func(k string) idempotency.Key { return idempotency.NewKey("ops", k) }
	day := time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly)
	i, _, err := inv.CreateInboundOnce(ctx, key("po"), stock.NewInbound{SupplierRef: "PO-9", ExpectedOn: day, Actor: "ops",
		Lines: []stock.NewInboundLine{{SKU: "A1", Quantity: 5}, {SKU: "B2", Quantity: 2}}})
	require.NoError(t, err)
	_, err = inv.ReceiveInbound(ctx, stock.InboundStep{ID: i.ID, SKU: "A1", Quantity: 3, Actor: "dock"})
	require.NoError(t, err)
	_, err = inv.CloseInbound(ctx, stock.InboundStep{ID: i.ID, Reason: "short", Actor: "dock"})
	require.NoError(t, err)
	c, _, err := inv.CreateInboundOnce(ctx, key("po2"), stock.NewInbound{SupplierRef: "PO-10", ExpectedOn: day, Actor: "ops",
		Lines: []stock.NewInboundLine{{SKU: "B2", Quantity: 1}}})
	require.NoError(t, err)
	_, err = inv.CancelInbound(ctx, stock.InboundStep{ID: c.ID, Reason: "withdrawn", Actor: "dock"})
	require.NoError(t, err)

	// Created (2 lines, 2 changed), received (1, 1 changed), closed (2
	// lines short, 2 changed), created (1, 1) and cancelled (1, 1).
	all := readN(t, pool, start, 14)
	var own []string
	for _, e := range all {
		if e.Type != events.StockChanged {
			own = append(own, e.Type+" "+e.SKU)
		}
	}
	require.Equal(t, []string{"inbound.created A1", "inbound.created B2", "inbound.received A1", "inbound.closed A1", "inbound.closed B2",
		"inbound.created B2", "inbound.cancelled B2"}, own)
	for _, e := range all {
		if e.Type == events.InboundClosed && e.SKU == "A1" {
			require.Equal(t, map[string]any{"inbound_id": ptr(i.ID.String()), "supplier_ref": ptr("PO-9"), "expected_on": ptr(day),
				"quantity": int64(2), "actor": "dock", "reason": ptr("never received: short")}, e.Data)
		}
	}
	eventstest.RequireMatchesLedger(t, pool, eventstest.ReadAll(t, pool, events.Start))
}
