package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reports"
	"github.com/stockhold/stockhold/app/stock"
)

// TestReportCommand prints today's report as a table and as JSON, and
// refuses a missing or malformed date and an unknown time zone.
func TestReportCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "STOCKHOLD_LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	inv := inventory.New(pool, nil, inventory.Config{})
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 10, Reason: "restock", Actor: "alice"})
	require.NoError(t, err)
	r, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "k", Items: []inventory.Item{{SKU: "A1", Quantity: 3}}})
	require.NoError(t, err)
	_, err = inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	// A hold past what is on hand: 1 held, 2 promised.
	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "PRE", Delta: 1, Reason: "first stock", Actor: "alice"})
	require.NoError(t, err)
	_, err = inv.SetBackorders(ctx, stock.Backorders{SKU: "PRE", BelowZero: 2}, "alice")
	require.NoError(t, err)
	_, _, err = inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "pre", Items: []inventory.Item{{SKU: "PRE", Quantity: 3}}})
	require.NoError(t, err)
	// Written off, counted, sent to paris: every kind has its column.
	dbtest.Location(t, pool, "paris", 1)
	key := func(k string) idempotency.Key { return idempotency.NewKey("ops", k) }
	_, _, err = inv.MoveOnce(ctx, key("off"), stock.Move{SKU: "A1", From: stock.StateAvailable, To: stock.StateLost, Quantity: 2, Reason: "broken", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.CountOnce(ctx, key("count"), stock.StockCount{SKU: "A1", Counted: 4, Reason: "stocktake", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.CreateTransferOnce(ctx, key("send"), stock.NewTransfer{SKU: "A1", From: "default", To: "paris", Quantity: 1, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	var today string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`).Scan(&today))

	code, out, errs := cmd("report", "--date", today)
	require.Equal(t, 0, code, "%s%s", out, errs)
	require.Contains(t, out, "Daily report "+today+" (UTC)")
	require.Regexp(t, `(?m)^ +held +confirmed +released +expired +rolled back +adjusted +transferred +moved +written off +counted +sent +in transit +received +lost in transit +cancelled +shortfall +sold short +repairs *$`, out)
	require.Regexp(t, `(?m)^ +all +4 +3 +0 +0 +0 +11 +0 +0 +2 +-1 +1 +1 +0 +0 +0 +0 +0 +0 *$`, out)
	require.Regexp(t, `(?m)^ +location default +4 +3 +0 +0 +0 +11 +0 +0 +2 +-1 +1 +0 +0 +0 +0 +0 +0 +0 *$`, out)
	require.Regexp(t, `(?m)^ +A1 \(main\) +3 +3 +0 +0 +0 +10 +0 +0 +2 +-1 +1 +0 +0 +0 +0 +0 +0 +0 *$`, out)
	require.Regexp(t, `(?m)^ +A1@paris \(main\) +0 +0 +0 +0 +0 +0 +0 +0 +0 +0 +0 +1 +0 +0 +0 +0 +0 +0 *$`, out)
	require.Regexp(t, `(?m)^ +total +available +reserved +sold +quality control +damaged +safety stock +incoming +short +backordered *$`, out)
	require.Regexp(t, `(?m)^ +A1 \(main\) +\+6 +\+3 +\+0 +\+3 +\+0 +\+0 +\+0 +\+0 +\+0 +\+0 *$`, out)
	require.Regexp(t, `(?m)^ +A1@paris \(main\) +\+0 +\+0 +\+0 +\+0 +\+0 +\+0 +\+0 +\+1 +\+0 +\+0 *$`, out)
	require.Regexp(t, `(?m)^ +PRE \(main\) +\+1 +\+0 +\+1 +\+0 +\+0 +\+0 +\+0 +\+0 +\+0 +\+2 *$`, out)
	require.Contains(t, out, "Reconciliations: 0 runs, 0 failed")

	code, out, errs = cmd("report", "--date", today, "--json")
	require.Equal(t, 0, code, "%s%s", out, errs)
	var got reports.Daily
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, int64(3), got.Totals.Confirmed)
	require.Len(t, got.Pools, 3)
	require.Equal(t, int64(2), got.Totals.Promised)
	require.Equal(t, int64(2), got.Totals.WrittenOff)

	day, _ := time.Parse(time.DateOnly, today)
	code, out, _ = cmd("report", "--date", day.AddDate(0, 0, -1).Format(time.DateOnly))
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^ +all( +0){18} *$`, out)

	for _, args := range [][]string{{"report"}, {"report", "--date", "yesterday"}, {"report", "--date", today, "--tz", "Mars/Olympus"},
		{"report", "--date", "9999-12-31"}} {
		code, _, errs = cmd(args...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
	}
}
