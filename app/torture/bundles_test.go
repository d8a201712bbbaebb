package torture_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// Bundles: bundlers hold a kit (a mug and two coasters, at two
// locations) and ticket types sharing one quota, on both instances, then
// confirm, release or let the hold expire, while the kit's definition is
// set again and again (its coasters split or not) and the bundles'
// low-stock thresholds are set and removed. At every checkpoint every
// held or bought bundle line has each component of the version it used,
// its quantity times the component's, and its components that are not
// split at one location; and each bundle is low where it has a threshold
// exactly when what it makes there is at or below it.

const (
	bundleKit   = "TB-KIT"
	bundleMug   = "TB-MUG"
	bundleCoast = "TB-COASTER"
	bundleQuota = "TB-QUOTA"
)

var bundleTickets = []string{"TB-ADULT", "TB-CHILD", "TB-SENIOR"}

// setupBundles stocks the components and defines the bundles.
func (tr *torture) setupBundles(t *testing.T) {
	t.Helper()
	for _, s := range []struct {
		sku, location string
		n             int
	}{{bundleMug, "default", 30}, {bundleCoast, "default", 40}, {bundleMug, places[1], 20}, {bundleCoast, places[1], 60}, {bundleQuota, "default", 60}} {
		tr.mustStatus(200, "POST", "/v1/skus/"+s.sku+"/adjustments", tr.ops,
			map[string]any{"location": s.location, "delta": s.n, "reason": "torture stock", "ref": "start-" + s.sku + "@" + s.location},
			"Idempotency-Key", "start-"+s.sku+"@"+s.location)
	}
	tr.setKit(false)
	for _, ticket := range bundleTickets {
		tr.mustStatus(200, "PUT", "/v1/bundles/"+ticket, tr.ops, map[string]any{"reason": "torture quota",
			"components": []any{map[string]any{"sku": bundleQuota, "quantity": 1}}})
	}
}

// setKit defines the kit, its coasters split or not.
func (tr *torture) setKit(split bool) (int, []byte) {
	return tr.do("bundle set", "PUT", "/v1/bundles/"+bundleKit, tr.ops, map[string]any{"reason": "torture kit", "components": []any{
		map[string]any{"sku": bundleMug, "quantity": 1}, map[string]any{"sku": bundleCoast, "quantity": 2, "split": split}}})
}

// bundleSetter sets the kit's definition again and again, and the
// bundles' low-stock thresholds (the kit's at either location, a ticket
// type's) or removes one.
func (tr *torture) bundleSetter(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 400*time.Millisecond) {
		if r.IntN(2) == 0 {
			tr.setKit(r.IntN(2) == 0)
			continue
		}
		sku, location := bundleKit, "default"
		switch r.IntN(3) {
		case 1:
			location = places[1]
		case 2:
			sku = bundleTickets[r.IntN(len(bundleTickets))]
		}
		var threshold any = r.IntN(25)
		if r.IntN(5) == 0 {
			threshold = nil
		}
		tr.do("bundle threshold", "PUT", "/v1/skus/"+sku+"/threshold", tr.ops, map[string]any{"location": location, "threshold": threshold})
	}
}

// bundler holds the kit or a ticket type, and ends the hold as a shopper
// does.
func (tr *torture) bundler(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 40*time.Millisecond) {
		sku := bundleKit
		if r.IntN(2) == 0 {
			sku = bundleTickets[r.IntN(len(bundleTickets))]
		}
		item := map[string]any{"sku": sku, "quantity": 1 + r.IntN(3)}
		if sku == bundleKit && r.IntN(4) == 0 {
			item["location"] = places[1]
		}
		body := map[string]any{"ttl_seconds": 1 + r.IntN(3), "items": []any{item}}
		status, b := tr.doOn(r.IntN(2), "bundle hold", "POST", "/v1/reservations", tr.shop, body, "Idempotency-Key", tr.name("bundle"))
		if status != 201 {
			continue
		}
		var h reservation
		if err := json.Unmarshal(b, &h); err != nil {
			tr.t.Errorf("bundle hold answer: %v: %s", err, b)
			continue
		}
		tr.mu.Lock()
		tr.holds[h.ID] = true
		tr.mu.Unlock()
		if !pace(ctx, r, 300*time.Millisecond) {
			return
		}
		path := "/v1/reservations/" + h.ID.String()
		switch pick(r, 40, 35, 25) {
		case 0:
			if status, _ := tr.do("bundle confirm", "POST", path+"/confirm", tr.shop, nil); status == 200 {
				tr.mu.Lock()
				tr.confirmed[h.ID] = true
				tr.mu.Unlock()
			}
		case 1:
			tr.release(tr.shop, path, h.ID, map[string]any{"reason": "cancelled"}, "bundle release")
		} // else: it expires
	}
}

// checkBundles fails the test for a held or bought bundle line that does
// not hold what its definition's version says: each component, the line's
// quantity times the component's, the components not split at one
// location.
func (tr *torture) checkBundles(t *testing.T, when string) {
	t.Helper()
	rows, err := tr.pool.Query(context.Background(), `
		WITH got AS (
			SELECT l.reservation_id, l.bundle_sku, l.bundle_quantity, l.bundle_version, l.sku,
			       sum(l.quantity) AS quantity, count(DISTINCT l.location) AS locations
			FROM reservation_lines l JOIN reservations r ON r.id = l.reservation_id
			WHERE l.bundle_sku IS NOT NULL AND r.status IN ('held', 'confirmed')
			GROUP BY 1, 2, 3, 4, 5
		), wanted AS (
			SELECT DISTINCT g.reservation_id, g.bundle_sku, g.bundle_quantity, g.bundle_version, c.sku, c.quantity * g.bundle_quantity AS quantity, c.split
			FROM got g JOIN bundle_components c ON c.bundle_sku = g.bundle_sku AND c.version = g.bundle_version
		)
		SELECT coalesce(w.reservation_id, g.reservation_id)::text, coalesce(w.bundle_sku, g.bundle_sku), coalesce(w.sku, g.sku),
		       coalesce(w.quantity, 0), coalesce(g.quantity, 0), coalesce(g.locations, 0), coalesce(w.split, false)
		FROM wanted w FULL JOIN got g ON g.reservation_id = w.reservation_id AND g.bundle_sku = w.bundle_sku AND g.sku = w.sku
		WHERE w.quantity IS DISTINCT FROM g.quantity OR (NOT w.split AND g.locations > 1)`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var (
			id, bundle, sku   string
			wanted, got, locs int64
			split             bool
		)
		require.NoError(t, rows.Scan(&id, &bundle, &sku, &wanted, &got, &locs, &split))
		t.Errorf("%s: hold %s's bundle line %s holds %d of %s at %d locations (split %v), its definition %d", when, id, bundle, got, sku, locs, split, wanted)
	}
	require.NoError(t, rows.Err())
	// Every change to a component decides at its commit whether its
	// bundles crossed their threshold, one such commit at a time: in any
	// one snapshot a bundle is low where what it makes is at or below the
	// threshold, and not elsewhere.
	off, err := tr.pool.Query(context.Background(), `SELECT t.sku, t.location, t.threshold, t.low, bundle_available(t.sku, t.location)
		FROM bundle_thresholds t JOIN bundles d ON d.sku = t.sku
		WHERE t.low <> (bundle_available(t.sku, t.location) <= t.threshold)`)
	require.NoError(t, err)
	defer off.Close()
	for off.Next() {
		var (
			sku, location        string
			threshold, available int64
			low                  bool
		)
		require.NoError(t, off.Scan(&sku, &location, &threshold, &low, &available))
		t.Errorf("%s: bundle %s at %s makes %d, threshold %d, but is low %v", when, sku, location, available, threshold, low)
	}
	require.NoError(t, off.Err())
}

// reportBundles requires that bundles were held and their definition
// set again.
func (tr *torture) reportBundles(t *testing.T) {
	t.Helper()
	for _, k := range []string{"bundle hold 201", "bundle set 200", "bundle threshold 200"} {
		if tr.outcomes[k] == 0 {
			t.Errorf("torture: no %q answer: the bundles' paths did not run", k)
		}
	}
	t.Logf("torture: bundle holds: %d granted, %d refused out of stock; %d definitions set, %d thresholds set; %d stock.low of bundles",
		tr.outcomes["bundle hold 201"], tr.outcomes["bundle hold 409"], tr.outcomes["bundle set 200"], tr.outcomes["bundle threshold 200"],
		dbtest.Count(t, tr.pool, `SELECT count(*) FROM bundle_lows`))
}
