package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "STOCKHOLD_LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	inv := inventory.New(pool, nil, inventory.Config{})
	for _, sku := range []string{"A1", "B1"} {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 10, Actor: "test"})
		require.NoError(t, err)
	}

	reconcile := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"reconcile"}, args...), getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errs := reconcile()
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "2 stock rows checked (deep: every SKU, each against its whole ledger)", "the first run over every SKU is deep")
	require.Contains(t, out, "the books balance")
	code, out, errs = reconcile()
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "2 stock rows checked (every SKU)", "from a clean run's checkpoints, full")

	_, err := pool.Exec(ctx, `UPDATE stock SET available = available - 1, sold = sold + 1 WHERE sku = 'A1'`)
	require.NoError(t, err)
	code, out, errs = reconcile()
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "high risk: 2")
	require.Contains(t, out, "found books out of balance (2 high-risk findings): 2 stock rows checked", "a run that found books out of balance does not say succeeded")
	require.NotContains(t, out, "succeeded")
	require.Contains(t, out, "HIGH RISK")
	require.Contains(t, out, "counters_vs_lines")
	require.Contains(t, out, "counters_vs_ledger")
	require.Contains(t, out, "sku A1/main")
	require.Contains(t, out, "paused; no stock moved")
	t.Logf("stockhold reconcile printed:\n%s", out)

	code, out, errs = reconcile("--sku", "B1")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "1 stock rows checked (SKUs B1)")

	code, out, errs = reconcile("--deep", "--sku", "B1")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "1 stock rows checked (deep: SKUs B1, each against its whole ledger)")
	code, out, errs = reconcile("--deep")
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "2 stock rows checked (deep: every SKU, each against its whole ledger)")
	require.Contains(t, out, "counters_vs_ledger")
	code, _, errs = reconcile("--deep", "--incremental")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "not both")

	code, _, errs = reconcile("now")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "usage")
	code, _, errs = reconcile("--sku", "a/b")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "contains a slash")

	// A SKU with no stock row is refused by name, not reported as balanced.
	runs := dbtest.Count(t, pool, `SELECT count(*) FROM reconcile_runs`)
	code, out, errs = reconcile("--sku", "B1", "--sku", "NOPE")
	require.Equal(t, 2, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, errs, "--sku NOPE: no such SKU")
	require.NotContains(t, out, "the books balance")
	require.Equal(t, runs, dbtest.Count(t, pool, `SELECT count(*) FROM reconcile_runs`), "nothing was run")
}
