package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestBackordersCommands sets, reads and removes a SKU's backorder policy
// from the command line, and refuses what the API refuses.
func TestBackordersCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dbtest.StockIn(t, pool, "LAMP", 2)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool)}
	getenv := func(k string) string { return env[k] }
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"backorders"}, args...), getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errs := cmd("set", "--sku", "LAMP", "--below-zero", "5", "--horizon-days", "14", "--operator", "alice")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "LAMP (pool main): promise 5 below zero and what is on its way within 14 days (set by alice)\n"+
		"  default: 0 promised of 5 allowed\n", out)
	code, out, errs = cmd("show", "--sku", "LAMP")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "promise 5 below zero")
	code, _, errs = cmd("set", "--sku", "LAMP", "--operator", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "allows nothing")
	code, _, errs = cmd("set", "--sku", "NOPE", "--below-zero", "1", "--operator", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "has no stock")
	code, out, errs = cmd("clear", "--sku", "LAMP")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "no backorder policy")
	code, _, errs = cmd("show", "--sku", "LAMP")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "has no backorder policy")
	for _, args := range [][]string{{}, {"set", "--sku", "LAMP", "--below-zero", "1"}, {"show"}, {"drop", "--sku", "LAMP"}} {
		code, _, _ := cmd(args...)
		require.Equal(t, 2, code, "%v", args)
	}
}
