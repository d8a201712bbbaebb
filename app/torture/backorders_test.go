package torture_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Preorders and backorders: a SKU of its own, a little on hand, a
// supplier's notices due within days and a backorder policy the
// backorderer changes all the time (below zero, a horizon, none at all;
// a change below what is promised is refused). Preorderers hold past
// what is on hand on both instances, lines named or allocated, then
// confirm, release, release part of or let the hold expire, while the
// backorderer receives the notices in parts (filling confirmed promises
// first) and records new ones. Every checkpoint's invariants prove the
// promise counter against the lines, the ledger and the policy (the
// CHECK refuses anything past it); the end requires that holds were
// promised units, that receipts filled some, and that the policy was
// both changed and refused.

const backorderSKU = "TB"

// setupBackorders stocks the SKU, expects a delivery and sets a policy.
func (tr *torture) setupBackorders() {
	tr.mustStatus(200, "POST", "/v1/skus/"+backorderSKU+"/adjustments", tr.ops,
		map[string]any{"delta": 4, "reason": "torture stock", "ref": "start-" + backorderSKU}, "Idempotency-Key", "start-"+backorderSKU)
	tr.mustStatus(200, "PUT", "/v1/skus/"+backorderSKU+"/backorders", tr.ops, map[string]any{"below_zero": 3, "horizon_days": 7})
}

// backorderer keeps the SKU's notices coming in, receives them in parts,
// and sets the policy again and again. While a fill is owed (no receipt
// has filled a promise yet, or none a confirmed one) and something is
// promised, it receives rather than changes the policy.
func (tr *torture) backorderer(ctx context.Context, r *rand.Rand) {
	var open []uuid.UUID
	for pace(ctx, r, 200*time.Millisecond) {
		choice := pick(r, 3, 4, 2, 1)
		if tr.backorderFillOwed() {
			choice = 1
		}
		if choice == 3 && tr.owed("backorder promise") {
			choice = 0 // keep the policy until a hold was promised units
		}
		if choice == 1 && len(open) == 0 {
			choice = 0
		}
		switch choice {
		case 0:
			status, b := tr.do("backorder notice", "POST", "/v1/inbound", tr.ops, map[string]any{"supplier_ref": tr.name("PO-B"),
				"expected_on": time.Now().UTC().AddDate(0, 0, r.IntN(10)).Format(time.DateOnly),
				"lines":       []any{map[string]any{"sku": backorderSKU, "quantity": 2 + r.IntN(8)}}}, "Idempotency-Key", tr.name("inbound-b"))
			var a inboundAnswer
			if status == 201 && json.Unmarshal(b, &a) == nil {
				open = append(open, a.ID)
			}
		case 1:
			id := open[r.IntN(len(open))]
			status, b := tr.do("backorder receive", "POST", "/v1/inbound/"+id.String()+"/receive", tr.ops,
				map[string]any{"sku": backorderSKU, "quantity": 1 + r.IntN(3)}, "Idempotency-Key", tr.name("inbound-b-rcv"))
			var a inboundAnswer
			if status == 409 || (status == 200 && json.Unmarshal(b, &a) == nil && a.Status != "open") {
				open = remove(open, id) // received whole, or asked for more than it still expects
			}
		case 2:
			body := map[string]any{"below_zero": r.IntN(5)}
			if r.IntN(3) > 0 {
				body["horizon_days"] = []int{0, 3, 7}[r.IntN(3)]
			}
			tr.do("backorders set", "PUT", "/v1/skus/"+backorderSKU+"/backorders", tr.ops, body)
		case 3:
			tr.do("backorders delete", "DELETE", "/v1/skus/"+backorderSKU+"/backorders", tr.ops, nil)
		}
	}
}

// backorderFillOwed reports whether a receipt is owed a fill (of a
// promise, or of a confirmed hold's promise) and the SKU has units
// promised now for it to fill.
func (tr *torture) backorderFillOwed() bool {
	if !tr.owed("backorder fill") && !tr.owed("backorder fill confirmed") {
		return false
	}
	var promised int64
	err := tr.pool.QueryRow(context.Background(), `SELECT coalesce(sum(backordered), 0) FROM stock WHERE sku = $1`, backorderSKU).Scan(&promised)
	return err == nil && promised > 0
}

func remove(ids []uuid.UUID, id uuid.UUID) []uuid.UUID {
	out := ids[:0]
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// preorderer holds the SKU past what is on hand, and ends the hold as a
// shopper does. While no promise was given, it asks for more; while no
// receipt filled a confirmed hold's promise, it confirms a hold that was
// promised units at once.
func (tr *torture) preorderer(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 60*time.Millisecond) {
		n := 1 + r.IntN(4)
		if tr.owed("backorder promise") {
			n += 4
		}
		item := map[string]any{"sku": backorderSKU, "quantity": n}
		if r.IntN(2) == 0 {
			item["location"] = "default"
		}
		body := map[string]any{"ttl_seconds": 1 + r.IntN(4), "items": []any{item}}
		status, b := tr.doOn(r.IntN(2), "preorder hold", "POST", "/v1/reservations", tr.shop, body, "Idempotency-Key", tr.name("pre"))
		if status != 201 {
			continue
		}
		var h reservation
		if err := json.Unmarshal(b, &h); err != nil {
			tr.t.Errorf("preorder hold answer: %v: %s", err, b)
			continue
		}
		tr.mu.Lock()
		tr.holds[h.ID] = true
		tr.mu.Unlock()
		promised := false
		for _, it := range h.Items {
			promised = promised || it.Backordered > 0
		}
		choice := pick(r, 40, 25, 10, 25)
		if promised && tr.owed("backorder fill confirmed") {
			choice = 0
		} else if !pace(ctx, r, 400*time.Millisecond) {
			return
		}
		path := "/v1/reservations/" + h.ID.String()
		switch choice {
		case 0:
			if status, _ := tr.do("preorder confirm", "POST", path+"/confirm", tr.shop, nil); status == 200 {
				tr.mu.Lock()
				tr.confirmed[h.ID] = true
				tr.mu.Unlock()
			}
		case 1:
			tr.release(tr.shop, path, h.ID, map[string]any{"reason": "cancelled"}, "preorder release")
		case 2:
			tr.release(tr.shop, path, h.ID, map[string]any{"items": []any{map[string]any{"sku": backorderSKU, "quantity": 1}}},
				"preorder partial release", "Idempotency-Key", tr.name("pre-part"))
		} // else: it expires
	}
}

// reportBackorders requires that holds were promised units, receipts
// filled some, and the policy was set, and refused below what was
// promised.
func (tr *torture) reportBackorders(t *testing.T) {
	t.Helper()
	for _, what := range []string{"backorder promise", "backorder fill", "backorder fill confirmed", "backorder given back"} {
		var n int
		if err := tr.pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger WHERE `+inLedger[what]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		t.Logf("torture: ledger rows of %s: %d", what, n)
		if n == 0 {
			t.Errorf("torture: no %s: that path never ran", what)
		}
	}
	for _, k := range []string{"preorder hold 201", "backorders set 200", "backorder receive 200"} {
		if tr.outcomes[k] == 0 {
			t.Errorf("torture: no %q answer: the backorders' paths did not run", k)
		}
	}
	t.Logf("torture: backorder policy set %d, refused below what was promised %d, removed %d",
		tr.outcomes["backorders set 200"], tr.outcomes["backorders set 422"], tr.outcomes["backorders delete 204"])
}

// checkBackorderLedger, with no traffic, reads the SKU's ledger as GET
// /v1/skus/{sku}/ledger serves it, every page back to the first (past
// the archive's carried balance, the rows it kept from the database), and
// requires that it explains every promised unit: summed per stock row, delta_backordered is the row's
// backordered as GET /v1/skus/{sku} answers it; per hold, what was given
// back or filled is never more than what was promised; and every
// receipt's fill the ledger holds is in it.
func (tr *torture) checkBackorderLedger(t *testing.T) {
	t.Helper()
	type movement struct {
		Location         string     `json:"location"`
		Pool             string     `json:"pool"`
		Kind             string     `json:"kind"`
		DeltaBackordered int64      `json:"delta_backordered"`
		ReservationID    *uuid.UUID `json:"reservation_id"`
	}
	served := map[string]int64{}
	promised, ended := map[uuid.UUID]int64{}, map[uuid.UUID]int64{}
	fills := 0
	add := func(m movement) {
		served[m.Location+"/"+m.Pool] += m.DeltaBackordered
		if m.ReservationID != nil && m.DeltaBackordered > 0 {
			promised[*m.ReservationID] += m.DeltaBackordered
		} else if m.ReservationID != nil {
			ended[*m.ReservationID] -= m.DeltaBackordered
		}
		if m.Kind == "backorder_fill" && m.DeltaBackordered < 0 {
			fills++
		}
	}
	for cursor := ""; ; {
		status, b := tr.doAgain("backorder ledger", "GET", "/v1/skus/"+backorderSKU+"/ledger?limit=1000"+cursor, tr.ops, nil)
		if status == 410 {
			// Below the cursor, the ledger keeps rows the archive did not
			// carry (of holds it did not close) that the API serves no
			// more: they are read here.
			below, err := strconv.ParseInt(strings.TrimPrefix(cursor, "&cursor="), 10, 64)
			require.NoError(t, err)
			rows, err := tr.plain.Query(context.Background(), `SELECT location, pool, kind, delta_backordered, reservation_id FROM ledger
				WHERE sku = $1 AND id < $2`, backorderSKU, below)
			require.NoError(t, err)
			for rows.Next() {
				var m movement
				require.NoError(t, rows.Scan(&m.Location, &m.Pool, &m.Kind, &m.DeltaBackordered, &m.ReservationID))
				add(m)
			}
			require.NoError(t, rows.Err())
			break
		}
		require.Equal(t, 200, status, "%s", b)
		var page struct {
			Movements  []movement `json:"movements"`
			NextCursor *string    `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(b, &page))
		for _, m := range page.Movements {
			add(m)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	status, b := tr.doAgain("backorder stock", "GET", "/v1/skus/"+backorderSKU, tr.ops, nil)
	require.Equal(t, 200, status, "%s", b)
	var st struct {
		Pools []struct {
			Location    string `json:"location"`
			Pool        string `json:"pool"`
			Backordered int64  `json:"backordered"`
		} `json:"pools"`
	}
	require.NoError(t, json.Unmarshal(b, &st))
	rows := map[string]int64{}
	for _, p := range st.Pools {
		rows[p.Location+"/"+p.Pool] = p.Backordered
	}
	for k, n := range served {
		if n != rows[k] {
			t.Errorf("backorders: the served ledger of %s/%s sums to %d promised, the row has %d", backorderSKU, k, n, rows[k])
		}
	}
	for k, n := range rows {
		if _, ok := served[k]; !ok && n != 0 {
			t.Errorf("backorders: %s/%s has %d promised and no movement in the served ledger", backorderSKU, k, n)
		}
	}
	for id, n := range ended {
		if n > promised[id] {
			t.Errorf("backorders: hold %s: the served ledger gives back or fills %d promised units of %d", id, n, promised[id])
		}
	}
	// A run whose fills all came before the archive's cut has them in the
	// archive (its carried balance is served): every fill the ledger
	// (tr.plain) still holds must be served, and the whole history
	// (tr.pool reads archives and ledger) must have some.
	var kept, all int64
	require.NoError(t, tr.plain.QueryRow(context.Background(), `SELECT count(*) FROM ledger
		WHERE sku = $1 AND kind = 'backorder_fill' AND delta_backordered < 0`, backorderSKU).Scan(&kept))
	require.NoError(t, tr.pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger
		WHERE sku = $1 AND kind = 'backorder_fill' AND delta_backordered < 0`, backorderSKU).Scan(&all))
	if int64(fills) != kept {
		t.Errorf("backorders: the served ledger has %d backorder_fill movements, the ledger %d", fills, kept)
	}
	if all == 0 {
		t.Errorf("backorders: no backorder_fill in the whole history (archives and ledger)")
	}
	t.Logf("torture: served ledger of %s: %d holds promised units, %d fills", backorderSKU, len(promised), fills)
}

// settleBackorders, with no traffic, takes the promise's paths a short
// run missed (on a loaded machine receipts can land units before any hold
// needs a promise), as a shop and an operator would: a hold of one more
// than is on hand, its confirm, and a receipt of one that fills it. The
// checks that follow then prove those rows like any other.
func (tr *torture) settleBackorders(t *testing.T) {
	t.Helper()
	if !tr.owed("backorder promise") && !tr.owed("backorder fill") && !tr.owed("backorder fill confirmed") {
		return
	}
	var available, promised int64
	require.NoError(t, tr.plain.QueryRow(context.Background(), `SELECT coalesce(sum(available), 0), coalesce(sum(backordered), 0)
		FROM stock WHERE sku = $1 AND pool = 'main'`, backorderSKU).Scan(&available, &promised))
	tr.mustStatus(200, "PUT", "/v1/skus/"+backorderSKU+"/backorders", tr.ops, map[string]any{"below_zero": promised + 3, "horizon_days": 7})
	b := tr.mustStatus(201, "POST", "/v1/reservations", tr.shop,
		map[string]any{"items": []any{map[string]any{"sku": backorderSKU, "quantity": available + 1}}}, "Idempotency-Key", tr.name("settle-pre"))
	var h struct {
		ID uuid.UUID `json:"id"`
	}
	require.NoError(t, json.Unmarshal(b, &h))
	tr.mustStatus(200, "POST", "/v1/reservations/"+h.ID.String()+"/confirm", tr.shop, nil)
	b = tr.mustStatus(201, "POST", "/v1/inbound", tr.ops, map[string]any{"supplier_ref": tr.name("PO-settle"),
		"expected_on": time.Now().UTC().Format(time.DateOnly), "lines": []any{map[string]any{"sku": backorderSKU, "quantity": 1}}},
		"Idempotency-Key", tr.name("inbound-settle"))
	var n inboundAnswer
	require.NoError(t, json.Unmarshal(b, &n))
	tr.mustStatus(200, "POST", "/v1/inbound/"+n.ID.String()+"/receive", tr.ops,
		map[string]any{"sku": backorderSKU, "quantity": 1}, "Idempotency-Key", tr.name("inbound-settle-rcv"))
	t.Logf("torture: settle promised and filled one unit of %s (%d on hand), the run had not", backorderSKU, available)
}
