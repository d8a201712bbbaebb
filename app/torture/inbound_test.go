package torture_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// Supplier inbound. The supplier records notices of one or two of the
// placed SKUs at a location, due within a month, and sees them through
// while every other path races their rows: lines received in parts (now
// and then one unit more than a line expects, which must be refused),
// then the notice closed short, received whole, cancelled before any
// receipt, or left open for the end to find. Checked at the end: every
// acknowledged notice is in the database as its last answer said (or
// further along), and each of those paths ran; the books (incoming against
// the transfers in transit and the open lines) are checked with every
// other invariant.

// inboundNote is what the last acknowledged answer about a notice said.
type inboundNote struct {
	status   string
	received map[string]int64 // by SKU
}

// inboundAnswer is a notice as the API answers it, as far as the torture
// test reads it.
type inboundAnswer struct {
	ID     uuid.UUID `json:"id"`
	Status string    `json:"status"`
	Lines  []struct {
		SKU         string `json:"sku"`
		Received    int64  `json:"received"`
		Outstanding int64  `json:"outstanding"`
	} `json:"lines"`
}

// supplier records notices and sees them through.
func (tr *torture) supplier(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 250*time.Millisecond) {
		loc := places[r.IntN(len(places))]
		var lines []any
		for _, k := range r.Perm(len(placed))[:1+r.IntN(2)] {
			lines = append(lines, map[string]any{"sku": placed[k], "quantity": 1 + r.IntN(6)})
		}
		status, b := tr.do("inbound", "POST", "/v1/inbound", tr.ops, map[string]any{"supplier_ref": tr.name("PO"), "location": loc,
			"expected_on": time.Now().UTC().AddDate(0, 0, r.IntN(30)).Format(time.DateOnly), "lines": lines},
			"Idempotency-Key", tr.name("inbound"))
		if status != 201 {
			continue
		}
		n, ok := tr.noteInbound(b)
		if !ok || !pace(ctx, r, 300*time.Millisecond) {
			continue
		}
		path := "/v1/inbound/" + n.ID.String()
		p := []int{0, 4, 7, 9}[pick(r, 4, 3, 2, 1)]
		p = map[string]int{"inbound received": 0, "inbound closed short": 4, "inbound cancelled": 7, "": p}[tr.firstOwed("", nil,
			"inbound received", "inbound closed short", "inbound cancelled")]
		switch {
		case p < 7:
			whole := p < 4
			for _, l := range n.Lines {
				q := l.Outstanding
				if !whole {
					q = int64(r.IntN(int(l.Outstanding))) // 0: nothing of it came
				}
				if q == 0 {
					continue
				}
				if r.IntN(5) == 0 {
					over := map[string]any{"sku": l.SKU, "quantity": l.Outstanding + 1}
					if status, b := tr.do("inbound over-receipt", "POST", path+"/receive", tr.ops, over); status != 409 {
						tr.t.Errorf("a receipt of more than a line expects answered %d: %s", status, b)
					}
				}
				status, b = tr.do("inbound receive", "POST", path+"/receive", tr.ops, map[string]any{"sku": l.SKU, "quantity": q},
					"Idempotency-Key", tr.name("inbound-rcv"))
				if status == 200 {
					tr.noteInbound(b)
				}
			}
			if whole {
				if status == 200 {
					tr.done("inbound received")
				}
				continue
			}
			status, b = tr.do("inbound close", "POST", path+"/close", tr.ops, map[string]any{"reason": "supplier short"})
			if status == 200 {
				tr.noteInbound(b)
				tr.done("inbound closed short")
			}
		case p < 9:
			status, b = tr.do("inbound cancel", "POST", path+"/cancel", tr.ops, map[string]any{"reason": "order withdrawn"})
			if status == 200 {
				tr.noteInbound(b)
				tr.done("inbound cancelled")
			}
		}
	}
}

// noteInbound keeps what an acknowledged answer said about a notice.
func (tr *torture) noteInbound(b []byte) (inboundAnswer, bool) {
	var a inboundAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		tr.t.Errorf("inbound answer: %v: %s", err, b)
		return a, false
	}
	n := inboundNote{status: a.Status, received: map[string]int64{}}
	for _, l := range a.Lines {
		n.received[l.SKU] = l.Received
	}
	tr.mu.Lock()
	tr.inbound[a.ID] = n
	tr.mu.Unlock()
	return a, true
}

// checkInbound: every acknowledged notice is as answered, or further
// along (a step answered lost to a timeout); never back.
func (tr *torture) checkInbound(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for id, want := range tr.inbound {
		var status string
		require.NoError(t, tr.pool.QueryRow(ctx, `SELECT status FROM inbound WHERE id = $1`, id).Scan(&status))
		if want.status != "open" && status != want.status {
			t.Errorf("inbound %s answered %s, is %s", id, want.status, status)
		}
		for sku, received := range want.received {
			got := dbtest.Count(t, tr.pool, `SELECT received FROM inbound_lines WHERE inbound_id = $1 AND sku = $2`, id, sku)
			if int64(got) < received || (want.status != "open" && int64(got) != received) {
				t.Errorf("inbound %s: line %s answered %d received, has %d", id, sku, received, got)
			}
		}
	}
}

// reportInbound fails the run if one of the inbound paths never ran.
func (tr *torture) reportInbound(t *testing.T) {
	t.Helper()
	for what, query := range map[string]string{
		"ledger rows of kind inbound":         `SELECT count(*) FROM ledger WHERE kind = 'inbound'`,
		"ledger rows of kind inbound_receive": `SELECT count(*) FROM ledger WHERE kind = 'inbound_receive'`,
		"ledger rows of kind inbound_short":   `SELECT count(*) FROM ledger WHERE kind = 'inbound_short'`,
		"ledger rows of kind inbound_cancel":  `SELECT count(*) FROM ledger WHERE kind = 'inbound_cancel'`,
		"notices received whole":              `SELECT count(*) FROM inbound WHERE status = 'received'`,
	} {
		n := dbtest.Count(t, tr.pool, query)
		t.Logf("torture: %s: %d", what, n)
		if n == 0 {
			t.Errorf("torture: no %s: that path never ran", what)
		}
	}
}
