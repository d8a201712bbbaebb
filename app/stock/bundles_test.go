package stock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

func TestBundleDefinitions(t *testing.T) {
	svc, _ := setup(t, nil)
	ctx := context.Background()
	for _, sku := range []string{"MUG", "COASTER"} {
		_, err := svc.Adjust(ctx, stock.Adjustment{SKU: sku, Pool: stock.MainPool, Location: "default", Delta: 10, Reason: "restock", Actor: "ops"})
		require.NoError(t, err)
	}
	box := stock.Bundle{SKU: "BOX", Reason: "gift box", Components: []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "COASTER", Quantity: 2, Split: true}}}
	b, err := svc.SetBundle(ctx, box, "alice")
	require.NoError(t, err)
	require.Equal(t, int64(1), b.Version)
	require.Equal(t, "alice", b.SetBy)

	box.Components[1].Quantity = 4
	b, err = svc.SetBundle(ctx, box, "bob")
	require.NoError(t, err)
	require.Equal(t, int64(2), b.Version)
	got, err := svc.GetBundle(ctx, "BOX")
	require.NoError(t, err)
	require.Equal(t, []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "COASTER", Quantity: 4, Split: true}}, got.Components)
	require.Equal(t, int64(2), got.Version)

	// Deleted and set again, it goes on from its last version.
	require.NoError(t, svc.DeleteBundle(ctx, "BOX"))
	_, err = svc.GetBundle(ctx, "BOX")
	require.Equal(t, domain.CodeNotFound, code(err))
	require.Equal(t, domain.CodeNotFound, code(svc.DeleteBundle(ctx, "BOX")))
	b, err = svc.SetBundle(ctx, box, "alice")
	require.NoError(t, err)
	require.Equal(t, int64(3), b.Version)
}

// TestBundleRefusals: every bad definition is refused with a clear 4xx
// code and changes nothing.
func TestBundleRefusals(t *testing.T) {
	svc, _ := setup(t, nil)
	ctx := context.Background()
	for _, sku := range []string{"MUG", "COASTER"} {
		_, err := svc.Adjust(ctx, stock.Adjustment{SKU: sku, Pool: stock.MainPool, Location: "default", Delta: 10, Reason: "restock", Actor: "ops"})
		require.NoError(t, err)
	}
	_, err := svc.SetBundle(ctx, stock.Bundle{SKU: "BOX", Reason: "gift box", Components: []stock.Component{{SKU: "MUG", Quantity: 1}}}, "ops")
	require.NoError(t, err)
	many := make([]stock.Component, stock.MaxBundleComponents+1)
	for i := range many {
		many[i] = stock.Component{SKU: fmt.Sprintf("S%d", i), Quantity: 1}
	}
	one := func(sku string, q int64) []stock.Component { return []stock.Component{{SKU: sku, Quantity: q}} }
	for _, tc := range []struct {
		name  string
		b     stock.Bundle
		code  domain.Code
		sku   string
		bound bool
	}{
		{"itself", stock.Bundle{SKU: "KIT", Reason: "r", Components: one("KIT", 1)}, domain.CodeInvalid, "KIT", false},
		{"through another bundle", stock.Bundle{SKU: "MUG2", Reason: "r", Components: one("BOX", 1)}, domain.CodeInvalid, "MUG2", false},
		{"a bundle as a component", stock.Bundle{SKU: "KIT", Reason: "r", Components: one("BOX", 1)}, domain.CodeInvalid, "KIT", false},
		{"no such component", stock.Bundle{SKU: "KIT", Reason: "r", Components: one("NOPE", 1)}, domain.CodeUnknownSKU, "KIT", false},
		{"zero", stock.Bundle{SKU: "KIT", Reason: "r", Components: one("MUG", 0)}, domain.CodeInvalid, "KIT", false},
		{"negative", stock.Bundle{SKU: "KIT", Reason: "r", Components: one("MUG", -2)}, domain.CodeInvalid, "KIT", false},
		{"too many", stock.Bundle{SKU: "KIT", Reason: "r", Components: many}, domain.CodeInvalid, "KIT", false},
		{"twice", stock.Bundle{SKU: "KIT", Reason: "r", Components: []stock.Component{{SKU: "MUG", Quantity: 1}, {SKU: "MUG", Quantity: 2}}}, domain.CodeInvalid, "KIT", false},
		{"none", stock.Bundle{SKU: "KIT", Reason: "r"}, domain.CodeInvalid, "KIT", false},
		{"no reason", stock.Bundle{SKU: "KIT", Components: one("MUG", 1)}, domain.CodeInvalid, "KIT", false},
		{"a SKU with stock", stock.Bundle{SKU: "COASTER", Reason: "r", Components: one("MUG", 1)}, domain.CodeInvalid, "COASTER", false},
		{"a component of a bundle", stock.Bundle{SKU: "MUG", Reason: "r", Components: one("COASTER", 1)}, domain.CodeInvalid, "MUG", false},
		{"an existing bundle made to nest", stock.Bundle{SKU: "BOX", Reason: "r", Components: one("BOX", 1)}, domain.CodeInvalid, "BOX", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.SetBundle(ctx, tc.b, "ops")
			require.Equal(t, tc.code, code(err), "%v", err)
			got, gerr := svc.GetBundle(ctx, tc.sku)
			if tc.bound {
				require.NoError(t, gerr)
				require.Equal(t, int64(1), got.Version, "a refusal changes nothing")
				return
			}
			require.Equal(t, domain.CodeNotFound, code(gerr), "a refusal defines nothing")
		})
	}
}

// TestBundleRacesTheFirstStock races, for each of many new SKUs, its
// definition as a bundle against an adjustment that would give it its
// first stock: exactly one of the two wins, never both (a bundle with
// stock of its own), and the loser is refused as such.
func TestBundleRacesTheFirstStock(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, nil)
	ctx := context.Background()
	_, err := svc.Adjust(ctx, stock.Adjustment{SKU: "MUG", Pool: stock.MainPool, Location: "default", Delta: 10, Reason: "restock", Actor: "ops"})
	require.NoError(t, err)
	const n = 40
	defined, stocked := make([]error, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sku := fmt.Sprint("NEW-", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, defined[i] = svc.SetBundle(ctx, stock.Bundle{SKU: sku, Reason: "kit", Components: []stock.Component{{SKU: "MUG", Quantity: 1}}}, "ops")
		}()
		go func() {
			defer wg.Done()
			_, stocked[i] = svc.Adjust(ctx, stock.Adjustment{SKU: sku, Pool: stock.MainPool, Location: "default", Delta: 1, Reason: "first", Actor: "ops"})
		}()
	}
	wg.Wait()
	for i := range n {
		sku := fmt.Sprint("NEW-", i)
		var isBundle, hasStock bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bundles WHERE sku = $1), EXISTS (SELECT 1 FROM stock WHERE sku = $1)`,
			sku).Scan(&isBundle, &hasStock))
		require.NotEqual(t, isBundle, hasStock, "%s: a bundle or stock, never both nor neither", sku)
		if isBundle {
			require.NoError(t, defined[i])
			_, refused := dberr.BundleStock(stocked[i])
			require.True(t, refused, "%s: the adjustment is refused as a bundle's stock: %v", sku, stocked[i])
			continue
		}
		require.NoError(t, stocked[i])
		require.Equal(t, domain.CodeInvalid, code(defined[i]), "%s: %v", sku, defined[i])
	}
}
