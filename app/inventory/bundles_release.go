package inventory

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stockhold/stockhold/app/domain"
)

// A partial release of a bundle line, by bundle quantity.
//
// A hold holds a bundle as its component lines (bundles.go). A partial
// release names the bundle and how many of it to give back, never a
// component: releasing 1 of 3 gift boxes (a mug and two coasters each)
// gives back 1 mug and 2 coasters, every component in the one change
// (one transaction, a release_partial ledger row per component line), and
// the lines left say 2 boxes. A split component held at several
// locations gives back from the last of its lines (in lock order) first.
// What a shop cannot ask, each 422 changing nothing:
//
//   - a component of a bundle line alone (a box without its coasters is
//     no box: release the box);
//   - more of the bundle than the hold holds;
//   - a location for the bundle (its components say where they are);
//   - units of a bundle, or the bundle by quantity when a component is
//     held as units with an identity (which seats go would be the
//     service's choice): release the hold whole instead.
//
// Giving back every one of a bundle's units takes its lines out of the
// hold, as a partial release takes out any line it gives back whole.

// bundleGive is want (a partial release's items, by giveKey) with each
// item naming a bundle line of the hold (lines) turned into what it gives
// back of the bundle's components, and how many of each bundle it gives
// back (nil: none).
func bundleGive(lines []Line, want map[string]giveBack) (map[string]giveBack, map[string]int64, error) {
	bundles := map[string]*BundleLine{} // bundle SKU -> its line
	of := map[string]string{}           // component SKU -> its bundle
	for _, l := range lines {
		if l.Bundle != nil {
			bundles[l.Bundle.SKU], of[l.SKU] = l.Bundle, l.Bundle.SKU
		}
	}
	if len(bundles) == 0 {
		return want, nil, nil
	}
	out := make(map[string]giveBack, len(want))
	var released map[string]int64
	for _, k := range slices.Sorted(maps.Keys(want)) {
		sku, location, _ := strings.Cut(k, "\x00")
		w := want[k]
		if b := of[sku]; b != "" {
			return nil, nil, domain.Invalid("SKU %q is held for bundle %q (%d of it): a component is not released alone; "+
				"release the bundle by its quantity (items: [{\"sku\": %q, \"quantity\": 1}] gives back one of it, every component)",
				sku, b, bundles[b].Quantity, b)
		}
		b := bundles[sku]
		if b == nil {
			out[k] = w
			continue
		}
		switch {
		case location != "":
			return nil, nil, domain.Invalid("SKU %q is a bundle: release it by its quantity, without a location (its components' lines say where they are)", sku)
		case len(w.units) > 0:
			return nil, nil, domain.Invalid("SKU %q is a bundle: release it by its quantity, not units", sku)
		case w.quantity > b.Quantity:
			return nil, nil, domain.Invalid("items release %d of bundle %q, this hold holds %d of it", w.quantity, sku, b.Quantity)
		}
		for _, comp := range componentLines(lines, sku) {
			total := int64(0)
			for _, l := range comp {
				if len(l.Units) > 0 {
					return nil, nil, domain.Invalid("bundle %q's component %q is held as units with an identity: "+
						"a bundle of it is released whole (release the hold), not by quantity", sku, l.SKU)
				}
				total += l.Quantity
			}
			if total%b.Quantity != 0 {
				return nil, nil, fmt.Errorf("bundle %q: component %q holds %d for %d bundles", sku, comp[0].SKU, total, b.Quantity)
			}
			give := w.quantity * (total / b.Quantity)
			for i := len(comp) - 1; i >= 0 && give > 0; i-- {
				n := min(give, comp[i].Quantity)
				out[giveKey(comp[i].SKU, comp[i].Location)] = giveBack{quantity: n}
				give -= n
			}
		}
		if released == nil {
			released = map[string]int64{}
		}
		released[sku] = w.quantity
	}
	return out, released, nil
}

// componentLines is the lines held for bundle sku, by component, each
// component's lines in the order of lines (lock order).
func componentLines(lines []Line, sku string) [][]Line {
	var out [][]Line
	at := map[string]int{}
	for _, l := range lines {
		if l.Bundle == nil || l.Bundle.SKU != sku {
			continue
		}
		i, ok := at[l.SKU]
		if !ok {
			i = len(out)
			at[l.SKU] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], l)
	}
	return out
}
