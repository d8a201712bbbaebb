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
	"github.com/stockhold/stockhold/app/stock"
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
	require.Contains(t, errs, `line 1502: SKU "T1500" has no stock; chunk 2 (lines 1002-2001) was rolled back`)
	require.Contains(t, errs, "run the same command again")
	require.Contains(t, out, "applied 1,000 rows in 1 chunk (1,000 changed a pool): +2,000 / -0 units")
	require.Contains(t, out, "not applied: 1,100 rows")
	_, err := inv.GetStock(ctx, "T1001")
	require.Error(t, err, "the failed chunk changed nothing")

	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "T1500", Delta: 5, Actor: "alice"})
	require.NoError(t, err)
	code, out, errs = cmd("stock", "import", "--reason", "weekly", file, "--actor", "dave")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "rows 1-1,000 were applied before: resuming after them")
	require.Contains(t, out, `import "restock.csv", run 1`)
	require.Contains(t, out, "resumed after the 1,000 rows it applied before (through line 1001, last on ")
	require.Contains(t, out, "applied 1,100 rows in 2 chunks (1,100 changed a pool): +2,198 / -3 units")

	code, out, errs = cmd("stock", "import", file)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `import "restock.csv" (run 1) finished on `)
	require.Contains(t, out, "with these rows: nothing applied (--again imports them again)")

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
	require.Equal(t, "sku,location,pool,set_total,available,reserved,sold,quality_control,damaged,safety_stock,incoming,status,serialized", lines[0])
	require.Equal(t, "T0000,default,main,2,2,0,0,0,0,0,0,on_sale,false", lines[1])
	require.Equal(t, "T1500,default,main,2,2,0,0,0,0,0,0,on_sale,false", lines[1501])
	code, out, _ = cmd("stock", "export")
	require.Equal(t, 0, code)
	require.Equal(t, string(data), out)

	for _, args := range [][]string{{"stock"}, {"stock", "count"}, {"stock", "import"}, {"stock", "import", "a", "b"}, {"stock", "export", "x"}} {
		code, _, _ := cmd(args...)
		require.Equal(t, 2, code, "%v", args)
	}
}

// TestStockImportIsNamed is two cases, as a person meets them
// on the command line. restock-week2.csv, identical to last week's
// restock-week1.csv, was skipped as "imported before" (exit 0) and a
// week's restock was lost: it is a new import, applied, with a warning
// naming the earlier one. A file that differs from an imported one at row
// 1,401 had rows 1,001-1,400 applied a second time: under the same name it
// is refused, exit 2, nothing applied. --id imports a file under a name of
// its own; --again imports a finished import once more.
func TestStockImportIsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "USER": "carol"}
	getenv := func(k string) string { return env[k] }
	inv := services(t, pool).Inventory
	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"stock", "import"}, args...), getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	dir := t.TempDir()
	write := func(name string, rows int, edit func(i int) string) string {
		var b strings.Builder
		b.WriteString("sku,pool,delta\n")
		for i := range rows {
			row := fmt.Sprintf("R%04d,,%d\n", i, 1+i%3)
			if edit != nil && edit(i) != "" {
				row = edit(i)
			}
			b.WriteString(row)
		}
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	total := func(sku string) int64 {
		st, err := inv.GetStock(ctx, sku)
		require.NoError(t, err)
		return st.Pools[0].Total
	}
	ledger := func() int { return dbtest.Count(t, pool, `SELECT count(*) FROM ledger`) }

	// The weekly restock.
	week1 := write("restock-week1.csv", 3, nil)
	week2 := write("restock-week2.csv", 3, nil)
	code, out, errs := cmd(week1)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "applied 3 rows")
	code, out, errs = cmd(week2)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "applied 3 rows", "the same rows under another name are another restock")
	require.Contains(t, errs, `warning: the same rows were imported before as "restock-week1.csv"`)
	require.EqualValues(t, 2, total("R0000"))
	require.EqualValues(t, 6, total("R0002"))
	code, out, errs = cmd(week2)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "nothing applied")
	require.EqualValues(t, 2, total("R0000"))
	code, out, errs = cmd(week2, "--again")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `import "restock-week2.csv", run 2`)
	require.EqualValues(t, 3, total("R0000"))

	// A file that differs from the imported one at row 1,401.
	const n = 2000
	first := write("stock.csv", n, nil)
	code, _, errs = cmd(first)
	require.Equal(t, 0, code, errs)
	before, r1001, r1400 := ledger(), total("R1000"), total("R1399")
	changed := write("stock.csv", n, func(i int) string {
		if i == 1400 {
			return "R1400,,9\n"
		}
		return ""
	})
	code, out, errs = cmd(changed)
	require.Equal(t, 2, code, "%s%s", out, errs)
	require.Contains(t, errs, `import "stock.csv" finished on`)
	require.Contains(t, errs, "nothing was changed")
	require.Equal(t, before, ledger(), "nothing applied")
	require.Equal(t, r1001, total("R1000"), "row 1,001 applied once")
	require.Equal(t, r1400, total("R1399"), "row 1,400 applied once")

	// Under a name of its own it is a new import of every row.
	code, out, errs = cmd(changed, "--id", "stock-corrected")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `import "stock-corrected", run 1`)
	require.Contains(t, out, "applied 2,000 rows")
	require.Equal(t, r1001*2, total("R1000"))
}
