package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestLimitsCommands walks the limits commands: set (a pack size, a cap
// per order, one per customer over a window), show, a set that replaces
// them, clear; and what they refuse: a SKU without stock, a cap not a
// multiple of the pack size, a window without its cap, a missing
// operator, a pool with no limits left.
func TestLimitsCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	cmd, ok := commandsOn(t, pool)
	refused := refusedBy(t, cmd)
	dbtest.StockIn(t, pool, "TEA", 120)

	out := ok("limits", "set", "--sku", "TEA", "--step", "6", "--max-per-order", "12", "--max-per-customer", "24",
		"--customer-window", "24h", "--operator", "alice")
	require.Regexp(t, `^TEA \(pool main\): max_per_order 12, step 6, max_per_customer 24 per 24h0m0s; set by alice at \S+Z\n$`, out)
	require.Equal(t, out, ok("limits", "show", "--sku", "TEA"))
	var step, perCustomer, window *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT step, max_per_customer, customer_window_seconds FROM sku_limits
		WHERE sku = 'TEA' AND pool = 'main'`).Scan(&step, &perCustomer, &window))
	require.Equal(t, [3]int64{6, 24, 86400}, [3]int64{*step, *perCustomer, *window})

	require.Regexp(t, `^TEA \(pool main\): min_per_order 6; set by bob at `, ok("limits", "set", "--sku", "TEA", "--min-per-order", "6", "--operator", "bob"))
	refused(1, `SKU "NOPE" (pool main) has no limits`, "limits", "show", "--sku", "NOPE")
	refused(1, "max_per_order (10) is not a multiple of step (6)", "limits", "set", "--sku", "TEA", "--step", "6", "--max-per-order", "10", "--operator", "bob")
	refused(1, "customer_window_seconds is the window of max_per_customer", "limits", "set", "--sku", "TEA", "--step", "6", "--customer-window", "1h", "--operator", "bob")
	refused(2, "limits set needs --operator", "limits", "set", "--sku", "TEA", "--step", "6")
	refused(2, "not a duration in whole seconds", "limits", "set", "--sku", "TEA", "--max-per-customer", "2", "--customer-window", "1.5s", "--operator", "bob")
	require.Regexp(t, `min_per_order 6; set by bob`, ok("limits", "show", "--sku", "TEA"), "what was refused changed nothing")

	require.Equal(t, "TEA (pool main): no limits\n", ok("limits", "clear", "--sku", "TEA"))
	refused(1, "has no limits", "limits", "clear", "--sku", "TEA")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM sku_limits`))
}
