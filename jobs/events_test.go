package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/stockcsv"
)

// feedReader pulls the event feed from a cursor, as a consumer does.
type feedReader struct {
	b     *bundle
	after events.Position
	// seen counts the events expect has returned.
	seen int
}

// next reads every event after the reader's cursor that can be served now.
// t may be an Eventually condition's CollectT: an error fails t and ends
// the read with what it has.
func (r *feedReader) next(t assert.TestingT) []events.Event {
	var out []events.Event
	for {
		page, err := events.Read(context.Background(), db.New(r.b.pool), r.after, 1000)
		if err != nil {
			assert.Fail(t, "read the event feed", err.Error())
			return out
		}
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		r.after = page.Next
	}
}

// summary is "type sku/pool" per event, what most steps compare.
func summary(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type + " " + e.SKU + "/" + e.Pool
	}
	return out
}

// expect waits until the feed has served exactly want since the last step
// (for work done by jobs, which take a moment) and returns those events.
func (r *feedReader) expect(t *testing.T, step string, want ...string) []events.Event {
	t.Helper()
	var got []events.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got = append(got, r.next(c)...)
		assert.Equal(c, want, summary(got), "%s: the events so far", step)
	}, 30*time.Second, 20*time.Millisecond, step)
	require.Empty(t, summary(r.next(t)), "%s: no more events", step)
	r.seen += len(got)
	return got
}

// TestEveryFlowProducesItsEvents drives every flow that moves stock or
// holds (a single, a bulk and a CSV adjustment, a hold, a confirm, a
// partial and a full release, an expiry, a pause and a resume, a
// campaign's start and end with its rollback, a manual rollback) and reads
// the feed after each: each produces its events, in order, with the
// counters the stock row had after it, and a low-stock threshold is
// crossed once per crossing.
func TestEveryFlowProducesItsEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &setupOpts{rollbackPause: 10 * time.Millisecond})
	r := &feedReader{b: b}
	shop := inventory.Caller{Name: "shop"}
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow() // the steps share the feed: a failed one ends the scenario
		}
	}
	hold := func(t *testing.T, key string, campaign string, items ...inventory.Item) inventory.Reservation {
		t.Helper()
		h, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: key, OrderRef: "o-" + key, Campaign: campaign, Items: items})
		require.NoError(t, err)
		return h
	}
	stockOf := func(t *testing.T, sku, pool string) stock.Pool {
		t.Helper()
		st, err := b.inv.GetStock(ctx, sku)
		require.NoError(t, err)
		for _, p := range st.Pools {
			if p.Pool == pool {
				return p
			}
		}
		t.Fatalf("no pool %s/%s", sku, pool)
		return stock.Pool{}
	}
	requireCounters := func(t *testing.T, e events.Event, p stock.Pool) {
		t.Helper()
		require.Equal(t, events.StockChanged, e.Type)
		require.EqualValues(t, p.Total, e.Data["total"])
		require.EqualValues(t, p.Available, e.Data["available"])
		require.EqualValues(t, p.Reserved, e.Data["reserved"])
		require.EqualValues(t, p.Sold, e.Data["sold"])
	}

	var h2, h4 inventory.Reservation
	step("a single adjustment", func(t *testing.T) {
		_, err := b.inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 10, Actor: "alice", Reason: "restock"})
		require.NoError(t, err)
		got := r.expect(t, "adjust", "stock.changed A1/main")
		requireCounters(t, got[0], stockOf(t, "A1", "main"))
		require.Equal(t, events.Counters{Total: 10, Available: 10}, got[0].Data["delta"])
		require.Nil(t, got[0].ReservationID)
	})

	step("a threshold is no event, a bulk adjustment one per pool", func(t *testing.T) {
		four := int64(4)
		_, err := b.inv.SetThreshold(ctx, stock.Threshold{SKU: "A1", Threshold: &four, Actor: "alice"})
		require.NoError(t, err)
		five := int64(5)
		_, err = b.inv.AdjustMany(ctx, stock.BulkAdjustment{Actor: "alice", Reason: "count", Lines: []stock.BulkLine{
			{SKU: "B2", SetTotal: &five}, {SKU: "A1", Delta: 2},
		}})
		require.NoError(t, err)
		got := r.expect(t, "bulk adjustment", "stock.changed A1/main", "stock.changed B2/main")
		requireCounters(t, got[0], stockOf(t, "A1", "main"))
		requireCounters(t, got[1], stockOf(t, "B2", "main"))
	})

	step("a CSV import", func(t *testing.T) {
		f, err := stockcsv.Parse("restock.csv", []byte("sku,pool,delta\nC3,,7\n"))
		require.NoError(t, err)
		_, err = (&stockcsv.Importer{Pool: b.pool, ID: "restock.csv", Actor: "alice"}).Import(ctx, f)
		require.NoError(t, err)
		got := r.expect(t, "csv import", "stock.changed C3/main")
		requireCounters(t, got[0], stockOf(t, "C3", "main"))
	})

	step("a hold of two SKUs, then its confirm", func(t *testing.T) {
		h1 := hold(t, "h1", "", inventory.Item{SKU: "B2", Quantity: 1}, inventory.Item{SKU: "A1", Quantity: 2})
		got := r.expect(t, "hold", "hold.created A1/main", "stock.changed A1/main", "hold.created B2/main", "stock.changed B2/main")
		require.Equal(t, h1.ID, *got[0].ReservationID)
		require.EqualValues(t, 2, got[0].Data["quantity"])
		require.Equal(t, "o-h1", *got[0].Data["order_ref"].(*string))
		require.Equal(t, "shop", *got[0].Data["client"].(*string))
		requireCounters(t, got[1], stockOf(t, "A1", "main"))
		require.Nil(t, got[1].ReservationID, "a pool's change is no one hold's")
		_, err := b.inv.Confirm(ctx, h1.ID, shop)
		require.NoError(t, err)
		got = r.expect(t, "confirm", "hold.confirmed A1/main", "stock.changed A1/main", "hold.confirmed B2/main", "stock.changed B2/main")
		requireCounters(t, got[1], stockOf(t, "A1", "main"))
		require.Equal(t, events.Counters{Reserved: -2, Sold: 2}, got[1].Data["delta"])
	})

	step("a hold down to the threshold crosses it", func(t *testing.T) {
		// A1: 10 available, threshold 4.
		h2 = hold(t, "h2", "", inventory.Item{SKU: "A1", Quantity: 6})
		got := r.expect(t, "hold to the threshold", "hold.created A1/main", "stock.changed A1/main", "stock.low A1/main")
		require.EqualValues(t, 4, got[2].Data["threshold"])
		require.EqualValues(t, 4, got[2].Data["available"])
	})

	step("a partial release, then the rest", func(t *testing.T) {
		_, err := b.inv.ReleaseItems(ctx, h2.ID, shop, "changed my mind", []inventory.Item{{SKU: "A1", Quantity: 2}})
		require.NoError(t, err)
		got := r.expect(t, "partial release", "hold.released A1/main", "stock.changed A1/main")
		require.Equal(t, true, got[0].Data["partial"])
		require.EqualValues(t, 2, got[0].Data["quantity"])
		require.Equal(t, "release_partial", got[0].Data["ledger_kind"])
		requireCounters(t, got[1], stockOf(t, "A1", "main"))
		_, err = b.inv.Release(ctx, h2.ID, shop, "")
		require.NoError(t, err)
		got = r.expect(t, "release", "hold.released A1/main", "stock.changed A1/main")
		require.Equal(t, false, got[0].Data["partial"])
		require.EqualValues(t, 4, got[0].Data["quantity"])
	})

	step("a second crossing, then its expiry", func(t *testing.T) {
		h3 := hold(t, "h3", "", inventory.Item{SKU: "A1", Quantity: 7})
		r.expect(t, "second crossing", "hold.created A1/main", "stock.changed A1/main", "stock.low A1/main")
		_, err := b.pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, h3.ID)
		require.NoError(t, err)
		got := r.expect(t, "expiry", "hold.expired A1/main", "stock.changed A1/main")
		require.Contains(t, []string{"system:expire_holds", "system:sweep_expired"}, got[0].Data["actor"])
	})

	step("a new crossing, then a hold that stays under the threshold sends no second stock.low", func(t *testing.T) {
		h4 = hold(t, "h4", "", inventory.Item{SKU: "A1", Quantity: 6})
		r.expect(t, "crossing", "hold.created A1/main", "stock.changed A1/main", "stock.low A1/main")
		hold(t, "h5", "", inventory.Item{SKU: "A1", Quantity: 1})
		r.expect(t, "still low", "hold.created A1/main", "stock.changed A1/main")
	})

	step("the protection switch", func(t *testing.T) {
		_, err := b.inv.Pause(ctx, stock.SwitchRequest{SKU: "A1", Reason: "audit", Actor: "alice"})
		require.NoError(t, err)
		_, err = b.inv.Lift(ctx, stock.Lift{SwitchRequest: stock.SwitchRequest{SKU: "A1", Reason: "audit done", Actor: "alice"}})
		require.NoError(t, err)
		got := r.expect(t, "pause and resume", "stock.paused A1/main", "stock.resumed A1/main")
		require.Equal(t, "audit", *got[0].Data["reason"].(*string))
	})

	step("a manual rollback", func(t *testing.T) {
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := b.rollbacks.CreateTx(ctx, tx, rollbacks.Request{
				Operator: "alice", Reason: "fraud", Source: rollbacks.SourceCLI, Scope: rollbacks.Scope{ReservationIDs: []uuid.UUID{h4.ID}},
			})
			return err
		}))
		got := r.expect(t, "manual rollback", "hold.released A1/main", "stock.changed A1/main")
		require.Equal(t, "rollback", got[0].Data["ledger_kind"])
		require.Equal(t, "alice", got[0].Data["actor"])
	})

	step("a campaign's start, hold and end", func(t *testing.T) {
		// A campaign: its start moves the allotment (a transfer pair), a hold
		// draws from its pool, its end pauses the pool, rolls the hold back
		// and moves what is left back to main.
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := b.campaigns.CreateTx(ctx, tx, campaigns.Request{
				ID: "bf", StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour), HoldTTLSeconds: 60, Actor: "alice",
				Allotments: []campaigns.Allotment{{SKU: "B2", Quantity: 3}},
			})
			return err
		}))
		r.expect(t, "campaign start", "stock.changed B2/bf", "stock.changed B2/main")
		hold(t, "h6", "bf", inventory.Item{SKU: "B2", Quantity: 1})
		r.expect(t, "campaign hold", "hold.created B2/bf", "stock.changed B2/bf")
		_, err := b.campaigns.End(ctx, "bf", "alice", "sold out early")
		require.NoError(t, err)
		r.expect(t, "campaign end", "stock.paused B2/bf", "hold.released B2/bf", "stock.changed B2/bf",
			"stock.changed B2/bf", "stock.changed B2/main")
		requireCounters(t, r.lastChanged(t, "B2", "main"), stockOf(t, "B2", "main"))
	})

	step("every event once, in feed order, with ids that are cursors", func(t *testing.T) {
		all := (&feedReader{b: b}).next(t)
		seen := map[string]bool{}
		for i, e := range all {
			require.False(t, seen[e.ID], "event %s twice", e.ID)
			seen[e.ID] = true
			p, err := events.ParsePosition(e.ID)
			require.NoError(t, err)
			require.Equal(t, e.Position, p)
			if i > 0 {
				require.True(t, p.After(all[i-1].Position), "%s after %s", p, all[i-1].Position)
			}
		}
		require.Len(t, all, r.seen)
		eventstest.RequireMatchesLedger(t, b.pool, all)
	})
}

// lastChanged returns the newest stock.changed of (sku, pool) in the feed.
func (r *feedReader) lastChanged(t *testing.T, sku, pool string) events.Event {
	t.Helper()
	var last *events.Event
	for _, e := range (&feedReader{b: r.b}).next(t) {
		if e.Type == events.StockChanged && e.SKU == sku && e.Pool == pool {
			e := e
			last = &e
		}
	}
	require.NotNil(t, last, "no stock.changed for %s/%s", sku, pool)
	return *last
}
