package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
)

// TestStockImportCommand imports a file whose second chunk fails on a row
// that takes more than is available: exit 1, the first chunk applied, the
// line named. Once the stock is there, the same command resumes after the
// first chunk; a third run has nothing to do. The export then has every
// imported total.
func TestStockImportCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "USER": "carol"}
	getenv := func(k string) string { return env[k] }
	inv := services(t, pool).Inventory
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	dir := t.TempDir()

	var b strings.Builder
	b.WriteString("sku,pool,delta\n")
	for i := range 2100 {
		d := 2
		if i == 1500 {
			d = -3 // T1500 has nothing yet
		}
		fmt.Fprintf(&b, "T%04d,,%d\n", i, d)
	}
	file := filepath.Join(dir, "restock.csv")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o600))

	code, out, errs := cmd("stock", "import", file)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "chunk 1/3 committed: lines 2-1001, 1,000/2,100 rows done")
	require.Contains(t, errs, `line 1502: SKU "T1500" has no main pool; chunk 2 (lines 1002-2001) was rolled back`)
	require.Contains(t, errs, "run the same command again")
	require.Contains(t, out, "applied 1,000 rows in 1 chunk (1,000 changed a pool): +2,000 / -0 units")
	require.Contains(t, out, "not applied: 1,100 rows")
	_, err := inv.GetStock(ctx, "T1001")
	require.Error(t, err, "the failed chunk changed nothing")

	_, err = inv.Adjust(ctx, inventory.Adjustment{SKU: "T1500", Delta: 5, Actor: "alice"})
	require.NoError(t, err)
	code, out, errs = cmd("stock", "import", "--reason", "weekly", file, "--actor", "dave")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "rows 1-1,000 were imported before: skipping them")
	require.Contains(t, out, "skipped 1,000 rows imported before (through line 1001, committed ")
	require.Contains(t, out, "by carol from "+file)
	require.Contains(t, out, "applied 1,100 rows in 2 chunks (1,100 changed a pool): +2,198 / -3 units")

	code, out, errs = cmd("stock", "import", file)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "nothing to do: every row was imported before")

	var actor, key, reason, ref string
	require.NoError(t, pool.QueryRow(ctx, `SELECT actor, actor_key, reason, ref FROM ledger WHERE sku = 'T2000'`).Scan(&actor, &key, &reason, &ref))
	require.Equal(t, []string{"dave", "db:" + dbUser(t, env["DATABASE_URL"]), "weekly", "restock.csv:2002"}, []string{actor, key, reason, ref},
		"the actor claimed, and the database user the command line acted as")

	// A file with bad rows is refused whole, exit 2.
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("sku,pool,delta\nB1,main,5\nB2,main,zero\nB/3,main,1\n"), 0o600))
	code, _, errs = cmd("stock", "import", bad)
	require.Equal(t, 2, code)
	require.Contains(t, errs, "nothing was changed")
	require.Contains(t, errs, `line 3: delta "zero" is not a whole number`)
	require.Contains(t, errs, "line 4: sku contains a slash")
	_, err = inv.GetStock(ctx, "B1")
	require.Error(t, err)

	// The export, to a file and to stdout.
	exported := filepath.Join(dir, "stock.csv")
	code, _, errs = cmd("stock", "export", "--out", exported)
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "exported 2,100 stock rows to "+exported)
	data, err := os.ReadFile(exported)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 2101)
	require.Equal(t, "sku,pool,set_total,available,reserved,sold,status", lines[0])
	require.Equal(t, "T0000,main,2,2,0,0,on_sale", lines[1])
	require.Equal(t, "T1500,main,2,2,0,0,on_sale", lines[1501])
	code, out, _ = cmd("stock", "export")
	require.Equal(t, 0, code)
	require.Equal(t, string(data), out)

	for _, args := range [][]string{{"stock"}, {"stock", "count"}, {"stock", "import"}, {"stock", "import", "a", "b"}, {"stock", "export", "x"}} {
		code, _, _ := cmd(args...)
		require.Equal(t, 2, code, "%v", args)
	}
}
