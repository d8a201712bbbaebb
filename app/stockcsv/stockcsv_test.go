package stockcsv_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/stockcsv"
	"github.com/stockhold/stockhold/jobs"
)

func TestParse(t *testing.T) {
	t.Parallel()
	f, err := stockcsv.Parse("a.csv", []byte("SKU, Pool ,Delta,note\nA1,main,5,restock\n\"B,2\",,-3,\"x\"\n"))
	require.NoError(t, err)
	require.Equal(t, stockcsv.FormatDelta, f.Format)
	require.Equal(t, []string{"note"}, f.Ignored)
	require.Equal(t, []stockcsv.Row{{Line: 2, SKU: "A1", Location: "default", Pool: "main", Value: 5},
		{Line: 3, SKU: "B,2", Location: "default", Pool: "main", Value: -3}}, f.Rows)
	require.Len(t, f.Prefixes, 2)

	// Prefixes follow the content: line endings, quoting, a byte-order
	// mark and a final newline do not change them; a value does.
	same := []string{
		"sku,pool,delta\r\nA1,main,5\r\n\"B,2\",main,-3",
		"\ufeffsku,pool,delta,other\nA1,,5,x\n\"B,2\",\"main\",-3,y\n",
	}
	for _, s := range same {
		g, err := stockcsv.Parse("b.csv", []byte(s))
		require.NoError(t, err, s)
		require.Equal(t, f.Prefixes, g.Prefixes, "%q", s)
		require.NotEqual(t, f.SHA256, g.SHA256)
	}
	_, err = stockcsv.Parse("c.csv", []byte("sku,pool,delta\nA1,main,5\nB,2,main,-4\n"))
	require.Error(t, err, "a row with too many fields")
	g, err := stockcsv.Parse("c.csv", []byte("sku,pool,delta\nA1,main,5\n\"B,2\",main,-4\n"))
	require.NoError(t, err)
	require.Equal(t, f.Prefixes[0], g.Prefixes[0])
	require.NotEqual(t, f.Prefixes[1], g.Prefixes[1])
	s, err := stockcsv.Parse("s.csv", []byte("sku,pool,set_total\nA1,main,5\n\"B,2\",main,3\n"))
	require.NoError(t, err)
	require.NotEqual(t, f.Prefixes[0], s.Prefixes[0], "a total is not a delta")

	bad := map[string][]string{
		"":                        {"the file is empty"},
		"sku,pool\nA1,main\n":     {"line 1: the header"},
		"sku,qty,delta\nA1,1,2\n": {"line 1: the header"},
		"sku,pool,delta\n":        {"no rows"},
		"sku,pool,delta\nA1,main,0\nA/2,main,1\nA3,main,x\nA4,main,1.5\nA5,main,1000000001\n": {
			"line 2: delta 0", "line 3: sku contains a slash", `line 4: delta "x" is not a whole number`,
			`line 5: delta "1.5"`, "line 6: delta 1000000001"},
		"sku,pool,set_total\nA1,main,-1\nA2, main,1\n":  {"line 2: set_total -1", "line 3: pool has leading or trailing white space"},
		"sku,pool,delta\nA1,main,1\nA1,,2\nA1,c1,3\n":   {`line 3: SKU "A1" pool main is already on line 2`},
		"sku,pool,delta\nA1,main,1\nA2,main\nA3,main,1": {"wrong number of fields"},
	}
	for in, want := range bad {
		_, err := stockcsv.Parse("bad.csv", []byte(in))
		var p *stockcsv.Problems
		require.ErrorAs(t, err, &p, "%q: %v", in, err)
		require.Len(t, p.List, len(want), "%q: %v", in, p)
		for i, w := range want {
			require.Contains(t, p.List[i], w, "%q", in)
		}
	}
	var many strings.Builder
	many.WriteString("sku,pool,delta\n")
	for i := range 30 {
		fmt.Fprintf(&many, "S%d,main,0\n", i)
	}
	_, err = stockcsv.Parse("many.csv", []byte(many.String()))
	var p *stockcsv.Problems
	require.ErrorAs(t, err, &p)
	require.Len(t, p.List, 20)
	require.Equal(t, 10, p.More)
	require.Contains(t, p.Error(), "... and 10 more")
}

type bundle struct {
	pool *pgxpool.Pool
	inv  *inventory.Service
	deps *app.Services
}

func setup(t *testing.T) bundle {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.NewServices(config.Defaults(), pool, inserter, nil)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return bundle{pool: pool, inv: deps.Inventory, deps: deps}
}

// deltaFile is a delta import of n rows: SKU Dxxxx gets +i (odd rows) or
// -1 (even rows, from stock put there first).
func deltaFile(n int, edit func(i int) string) []byte {
	var b bytes.Buffer
	b.WriteString("sku,pool,delta\n")
	for i := range n {
		row := fmt.Sprintf("D%04d,main,%d\n", i, delta(i))
		if edit != nil {
			if r := edit(i); r != "" {
				row = r
			}
		}
		b.WriteString(row)
	}
	return b.Bytes()
}

func delta(i int) int {
	if i%2 == 1 {
		return i
	}
	return -1
}

// seed puts 1 unit into every even SKU of an n-row delta file, so the
// file's -1 rows can apply.
func (b bundle) seed(t *testing.T, n int) {
	t.Helper()
	var lines []stock.BulkLine
	for i := 0; i < n; i += 2 {
		lines = append(lines, stock.BulkLine{SKU: fmt.Sprintf("D%04d", i), Delta: 1})
		if len(lines) == stock.MaxBulkLines || i+2 >= n {
			_, err := b.inv.AdjustMany(t.Context(), stock.BulkAdjustment{Lines: lines, Actor: "seed"})
			require.NoError(t, err)
			lines = nil
		}
	}
}

// requireApplied checks that rows [0, n) of an n-row delta file are
// applied exactly once and rows [n, total) not at all, by the stock and by
// the ledger rows the import wrote.
func (b bundle) requireApplied(t *testing.T, name string, n, total int) {
	t.Helper()
	ctx := t.Context()
	var rows, once int
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT count(*), count(DISTINCT ref) FROM ledger WHERE actor = 'importer' AND ref LIKE $1 || ':%'`, name).Scan(&rows, &once))
	require.Equal(t, n, rows, "one ledger row per applied row")
	require.Equal(t, n, once, "no row applied twice")
	for _, i := range []int{0, 1, n - 2, n - 1, n, n + 1, total - 1} {
		if i < 0 || i >= total {
			continue
		}
		want := 0
		if i%2 == 0 {
			want = 1 // seeded
		}
		if i < n {
			want += delta(i)
		}
		st, err := b.inv.GetStock(ctx, fmt.Sprintf("D%04d", i))
		if want == 0 && i%2 == 1 {
			require.Error(t, err, "row %d not applied: no stock", i)
			continue
		}
		require.NoError(t, err)
		require.EqualValues(t, want, st.Pools[0].Total, "row %d", i)
	}
}

// TestImportResumesAfterFailure injects a failure into the second of three
// chunks (the context ends after the first commits, as when the process is
// stopped) and runs the import again: it skips the committed chunk and
// applies the rest, each row once. Run again once finished, with the same
// rows (saved with CRLF line endings too), it applies nothing.
func TestImportResumesAfterFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 2500
	b.seed(t, n)
	f, err := stockcsv.Parse("stop.csv", deltaFile(n, nil))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	var seen []stockcsv.Progress
	im := &stockcsv.Importer{Pool: b.pool, ID: "stop.csv", Actor: "importer", Reason: "test", Progress: func(p stockcsv.Progress) {
		seen = append(seen, p)
		cancel() // the next chunk fails
	}}
	sum, err := im.Import(ctx, f)
	var ce *stockcsv.ChunkError
	require.ErrorAs(t, err, &ce, "%v", err)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2, ce.Chunk)
	require.Equal(t, 1002, ce.FirstLine)
	require.Equal(t, 2001, ce.LastLine)
	require.Equal(t, stockcsv.Summary{Rows: n, Applied: 1000, Chunks: 1, Changed: 1000, UnitsIn: 250_000, UnitsOut: 500}, withoutTook(sum))
	require.Equal(t, "stop.csv", sum.Import.ID)
	require.Equal(t, []stockcsv.Progress{{Done: 1000, Rows: n, Chunk: 1, Chunks: 3, FirstLine: 2, LastLine: 1001, Changed: 1000}}, seen)
	b.requireApplied(t, "stop.csv", 1000, n)

	seen = nil
	im.Progress = func(p stockcsv.Progress) { seen = append(seen, p) }
	sum, err = im.Import(t.Context(), f)
	require.NoError(t, err)
	require.Equal(t, 1000, sum.Skipped)
	require.Nil(t, sum.Finished)
	require.EqualValues(t, 1, sum.Import.Run)
	require.EqualValues(t, n, sum.Import.AppliedRows)
	require.NotNil(t, sum.Import.FinishedAt)
	require.Equal(t, 1500, sum.Applied)
	require.Equal(t, 2, sum.Chunks)
	require.Equal(t, []stockcsv.Progress{
		{Done: 1000, Rows: n, Chunks: 2},
		{Done: 2000, Rows: n, Chunk: 1, Chunks: 2, FirstLine: 1002, LastLine: 2001, Changed: 1000},
		{Done: 2500, Rows: n, Chunk: 2, Chunks: 2, FirstLine: 2002, LastLine: 2501, Changed: 500},
	}, seen)
	b.requireApplied(t, "stop.csv", n, n)

	// Once more, or the same rows saved with CRLF line endings: nothing.
	crlf, err := stockcsv.Parse("stop-crlf.csv", bytes.ReplaceAll(deltaFile(n, nil), []byte("\n"), []byte("\r\n")))
	require.NoError(t, err)
	for _, file := range []*stockcsv.File{f, crlf} {
		sum, err = im.Import(t.Context(), file)
		require.NoError(t, err)
		require.NotNil(t, sum.Finished, "finished with the same rows")
		require.Zero(t, sum.Applied)
	}
	b.requireApplied(t, "stop.csv", n, n)
}

func withoutTook(s stockcsv.Summary) stockcsv.Summary {
	s.Took, s.Import = 0, db.StockImport{}
	return s
}

// TestImportFixedFileResumes fails an import on a row that would take more
// than is available: the chunk is rolled back and names the line. The file
// fixed at that row resumes after the committed chunk, and once finished
// the same file with rows appended applies only those.
func TestImportFixedFileResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 2500
	b.seed(t, n)
	broken := func(i int) string {
		if i == 1700 {
			return "D1700,main,-5\n" // 1 available
		}
		return ""
	}
	f, err := stockcsv.Parse("fix.csv", deltaFile(n, broken))
	require.NoError(t, err)
	im := &stockcsv.Importer{Pool: b.pool, ID: "fix.csv", Actor: "importer", Reason: "test"}
	sum, err := im.Import(t.Context(), f)
	var ce *stockcsv.ChunkError
	require.ErrorAs(t, err, &ce, "%v", err)
	require.Equal(t, 1702, ce.Line, "the file line of row 1,700")
	require.Contains(t, ce.Error(), "line 1702: SKU \"D1700\" (pool main) has 1 available, 5 to take")
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeInsufficientAvailable, de.Code)
	require.Equal(t, 1000, sum.Applied)
	b.requireApplied(t, "fix.csv", 1000, n)

	fixed, err := stockcsv.Parse("fix.csv", deltaFile(n, nil))
	require.NoError(t, err)
	sum, err = im.Import(t.Context(), fixed)
	require.NoError(t, err)
	require.Equal(t, 1000, sum.Skipped)
	require.Equal(t, 1500, sum.Applied)
	b.requireApplied(t, "fix.csv", n, n)

	longer := append(deltaFile(n, nil), []byte("E1,main,7\nE2,main,8\n")...)
	g, err := stockcsv.Parse("fix.csv", longer)
	require.NoError(t, err)
	sum, err = im.Import(t.Context(), g)
	require.NoError(t, err)
	require.Equal(t, n, sum.Skipped)
	require.Equal(t, 2, sum.Applied)
	st, err := b.inv.GetStock(t.Context(), "E2")
	require.NoError(t, err)
	require.EqualValues(t, 8, st.Pools[0].Total)
}

// TestExportRoundTrip exports a database with holds, sales, a paused pool
// and a campaign pool, imports the export into a fresh database (its main
// pools) and into the same database after the stock changed: the totals come
// back.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	a := setup(t)
	ctx := t.Context()
	for i, sku := range []string{"X1", "X2", "x3", "Y,4"} {
		_, err := a.inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: int64(10 * (i + 1)), Actor: "seed"})
		require.NoError(t, err)
	}
	r, _, err := a.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h1",
		Items: []inventory.Item{{SKU: "X1", Quantity: 3}, {SKU: "X2", Quantity: 4}}})
	require.NoError(t, err)
	_, err = a.inv.Confirm(ctx, r.ID, inventory.Caller{Name: "shop"})
	require.NoError(t, err)
	_, _, err = a.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h2", Items: []inventory.Item{{SKU: "x3", Quantity: 5}}})
	require.NoError(t, err)
	_, err = a.inv.Pause(ctx, stock.SwitchRequest{SKU: "X2", Reason: "count", Actor: "alice"})
	require.NoError(t, err)

	var first bytes.Buffer
	n, err := stockcsv.Export(ctx, a.pool, &first)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, "sku,location,pool,set_total,available,reserved,sold,quality_control,damaged,safety_stock,incoming,status,serialized\n"+
		"X1,default,main,10,7,0,3,0,0,0,0,on_sale,false\n"+
		"X2,default,main,20,16,0,4,0,0,0,0,paused,false\n"+
		"\"Y,4\",default,main,40,40,0,0,0,0,0,0,on_sale,false\n"+
		"x3,default,main,30,25,5,0,0,0,0,0,on_sale,false\n", first.String())

	// Into a fresh database: the same totals, all available.
	fresh := setup(t)
	f, err := stockcsv.Parse("export.csv", first.Bytes())
	require.NoError(t, err)
	require.True(t, f.Located)
	require.Equal(t, []string{"available", "reserved", "sold", "quality_control", "damaged", "safety_stock", "incoming", "status"}, f.Ignored,
		"serialized is read, not ignored")
	sum, err := (&stockcsv.Importer{Pool: fresh.pool, ID: "export.csv", Actor: "importer"}).Import(ctx, f)
	require.NoError(t, err)
	require.Equal(t, 4, sum.Applied)
	var second bytes.Buffer
	_, err = stockcsv.Export(ctx, fresh.pool, &second)
	require.NoError(t, err)
	require.Equal(t, "sku,location,pool,set_total,available,reserved,sold,quality_control,damaged,safety_stock,incoming,status,serialized\n"+
		"X1,default,main,10,10,0,0,0,0,0,0,on_sale,false\n"+
		"X2,default,main,20,20,0,0,0,0,0,0,on_sale,false\n"+
		"\"Y,4\",default,main,40,40,0,0,0,0,0,0,on_sale,false\n"+
		"x3,default,main,30,30,0,0,0,0,0,0,on_sale,false\n", second.String())

	// Into the same database after the stock moved: back to the exported
	// totals (the import is not skipped: no import of that id ran here).
	_, err = a.inv.AdjustMany(ctx, stock.BulkAdjustment{Actor: "alice", Lines: []stock.BulkLine{
		{SKU: "X1", Delta: 5}, {SKU: "x3", Delta: -20}, {SKU: "Y,4", Delta: 1}}})
	require.NoError(t, err)
	sum, err = (&stockcsv.Importer{Pool: a.pool, ID: "export.csv", Actor: "importer"}).Import(ctx, f)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Changed, "X2 was already at its total")
	var third bytes.Buffer
	_, err = stockcsv.Export(ctx, a.pool, &third)
	require.NoError(t, err)
	require.Equal(t, first.String(), third.String())
}

// TestExportNeutralizesFormulas: a SKU a spreadsheet would run (=, +, -, @,
// a tab or a carriage return first) is exported with a single quote in
// front, and the import reads the export back to the same names, those
// that start with a quote included.
func TestExportNeutralizesFormulas(t *testing.T) {
	t.Parallel()
	a := setup(t)
	ctx := t.Context()
	skus := []string{"=cmd|' -C calc'!A0", "+1", "-A1", "@SUM(A1)", "'=quoted", "''+twice", "'plain", "A=1", "'"}
	for _, sku := range skus {
		_, err := a.inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 3, Actor: "seed"})
		require.NoError(t, err)
	}
	var out bytes.Buffer
	_, err := stockcsv.Export(ctx, a.pool, &out)
	require.NoError(t, err)
	records, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
	require.NoError(t, err)
	cells := map[string]bool{}
	for _, r := range records[1:] {
		cells[r[0]] = true
		require.False(t, strings.ContainsAny(r[0][:1], "=+-@\t\r"), "cell %q would run in a spreadsheet", r[0])
	}
	for _, want := range []string{"'=cmd|' -C calc'!A0", "'+1", "'-A1", "'@SUM(A1)", "''=quoted", "'''+twice", "'plain", "A=1", "'"} {
		require.True(t, cells[want], "exported %q: %v", want, cells)
	}

	// Read back, the names are the originals, and importing the export
	// into a fresh database recreates exactly them.
	f, err := stockcsv.Parse("export.csv", out.Bytes())
	require.NoError(t, err)
	var got []string
	for _, r := range f.Rows {
		got = append(got, r.SKU)
	}
	require.ElementsMatch(t, skus, got)
	fresh := setup(t)
	_, err = (&stockcsv.Importer{Pool: fresh.pool, ID: "export.csv", Actor: "importer"}).Import(ctx, f)
	require.NoError(t, err)
	var again bytes.Buffer
	_, err = stockcsv.Export(ctx, fresh.pool, &again)
	require.NoError(t, err)
	require.Equal(t, out.String(), again.String())

	for _, v := range []string{"", "x", "'", "''", "=", "'=", "\t1", "'\r", "A'=", "-"} {
		require.Equal(t, v, stockcsv.Restore(stockcsv.Neutralize(v)), "%q", v)
	}
}

// TestImportsAreNamed is the weekly restock: restock-week2.csv, identical
// to last week's restock-week1.csv, is a new import and applies its rows
// again (naming the earlier import), where an import known by its content
// skipped it and lost a week's stock. Run again, a finished import applies
// nothing; with Again it is imported once more, as run 2.
func TestImportsAreNamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	restock := []byte("sku,pool,delta\nW1,main,10\nW2,,20\n")
	total := func(sku string) int64 {
		st, err := b.inv.GetStock(ctx, sku)
		require.NoError(t, err)
		return st.Pools[0].Total
	}
	importAs := func(id string, again bool) stockcsv.Summary {
		t.Helper()
		f, err := stockcsv.Parse(id, restock)
		require.NoError(t, err)
		sum, err := (&stockcsv.Importer{Pool: b.pool, ID: id, Again: again, Actor: "importer"}).Import(ctx, f)
		require.NoError(t, err)
		return sum
	}

	week1 := importAs("restock-week1.csv", false)
	require.Equal(t, 2, week1.Applied)
	require.Empty(t, week1.Earlier)
	week2 := importAs("restock-week2.csv", false)
	require.Equal(t, 2, week2.Applied, "the same rows under another name are another restock")
	require.Len(t, week2.Earlier, 1)
	require.Equal(t, "restock-week1.csv", week2.Earlier[0].ID, "named for the warning")
	require.EqualValues(t, 20, total("W1"))
	require.EqualValues(t, 40, total("W2"))

	again := importAs("restock-week2.csv", false)
	require.NotNil(t, again.Finished, "finished, with the same rows")
	require.Zero(t, again.Applied)
	require.EqualValues(t, 20, total("W1"))

	rerun := importAs("restock-week2.csv", true)
	require.Equal(t, 2, rerun.Applied)
	require.EqualValues(t, 2, rerun.Import.Run)
	require.EqualValues(t, 30, total("W1"))
	require.Equal(t, 3, dbtest.Count(t, b.pool, `SELECT count(*) FROM stock_imports`))
}

// TestImportRefusesChangedAppliedRows is the file that differs from an
// earlier import at row 1,401: only chunk-end prefixes were remembered, so
// its import started after row 1,000 and applied rows 1,001-1,400 a second
// time. Under the same id it is now refused, with nothing applied, whether
// the earlier import finished or stopped after applying those rows; an
// unfinished import whose file changed only after its applied rows resumes,
// and every row is applied once.
func TestImportRefusesChangedAppliedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	changedAt := func(row int) func(int) string {
		return func(i int) string {
			if i == row-1 {
				return fmt.Sprintf("D%04d,main,%d\n", i, delta(i)+2) // same SKU, another delta
			}
			return ""
		}
	}
	refused := func(im *stockcsv.Importer, f *stockcsv.File, contains string) {
		t.Helper()
		ledger := dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger`)
		sum, err := im.Import(ctx, f)
		var r *stockcsv.Refusal
		require.ErrorAs(t, err, &r)
		require.Contains(t, r.Error(), contains)
		require.Zero(t, sum.Applied)
		require.Equal(t, ledger, dbtest.Count(t, b.pool, `SELECT count(*) FROM ledger`), "nothing applied")
	}

	// Finished: 2,000 rows, then the file changed at row 1,401.
	const n = 2000
	b.seed(t, n)
	done := &stockcsv.Importer{Pool: b.pool, ID: "stock.csv", Actor: "importer"}
	f, err := stockcsv.Parse("stock.csv", deltaFile(n, nil))
	require.NoError(t, err)
	_, err = done.Import(ctx, f)
	require.NoError(t, err)
	changed, err := stockcsv.Parse("stock.csv", deltaFile(n, changedAt(1401)))
	require.NoError(t, err)
	refused(done, changed, `import "stock.csv" finished on`)
	b.requireApplied(t, "stock.csv", n, n)

	// Unfinished, on a database of its own: 3,000 rows whose third chunk
	// fails at row 2,500 (it takes 5 of the 1 unit there), so rows 1-2,000
	// are applied.
	const m = 3000
	b = setup(t)
	b.seed(t, m)
	broken := func(i int) string {
		if i == 2499 {
			return "D2499,main,-5\n"
		}
		return ""
	}
	stopped := &stockcsv.Importer{Pool: b.pool, ID: "big.csv", Actor: "importer"}
	g, err := stockcsv.Parse("big.csv", deltaFile(m, broken))
	require.NoError(t, err)
	sum, err := stopped.Import(ctx, g)
	var ce *stockcsv.ChunkError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 2000, sum.Applied)
	both := func(i int) string {
		if r := changedAt(1401)(i); r != "" {
			return r
		}
		return broken(i)
	}
	for _, file := range [][]byte{deltaFile(m, changedAt(1401)), deltaFile(m, both), deltaFile(1500, nil)} {
		h, err := stockcsv.Parse("big.csv", file)
		require.NoError(t, err)
		refused(stopped, h, "applied rows 1-2000 of big.csv")
	}
	again := &stockcsv.Importer{Pool: b.pool, ID: "big.csv", Again: true, Actor: "importer"}
	refused(again, g, "has not finished")
	fixed, err := stockcsv.Parse("big.csv", deltaFile(m, nil))
	require.NoError(t, err)
	sum, err = stopped.Import(ctx, fixed)
	require.NoError(t, err)
	require.Equal(t, 2000, sum.Skipped)
	require.Equal(t, 1000, sum.Applied)
	var rows, once int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT ref) FROM ledger WHERE ref LIKE 'big.csv:%'`).Scan(&rows, &once))
	require.Equal(t, m, rows, "each row of big.csv applied")
	require.Equal(t, m, once, "and once")
}

// TestLegacyImportsResume: an import recorded by content before imports
// were named (migration 00081) becomes the import named after its file,
// with the rows its longest recorded prefix covered, so the same file run
// again after the upgrade resumes after them instead of applying them
// again.
func TestLegacyImportsResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const n = 1500
	b.seed(t, n) // with this version's code, before the schema goes back
	m, err := schema.New(b.pool, nil)
	require.NoError(t, err)
	defer m.Close()
	for {
		current, _, err := m.Versions(ctx)
		require.NoError(t, err)
		if current < 81 {
			break
		}
		_, err = m.Down(ctx)
		require.NoError(t, err)
	}
	f, err := stockcsv.Parse("legacy.csv", deltaFile(n, nil))
	require.NoError(t, err)
	for _, chunk := range []struct{ last, committed int }{{1000, 2}, {500, 1}} {
		_, err = b.pool.Exec(ctx, `INSERT INTO stock_import_chunks (prefix_sha256, file_sha256, file_name, first_row, last_row, changed, actor, committed_at)
			VALUES ($1, $2, '/home/carol/legacy.csv', $3 - 499, $3, 500, 'carol', now() - make_interval(mins => $4))`,
			f.Prefixes[chunk.last-1][:], f.SHA256[:], chunk.last, chunk.committed)
		require.NoError(t, err)
	}
	_, err = m.Up(ctx)
	require.NoError(t, err)

	sum, err := (&stockcsv.Importer{Pool: b.pool, ID: stockcsv.DefaultID("/tmp/legacy.csv"), Actor: "importer"}).Import(ctx, f)
	require.NoError(t, err)
	require.Equal(t, 1000, sum.Skipped, "rows its chunks covered are not applied again")
	require.Equal(t, 500, sum.Applied)
	require.NotNil(t, sum.Import.FinishedAt)
}

// TestExportLeavesEndedCampaignsOut: a rolled-back campaign's empty pool
// is its history (on the campaign's page), not stock to count; a running
// campaign's pool is exported.
func TestExportLeavesEndedCampaignsOut(t *testing.T) {
	t.Parallel()
	a := setup(t)
	ctx := t.Context()
	dbtest.StockIn(t, a.pool, "X1", 10)
	dbtest.Campaign(t, a.pool, "live", &dbtest.CampaignOptions{Allotments: map[string]int64{"X1": 2}, Active: true})
	dbtest.Campaign(t, a.pool, "old", nil)
	_, err := a.pool.Exec(ctx, `INSERT INTO stock (sku, pool, status, paused_reason) VALUES ('X1', 'old', 'paused', 'campaign old ended')`)
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, `UPDATE campaigns SET status = 'rolled_back' WHERE id = 'old'`)
	require.NoError(t, err)
	var out bytes.Buffer
	n, err := stockcsv.Export(ctx, a.pool, &out)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, "sku,location,pool,set_total,available,reserved,sold,quality_control,damaged,safety_stock,incoming,status,serialized\n"+
		"X1,default,live,2,2,0,0,0,0,0,0,on_sale,false\n"+
		"X1,default,main,8,8,0,0,0,0,0,0,on_sale,false\n", out.String())
}

// TestExportOfUnitsImportsBack: an export of a database that has a pool of
// seats beside plain pools imports back, into the same database and into
// a fresh one: the seats' row, marked serialized, is skipped and named
// (its total changes only through its units), every other row applied.
// A file that names the seats' pool without marking it (written by hand,
// or exported before the column) is refused before anything is applied,
// naming the line; the chunk of such a row used to be rolled back whole.
func TestExportOfUnitsImportsBack(t *testing.T) {
	t.Parallel()
	a := setup(t)
	ctx := t.Context()
	_, err := a.inv.Adjust(ctx, stock.Adjustment{SKU: "MUG", Delta: 10, Actor: "seed"})
	require.NoError(t, err)
	_, _, err = a.inv.AddUnitsOnce(ctx, idempotency.NewKey("ops", "seats"), stock.UnitsChange{SKU: "GALA", Reason: "plan", Actor: "ops",
		Units: []stock.UnitSpec{{ID: "A-1"}, {ID: "A-2"}, {ID: "A-3"}}})
	require.NoError(t, err)
	_, err = a.inv.Adjust(ctx, stock.Adjustment{SKU: "TEE", Delta: 4, Actor: "seed"})
	require.NoError(t, err)

	var out bytes.Buffer
	_, err = stockcsv.Export(ctx, a.pool, &out)
	require.NoError(t, err)
	require.Contains(t, out.String(), "GALA,default,main,3,3,0,0,0,0,0,0,on_sale,true\n")
	require.Contains(t, out.String(), "MUG,default,main,10,10,0,0,0,0,0,0,on_sale,false\n")
	f, err := stockcsv.Parse("stock.csv", out.Bytes())
	require.NoError(t, err)

	// The same database, MUG's stock moved since: back to its total, the
	// seats untouched.
	_, err = a.inv.Adjust(ctx, stock.Adjustment{SKU: "MUG", Delta: 5, Actor: "seed"})
	require.NoError(t, err)
	sum, err := (&stockcsv.Importer{Pool: a.pool, ID: "stock.csv", Actor: "importer"}).Import(ctx, f)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Applied)
	require.Equal(t, 1, sum.Changed, "MUG back to 10; TEE already was")
	require.Len(t, sum.Units, 1)
	require.Equal(t, "GALA", sum.Units[0].SKU)
	require.Equal(t, 2, sum.Units[0].Line)
	var again bytes.Buffer
	_, err = stockcsv.Export(ctx, a.pool, &again)
	require.NoError(t, err)
	require.Equal(t, out.String(), again.String())

	// A fresh database: the plain pools come back; the seats are not made
	// a plain pool of 3.
	fresh := setup(t)
	sum, err = (&stockcsv.Importer{Pool: fresh.pool, ID: "stock.csv", Actor: "importer"}).Import(ctx, f)
	require.NoError(t, err)
	require.Len(t, sum.Units, 1)
	require.Equal(t, 0, dbtest.Count(t, fresh.pool, `SELECT count(*) FROM stock WHERE sku = 'GALA'`))
	require.Equal(t, 2, dbtest.Count(t, fresh.pool, `SELECT count(*) FROM stock`))

	// The seats named, not marked: refused, nothing applied, no import
	// recorded.
	before := dbtest.Count(t, a.pool, `SELECT count(*) FROM ledger`)
	unmarked, err := stockcsv.Parse("by-hand.csv", []byte("sku,pool,set_total\nMUG,main,12\nGALA,main,3\n"))
	require.NoError(t, err)
	_, err = (&stockcsv.Importer{Pool: a.pool, ID: "by-hand.csv", Actor: "importer"}).Import(ctx, unmarked)
	var refusal *stockcsv.Refusal
	require.ErrorAs(t, err, &refusal)
	require.Contains(t, refusal.Reason, `line 3: SKU "GALA" (pool main) is units with an identity`)
	require.Equal(t, before, dbtest.Count(t, a.pool, `SELECT count(*) FROM ledger`))
	require.Equal(t, 0, dbtest.Count(t, a.pool, `SELECT count(*) FROM stock_imports WHERE id = 'by-hand.csv'`))

	// A serialized cell that is neither true nor false is a bad file.
	_, err = stockcsv.Parse("bad.csv", []byte("sku,pool,set_total,serialized\nMUG,main,12,yes\n"))
	var problems *stockcsv.Problems
	require.ErrorAs(t, err, &problems)
	require.Contains(t, problems.Error(), `line 2: serialized "yes": want true or false`)
}
