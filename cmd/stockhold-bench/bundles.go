package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
)

// bundleKits is how many bundles the bundles scenario defines, each of
// three of the catalogue's SKUs.
const bundleKits = 100

// bundles: every client holds one of bundleKits bundles, each of three
// catalogue SKUs one apiece, then (same run, same clients) the same three
// SKUs as a three-line hold; the ratio is the bundle's rate against the
// multi-line hold's: what expanding a bundle and taking its components
// from one location cost.
func (b *bench) bundles(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	if b.o.catalogue < 3*bundleKits {
		return nil, fmt.Errorf("bundles needs a catalogue of at least %d SKUs", 3*bundleKits)
	}
	kit := func(k int) [3]string {
		return [3]string{spreadSKU(3 * k), spreadSKU(3*k + 1), spreadSKU(3*k + 2)}
	}
	bundleBodies := make([][]byte, bundleKits)
	multiBodies := make([][]byte, bundleKits)
	for k := range bundleKits {
		sku := fmt.Sprintf("kit-%s-%03d", b.run, k)
		c := kit(k)
		def := fmt.Sprintf(`{"components":[{"sku":%q,"quantity":1},{"sku":%q,"quantity":1},{"sku":%q,"quantity":1}],"reason":"bench"}`, c[0], c[1], c[2])
		if _, err := b.call("PUT", "/v1/bundles/"+sku, b.ops, "", []byte(def), http.StatusOK); err != nil {
			return nil, fmt.Errorf("define bundle %s: %w", sku, err)
		}
		bundleBodies[k] = holdBody(0, "", sku)
		multiBodies[k] = holdBody(0, "", c[0], c[1], c[2])
	}
	run := func(name string, bodies [][]byte) *result {
		r := &result{Scenario: name, Clients: b.o.clients}
		t := &tally{}
		el := b.closedLoop(ctx, name, b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
			return b.hold(fmt.Sprintf("%s-%s-%d-%d", name, b.run, w, i), bodies[rand.IntN(len(bodies))])
		})
		t.fill(r, el)
		r.RSS = b.rss.reset()
		return r
	}
	multi := run("bundles (multi-line)", multiBodies)
	kits := run("bundles", bundleBodies)
	if multi.Rate > 0 {
		kits.figure("vs_multi_line", kits.Rate/multi.Rate)
	}
	kits.Note = fmt.Sprintf("a bundle of 3 components: %.0f holds/s, %.2fx the same 3 SKUs as a 3-line hold (%.0f holds/s) in this run",
		kits.Rate, kits.Figures["vs_multi_line"], multi.Rate)
	return []*result{multi, kits}, nil
}
