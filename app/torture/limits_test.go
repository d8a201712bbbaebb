package torture_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Limits per hold and per customer, and partial lines: customers hold a
// SKU of its own (on both instances, lines named to their location or
// allocated, some partial) under max_per_customer 2 in a window of 3
// seconds, then confirm, release, release part of or let the hold
// expire, while the limit setter changes the SKU's other limits
// (max_per_order, min_per_order, step) all the time. At every checkpoint
// no customer's holds made in the window hold or bought more than 2 units
// of it. The SKU's stock runs low, so partial lines take less than they
// ask.

const (
	limitSKU        = "TL"
	maxPerCustomer  = 2
	customerWindow  = 3 // seconds
	limitsCustomers = 3
)

// setupLimits stocks the SKU and sets its cap per customer.
func (tr *torture) setupLimits(t *testing.T) {
	t.Helper()
	tr.mustStatus(200, "POST", "/v1/skus/"+limitSKU+"/adjustments", tr.ops,
		map[string]any{"delta": 40, "reason": "torture stock", "ref": "start-" + limitSKU}, "Idempotency-Key", "start-"+limitSKU)
	tr.mustStatus(200, "PUT", "/v1/skus/"+limitSKU+"/limits", tr.ops, map[string]any{"max_per_customer": maxPerCustomer,
		"customer_window_seconds": customerWindow})
}

// limitSetter sets the SKU's limits again and again, its cap per
// customer always the same, now and then with a limit per hold that
// refuses some of the customers' holds; some sets are refused (a step
// that does not divide the maximum).
func (tr *torture) limitSetter(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 300*time.Millisecond) {
		body := map[string]any{"max_per_customer": maxPerCustomer, "customer_window_seconds": customerWindow}
		switch r.IntN(4) {
		case 1:
			body["max_per_order"] = 1
		case 2:
			body["min_per_order"], body["max_per_order"] = 2, 2
		case 3:
			body["step"], body["max_per_order"] = 2, 1+r.IntN(2) // 1: refused
		}
		tr.do("limits set", "PUT", "/v1/skus/"+limitSKU+"/limits", tr.ops, body)
	}
}

// customer holds the SKU for one of a few customers, and ends the hold
// as a shopper does.
func (tr *torture) customer(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 40*time.Millisecond) {
		item := map[string]any{"sku": limitSKU, "quantity": 1 + r.IntN(2)}
		if r.IntN(2) == 0 {
			item["location"] = "default"
		}
		if r.IntN(3) == 0 {
			item["partial"] = true
		}
		body := map[string]any{"customer_ref": "cust-" + string(rune('a'+r.IntN(limitsCustomers))), "ttl_seconds": 1 + r.IntN(3),
			"items": []any{item}}
		status, b := tr.doOn(r.IntN(2), "customer hold", "POST", "/v1/reservations", tr.shop, body, "Idempotency-Key", tr.name("cust"))
		if status != 201 {
			continue
		}
		var h reservation
		if err := json.Unmarshal(b, &h); err != nil {
			tr.t.Errorf("customer hold answer: %v: %s", err, b)
			continue
		}
		tr.mu.Lock()
		tr.holds[h.ID] = true
		if item["partial"] != nil && unitsHeld(h) < int64(item["quantity"].(int)) {
			tr.outcomes["customer hold partly"]++
		}
		tr.mu.Unlock()
		if !pace(ctx, r, 300*time.Millisecond) {
			return
		}
		path := "/v1/reservations/" + h.ID.String()
		switch pick(r, 30, 30, 15, 25) {
		case 0:
			if status, _ := tr.do("customer confirm", "POST", path+"/confirm", tr.shop, nil); status == 200 {
				tr.mu.Lock()
				tr.confirmed[h.ID] = true
				tr.mu.Unlock()
			}
		case 1:
			tr.release(tr.shop, path, h.ID, map[string]any{"reason": "cancelled"}, "customer release")
		case 2:
			tr.release(tr.shop, path, h.ID, map[string]any{"items": []any{map[string]any{"sku": limitSKU, "quantity": 1}}},
				"customer partial release", "Idempotency-Key", tr.name("cust-part"))
		} // else: it expires
	}
}

// checkCustomers fails the test for a customer whose held and confirmed
// holds made in the window have more units of the SKU than
// max_per_customer: the last of them to commit counted the others.
func (tr *torture) checkCustomers(t *testing.T, when string) {
	t.Helper()
	rows, err := tr.pool.Query(context.Background(), `
		SELECT r.customer_ref, sum(l.quantity) FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
		WHERE r.customer_ref IS NOT NULL AND l.sku = $1 AND r.status IN ('held', 'confirmed')
		  AND r.created_at > now() - interval '1 second' * $3
		GROUP BY 1 HAVING sum(l.quantity) > $2`, limitSKU, maxPerCustomer, customerWindow)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var (
			customer string
			units    int64
		)
		require.NoError(t, rows.Scan(&customer, &units))
		t.Errorf("%s: customer %s holds or bought %d units of %s, over max_per_customer %d", when, customer, units, limitSKU, maxPerCustomer)
	}
	require.NoError(t, rows.Err())
}

// reportLimits requires that customers were granted holds and refused at
// their cap, and that limits were set.
func (tr *torture) reportLimits(t *testing.T) {
	t.Helper()
	for _, k := range []string{"customer hold 201", "customer hold 422", "limits set 200"} {
		if tr.outcomes[k] == 0 {
			t.Errorf("torture: no %q answer: the limits' paths did not run", k)
		}
	}
	t.Logf("torture: customer holds: %d granted (%d partial lines given less than asked), %d refused over a limit",
		tr.outcomes["customer hold 201"], tr.outcomes["customer hold partly"], tr.outcomes["customer hold 422"])
}
