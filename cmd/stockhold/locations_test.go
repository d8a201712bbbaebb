package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
)

// TestLocationCommands walks the commands of locations, transfers and
// counts: two warehouses, stock sent between them, received short and
// closed, a count previewed then applied, a shop key bound to one of them.
func TestLocationCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	cmd, ok := commandsOn(t, pool)

	require.Contains(t, ok("locations", "create", "--id", "paris", "--name", "Paris", "--priority", "1", "--operator", "alice"),
		"created location paris (Paris), priority 1")
	ok("locations", "create", "--id", "berlin", "--priority", "2", "--operator", "alice")
	dbtest.StockInAt(t, pool, "A1", "paris", 10)

	out := ok("transfer", "create", "--sku", "A1", "--from", "paris", "--to", "berlin", "--quantity", "6", "--operator", "alice", "--reason", "rebalance")
	require.Contains(t, out, "6 of A1 (pool main) from paris to berlin, in_transit")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := lines[len(lines)-1]
	require.Contains(t, ok("transfer", "list", "--status", "in_transit"), id)
	require.Contains(t, ok("transfer", "receive", id, "--quantity", "4", "--operator", "bob"), "4 received, 0 lost, 2 in transit")
	require.Contains(t, ok("transfer", "close", id, "--operator", "bob", "--reason", "pallet 2 lost"), "closed: 4 received, 2 lost, 0 in transit")
	code, _, errs := cmd("transfer", "cancel", id, "--operator", "bob", "--reason", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "transfer_not_in_transit")

	list := ok("locations", "list")
	require.Regexp(t, `berlin\s+berlin\s+2\s+true\s+4\s+4\s`, list)
	require.Regexp(t, `paris\s+Paris\s+1\s+true\s+4\s+4\s`, list)

	require.Contains(t, ok("count", "--sku", "A1", "--location", "berlin", "--counted", "3", "--operator", "alice", "--reason", "monthly"),
		"counted 3, the counters said 4: difference -1\ndry run: nothing changed")
	require.Contains(t, ok("count", "--sku", "A1", "--location", "berlin", "--counted", "3", "--operator", "alice", "--reason", "monthly", "--apply"),
		"recorded as count")
	require.Regexp(t, `berlin\s+berlin\s+2\s+true\s+3\s+3\s`, ok("locations", "list"))

	require.Contains(t, ok("locations", "update", "--id", "berlin", "--active", "false", "--operator", "alice"), "active false")
	require.Contains(t, ok("locations", "update", "--id", "paris", "--latitude", "48.86", "--longitude", "2.35", "--pickup", "true", "--operator", "alice"),
		"priority 1, active true, pickup, at 48.86,2.35")
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM locations WHERE id = 'paris' AND latitude = 48.86 AND longitude = 2.35 AND pickup`))
	list = ok("locations", "list")
	require.Regexp(t, `paris\s+Paris\s+1\s+true\s+4\s+4\s+0\s+0\s+0\s+0\s+0\s+0\s+true\s+48.86,2.35\n`, list, "pickup and where it is")
	require.Regexp(t, `berlin\s+berlin\s+2\s+false\s.*\sfalse\s+-\n`, list)
	require.Regexp(t, `LOCATION\s+NAME\s+AVAILABLE\s+WHERE\nparis\s+Paris\s+4\s+48.86,2.35\n$`, ok("locations", "pickup", "--sku", "A1"),
		"paris is the one pickup location (berlin is not one)")
	code, _, _ = cmd("locations", "pickup")
	require.Equal(t, 2, code, "pickup needs --sku")
	code, _, errs = cmd("locations", "pickup", "--sku", "NOPE")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "unknown_sku")
	code, _, _ = cmd("locations", "update", "--id", "paris", "--latitude", "48.86", "--operator", "alice")
	require.Equal(t, 2, code, "a latitude without a longitude")
	code, _, errs = cmd("locations", "update", "--id", "paris", "--latitude", "95", "--longitude", "0", "--operator", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "latitude must be from -90 to 90")

	code, _, _ = cmd("apikey", "create", "--name", "shop-x", "--role", "shop", "--strategy", "cheapest")
	require.Equal(t, 2, code, "no such strategy")
	ok("apikey", "create", "--name", "shop-near", "--role", "shop", "--strategy", "nearest")
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM api_keys WHERE name = 'shop-near' AND strategy = 'nearest'`))
	out = ok("apikey", "create", "--name", "shop-fr", "--role", "shop", "--locations", "paris")
	keys, err := auth.List(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []string{"paris"}, keys[0].Locations)
	code, _, errs = cmd("apikey", "create", "--name", "shop-x", "--role", "shop", "--locations", "madrid")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `location "madrid" does not exist`)
	require.NotEmpty(t, out)
}

// TestPriorityFlagNeverWraps: --priority 4294967297 was stored as 1 (an
// int cut to 32 bits). Every value outside the service's range is a usage
// error that changes nothing, on create and update; the edges are taken.
func TestPriorityFlagNeverWraps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "USER": "carol"}
	getenv := func(k string) string { return env[k] }
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	priority := func(id string) (p int32, err error) {
		err = pool.QueryRow(ctx, `SELECT priority FROM locations WHERE id = $1`, id).Scan(&p)
		return p, err
	}
	for _, v := range []string{"4294967297", "-4294967295", "2147483648", "1000001", "-1000001", "99999999999999999999"} {
		code, _, errs := cmd("locations", "create", "--id", "x", "--priority", v, "--operator", "alice")
		require.Equal(t, 2, code, "create --priority %s: %s", v, errs)
		require.Contains(t, errs, "--priority", v)
		_, err := priority("x")
		require.ErrorIs(t, err, pgx.ErrNoRows, "create --priority %s made nothing", v)
	}
	code, _, errs := cmd("locations", "create", "--id", "x", "--priority", "1000000", "--operator", "alice")
	require.Equal(t, 0, code, errs)
	for _, v := range []string{"4294967297", "-1000001"} {
		code, _, errs := cmd("locations", "update", "--id", "x", "--priority", v, "--operator", "alice")
		require.Equal(t, 2, code, "update --priority %s: %s", v, errs)
		p, err := priority("x")
		require.NoError(t, err)
		require.EqualValues(t, 1_000_000, p, "update --priority %s changed nothing", v)
	}
	code, _, errs = cmd("locations", "update", "--id", "x", "--priority", "-1000000", "--operator", "alice")
	require.Equal(t, 0, code, errs)
	p, err := priority("x")
	require.NoError(t, err)
	require.EqualValues(t, -1_000_000, p)
}
