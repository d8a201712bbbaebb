// Package eventstest checks what a reader of the event feed saw against
// the ledger: for tests only; the binary never imports it.
package eventstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/events"
)

// ReadAll reads every event after after that can be served now.
// t may be an Eventually condition's CollectT: an error fails t and ends
// the read with what it has.
func ReadAll(t assert.TestingT, pool *pgxpool.Pool, after events.Position) []events.Event {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	var out []events.Event
	for {
		page, err := events.Read(context.Background(), db.New(pool), after, events.MaxPage)
		if err != nil {
			assert.Fail(t, "read the event feed", err.Error())
			return out
		}
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		after = page.Next
	}
}

// Counters reads an event's counters: a stock.changed's data, as Read
// makes it or as JSON decodes it.
func Counters(t testing.TB, data map[string]any) (after, delta events.Counters, version int64) {
	t.Helper()
	num := func(v any) int64 {
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
		t.Fatalf("%v (%T) is not a number", v, v)
		return 0
	}
	switch d := data["delta"].(type) {
	case events.Counters:
		delta = d
	case map[string]any:
		delta = countersOf(d, num)
	default:
		t.Fatalf("delta is %T", data["delta"])
	}
	after = countersOf(data, num)
	return after, delta, num(data["version"])
}

func countersOf(d map[string]any, num func(any) int64) events.Counters {
	return events.Counters{Total: num(d["total"]), Available: num(d["available"]), Reserved: num(d["reserved"]), Sold: num(d["sold"]),
		QualityControl: num(d["quality_control"]), Damaged: num(d["damaged"]), SafetyStock: num(d["safety_stock"]), Incoming: num(d["incoming"])}
}

// plus is c moved by d.
func plus(c, d events.Counters) events.Counters {
	return events.Counters{Total: c.Total + d.Total, Available: c.Available + d.Available, Reserved: c.Reserved + d.Reserved,
		Sold: c.Sold + d.Sold, QualityControl: c.QualityControl + d.QualityControl, Damaged: c.Damaged + d.Damaged,
		SafetyStock: c.SafetyStock + d.SafetyStock, Incoming: c.Incoming + d.Incoming}
}

// RequireMatchesLedger checks all, the events a reader saw from the start
// of the feed (those of the database's whole life), against the ledger:
//   - each event once, ids in increasing feed order;
//   - one hold.* event per ledger row of a hold;
//   - per (sku, location, pool), one stock.changed per stock version that moved a
//     counter, in version order, whose deltas walk the counters from zero
//     through each event's counters to the stock row's counters now.
func RequireMatchesLedger(t testing.TB, pool *pgxpool.Pool, all []events.Event) {
	t.Helper()
	ctx := context.Background()
	seen := make(map[string]bool, len(all))
	for i, e := range all {
		require.False(t, seen[e.ID], "event %s seen twice", e.ID)
		seen[e.ID] = true
		p, err := events.ParsePosition(e.ID)
		require.NoError(t, err)
		if i > 0 {
			prev, _ := events.ParsePosition(all[i-1].ID)
			require.True(t, p.After(prev), "event %s after %s", p, prev)
		}
	}
	var holdRows, versions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE reservation_id IS NOT NULL),
		count(DISTINCT (sku, location, pool, stock_version)) FILTER (WHERE delta_total <> 0 OR delta_available <> 0 OR delta_reserved <> 0
		    OR delta_sold <> 0 OR delta_quality_control <> 0 OR delta_damaged <> 0 OR delta_safety_stock <> 0 OR delta_incoming <> 0)
		FROM ledger WHERE feed_xid IS NOT NULL`).Scan(&holdRows, &versions))
	type key struct{ sku, location, pool string }
	walked := map[key]events.Counters{}
	lastVersion := map[key]int64{}
	var holdEvents, changed int
	for _, e := range all {
		k := key{e.SKU, e.Location, e.Pool}
		switch e.Type {
		case events.HoldCreated, events.HoldConfirmed, events.HoldReleased, events.HoldExpired, events.HoldBackorderFilled:
			holdEvents++
			require.NotNil(t, e.ReservationID, "%s %s has its hold", e.Type, e.ID)
		case events.StockChanged:
			changed++
			after, d, v := Counters(t, e.Data)
			c := walked[k]
			c = plus(c, d)
			walked[k] = c
			require.Equal(t, c, after, "%s/%s: the counters of %s are those before it plus its delta", e.SKU, e.Pool, e.ID)
			require.Greater(t, v, lastVersion[k], "%s/%s: stock.changed %s in the order of the row's versions", e.SKU, e.Pool, e.ID)
			lastVersion[k] = v
		}
	}
	require.Equal(t, holdRows, holdEvents, "one hold event per ledger row of a hold")
	require.Equal(t, versions, changed, "one stock.changed per stock version that moved a counter")
	rows, err := db.New(pool).StockExportPage(ctx, db.StockExportPageParams{Lim: 1_000_000})
	require.NoError(t, err)
	for _, s := range rows {
		require.Equal(t, events.Counters{Total: s.Total, Available: s.Available, Reserved: s.Reserved, Sold: s.Sold,
			QualityControl: s.QualityControl, Damaged: s.Damaged, SafetyStock: s.SafetyStock, Incoming: s.Incoming},
			walked[key{s.Sku, s.Location, s.Pool}], "%s/%s/%s: the feed's counters end where the stock row is", s.Sku, s.Location, s.Pool)
	}
}

// WaitServed waits until the feed serves every ledger row committed so far.
// The feed's horizon is the oldest transaction running on the whole
// server, so other packages' tests sharing it hold the horizon back while
// one of their transactions runs (in CI at 02b0460 for over a minute).
// It waits up to five minutes, saying after half a minute which
// transactions hold the horizon back, and names them if it gives up.
func WaitServed(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var (
		xid uint64
		id  int64
	)
	err := pool.QueryRow(ctx, `SELECT feed_xid::text::bigint, id FROM ledger WHERE feed_xid IS NOT NULL
		ORDER BY feed_xid DESC, id DESC LIMIT 1`).Scan(&xid, &id)
	if errors.Is(err, pgx.ErrNoRows) {
		return
	}
	require.NoError(t, err)
	start := time.Now()
	told := false
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows, err := db.New(pool).EventRowsAfter(ctx, xid, id, 1)
		if !assert.NoError(c, err) || len(rows) == 1 {
			return
		}
		held := "(named after half a minute)"
		if waited := time.Since(start); waited > 30*time.Second {
			held, err = blockers(ctx, pool, xid)
			assert.NoError(c, err)
			if !told {
				told = true
				t.Logf("the feed has not served ledger row %d for %s; held back by %s", id, waited.Round(time.Second), held)
			}
		}
		assert.Fail(c, "the newest ledger row is not served", "held back by %s", held)
	}, 5*time.Minute, 5*time.Millisecond)
}

// blockers names the transactions running on the server that began before
// xid: the feed serves nothing at or after the oldest of them. (backend_xid
// is the 32-bit xid, xid the 64-bit one: equal on a test cluster, whose
// epoch is 0.)
func blockers(ctx context.Context, pool *pgxpool.Pool, xid uint64) (string, error) {
	var s string
	err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(format('pid %s in %s (%s, %s, for %s): %s',
			pid, datname, backend_type, state, date_trunc('second', now() - xact_start), left(query, 200)), '; ' ORDER BY xact_start), 'nothing now')
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND backend_xid::text::bigint <= $1`, int64(xid)).Scan(&s)
	return s, err
}
