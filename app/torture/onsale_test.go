package torture_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// An on-sale: seat holds on a venue large enough that a hold
// whose cost grew with the venue would show, and SKUs sold out, asked for
// after they are gone (refused from the instance's memory), and restocked.

// stadium is the large venue: 200 rows of 100 seats, the first five the
// most wanted.
var stadium = func() venue {
	v := venue{sku: "STADIUM", perRow: 100, front: 5}
	for row := 1; row <= 200; row++ {
		v.rows = append(v.rows, fmt.Sprintf("S%03d", row))
	}
	return v
}()

// setupStadium puts the stadium's 20,000 seats on sale, 10,000 a request.
func (tr *torture) setupStadium(t *testing.T) {
	t.Helper()
	var plan []map[string]any
	chunk := 0
	flush := func() {
		chunk++
		tr.mustStatus(200, "POST", "/v1/skus/"+stadium.sku+"/units", tr.ops, map[string]any{"reason": "torture stadium", "units": plan},
			"Idempotency-Key", fmt.Sprintf("start-%s-%d", stadium.sku, chunk))
		plan = plan[:0]
	}
	for i, row := range stadium.rows {
		for p := 1; p <= stadium.perRow; p++ {
			plan = append(plan, map[string]any{"id": fmt.Sprintf("%s-%d", row, p), "group": row, "position": p})
		}
		if (i+1)%100 == 0 {
			flush()
		}
	}
	if len(plan) > 0 {
		flush()
	}
}

// sellout sells a small SKU out; asks on for it after it is gone (refused
// by the batch, then from memory); retries a request that was granted (its
// first answer, never a refusal); then restocks it through this instance:
// the very next hold is granted, whatever memory knew. The holds it makes
// expire, or are released, confirmed, and the SKU restocked again.
func (tr *torture) sellout(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 100*time.Millisecond) {
		sku := tr.name("SOLD")
		in := func(n int) (string, bool) {
			ref := tr.name("restock")
			status, _ := tr.do("sellout restock", "POST", "/v1/skus/"+sku+"/adjustments", tr.ops,
				map[string]any{"delta": n, "reason": "torture sell-out", "ref": ref}, "Idempotency-Key", ref)
			if status == 200 {
				tr.mu.Lock()
				tr.refs = append(tr.refs, ref)
				tr.mu.Unlock()
			}
			return ref, status == 200
		}
		var answer []byte // the last hold's answer, for the report
		hold := func(op, key string, body map[string]any) (int, reservation) {
			status, b := tr.do(op, "POST", "/v1/reservations", tr.shop, body, "Idempotency-Key", key)
			answer = b
			var h reservation
			if status == 201 {
				if err := json.Unmarshal(b, &h); err != nil {
					tr.t.Errorf("%s answer: %v: %s", op, err, b)
				}
				tr.mu.Lock()
				tr.holds[h.ID] = true
				tr.recent = append(tr.recent, h.ID)
				tr.mu.Unlock()
			}
			return status, h
		}
		body := func() map[string]any {
			return map[string]any{"order_ref": tr.name("sold"), "ttl_seconds": 1 + r.IntN(3),
				"items": []any{map[string]any{"sku": sku, "quantity": 1}}}
		}
		if _, ok := in(1 + r.IntN(3)); !ok {
			continue
		}
		var (
			firstKey  string
			firstBody map[string]any
			first     reservation
			gone      bool
		)
		for range 40 {
			key, b := tr.name("sold-hold"), body()
			status, h := hold("sellout hold", key, b)
			if status == 201 && firstKey == "" {
				firstKey, firstBody, first = key, b, h
			}
			if status == 409 {
				gone = true
				break
			}
		}
		if !gone || firstKey == "" {
			continue
		}
		// After it is gone: refused, by the batch and then from memory.
		for range 5 + r.IntN(20) {
			hold("sellout refused", tr.name("sold-hold"), body())
		}
		// A retry of a granted request: its first answer.
		if status, again := hold("sellout replay", firstKey, firstBody); status == 409 || status == 201 && again.ID != first.ID {
			tr.t.Errorf("a retry of hold %s on sold-out %s answered %d (hold %s)", first.ID, sku, status, again.ID)
		}
		// This instance restocks: the very next hold is not refused, unless
		// something took the unit first (a late payer's reinstate of one of
		// this SKU's expired holds may).
		ref, ok := in(1)
		if !ok {
			continue
		}
		status, _ := hold("sellout after restock", tr.name("sold-hold"), body())
		if status != 409 {
			continue
		}
		var taken []string
		err := tr.pool.QueryRow(context.WithoutCancel(ctx), `SELECT coalesce(array_agg(kind || ' ' || coalesce(reservation_id::text, '')), '{}')
			FROM ledger WHERE sku = $1 AND delta_available < 0
			AND id > (SELECT id FROM ledger WHERE sku = $1 AND ref = $2)`, sku, ref).Scan(&taken)
		switch {
		case err != nil:
			tr.t.Errorf("reading what took %s's restocked unit: %v", sku, err)
		case len(taken) > 0:
			tr.mu.Lock()
			tr.outcomes["sellout restock taken first"]++
			tr.mu.Unlock()
		default:
			tr.t.Errorf("a hold on %s was refused right after this instance restocked it, and nothing took the unit: %s", sku, answer)
		}
	}
}
