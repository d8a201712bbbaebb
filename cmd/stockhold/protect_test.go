package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestStopSaleAndRepairCommands flips stop-sale from the command line and
// repairs a pool's books: a preview first that changes nothing, then the
// repair with --apply, followed by a clean reconciliation.
func TestStopSaleAndRepairCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "STOCKHOLD_LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 10, Actor: "test"})
	require.NoError(t, err)
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	scalar := func(sql string) string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&s))
		return s
	}

	code, _, errs := cmd("stop-sale", "on")
	require.Equal(t, 2, code, "on needs --operator and --reason: %s", errs)
	code, out, errs := cmd("stop-sale", "on", "--operator", "alice", "--reason", "payments down")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "stop-sale ON")
	require.Equal(t, "true alice payments down", scalar(`SELECT active::text || ' ' || actor || ' ' || reason FROM stop_sale`))
	require.NotEmpty(t, scalar(`SELECT coalesce(actor_key, '') FROM stop_sale`), "the database user is recorded as the key")
	_, _, err = inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "k", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.ErrorContains(t, err, "stop_sale")
	code, out, _ = cmd("stop-sale", "status")
	require.Equal(t, 0, code)
	require.Contains(t, out, "payments down")
	code, out, _ = cmd("stop-sale", "off", "--operator", "alice", "--reason", "payments back")
	require.Equal(t, 0, code)
	require.Contains(t, out, "stop-sale off")
	require.Contains(t, out, "lifted: stop-sale ON", "what the flip lifted")
	require.Contains(t, out, "payments down")

	// One channel's sales only: a client is a key owner's name.
	code, _, errs = cmd("stop-sale", "on", "--client", "nobody", "--operator", "alice", "--reason", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no API key was ever named "nobody"`)
	_, err = auth.Create(ctx, pool, "shop-b", auth.RoleShop)
	require.NoError(t, err)
	code, out, errs = cmd("stop-sale", "on", "--client", "shop-b", "--operator", "alice", "--reason", "channel oversells")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "stop-sale for shop-b ON")
	_, _, err = inv.Hold(ctx, inventory.HoldRequest{Client: "shop-b", IdempotencyKey: "b", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.ErrorContains(t, err, "sales to shop-b are stopped (channel oversells)")
	_, _, err = inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "a", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.NoError(t, err, "other clients go on")
	code, out, _ = cmd("stop-sale", "status")
	require.Equal(t, 0, code)
	require.Contains(t, out, "stop-sale off")
	require.Contains(t, out, "stop-sale for shop-b ON")
	code, out, _ = cmd("stop-sale", "off", "--client", "shop-b", "--operator", "alice", "--reason", "fixed")
	require.Equal(t, 0, code)
	require.Contains(t, out, "stop-sale for shop-b off")
	require.Contains(t, out, "lifted: stop-sale for shop-b ON")
	require.Contains(t, out, "channel oversells")

	_, err = pool.Exec(ctx, `UPDATE stock SET total = total + 3, available = available + 3 WHERE sku = 'A1'`)
	require.NoError(t, err)
	code, _, errs = cmd("repair", "--sku", "A1", "--to", "ledger")
	require.Equal(t, 2, code, "%s", errs)
	code, out, errs = cmd("repair", "--sku", "A1", "--to", "ledger", "--operator", "alice", "--reason", "hand edit")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "difference: total -3, available -3, reserved +0, sold +0")
	require.Contains(t, out, "dry run: nothing changed")
	require.Equal(t, "13", scalar(`SELECT total::text FROM stock WHERE sku = 'A1'`))
	code, out, errs = cmd("repair", "--sku", "A1", "--to", "ledger", "--operator", "alice", "--reason", "hand edit", "--ref", "o-1042", "--ref", "OPS-17", "--apply")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "applied")
	require.Contains(t, out, "refs: o-1042, OPS-17")
	require.Equal(t, "{o-1042,OPS-17}", scalar(`SELECT refs::text FROM ledger WHERE kind = 'repair'`))
	require.Contains(t, out, "0 high risk")
	require.Equal(t, "10", scalar(`SELECT total::text FROM stock WHERE sku = 'A1'`))
	require.Equal(t, "alice hand edit", scalar(`SELECT actor || ' ' || reason FROM ledger WHERE kind = 'repair'`))
}

// TestRepairCommandShowsThePromise: a repair of a drifted promise counter
// (backordered) shows it before and after and in the difference, and
// applies it.
func TestRepairCommandShowsThePromise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "STOCKHOLD_LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "PRE", Delta: 2, Actor: "test"})
	require.NoError(t, err)
	_, err = inv.SetBackorders(ctx, stock.Backorders{SKU: "PRE", BelowZero: 5}, "test")
	require.NoError(t, err)
	_, _, err = inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "pre-1", Items: []inventory.Item{{SKU: "PRE", Quantity: 4}}})
	require.NoError(t, err)
	// The promise counter forgets the 2 units promised.
	_, err = pool.Exec(ctx, `UPDATE stock SET backordered = backordered - 2 WHERE sku = 'PRE'`)
	require.NoError(t, err)
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	args := []string{"repair", "--sku", "PRE", "--to", "ledger", "--operator", "alice", "--reason", "promise drift"}
	code, out, errs := cmd(args...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "before:     total 2, available 0, reserved 2, sold 0, backordered 0\n")
	require.Contains(t, out, "after:      total 2, available 0, reserved 2, sold 0, backordered 2\n")
	require.Contains(t, out, "difference: total +0, available +0, reserved +0, sold +0, backordered +2\n")
	code, out, errs = cmd(append(args, "--apply")...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errs)
	require.Contains(t, out, "applied")
	var backordered int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backordered FROM stock WHERE sku = 'PRE'`).Scan(&backordered))
	require.EqualValues(t, 2, backordered)
}
