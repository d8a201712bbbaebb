package console_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/partitions"
)

// TestBrowserArchives: once a month of the ledger is archived, the
// console's Archives page lists it (its range, rows, kept rows, carried
// balances, file, checksum, when and by whom) and opens it on the
// balances it carried forward, one SKU's on asking; a SKU's ledger ends
// its last page saying the older movements are archived, and a page
// before the archive answers 410 saying so, not an empty page.
func TestBrowserArchives(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	dbtest.StockIn(t, e.pool, "BLUE-MUG", 120)
	dbtest.StockIn(t, e.pool, "RED-MUG", 40)
	sold := e.hold("k1", "order-1", "BLUE-MUG", 3)
	_, err := e.app.Inventory.Confirm(bg, sold, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err)
	e.hold("k2", "order-2", "RED-MUG", 2) // held across the archive's end: its row is kept
	oldest := e.scalar(`SELECT min(id)::text FROM ledger WHERE sku = 'BLUE-MUG'`)

	end := dbtest.CloseMonthNow(t, e.pool)
	dir := t.TempDir()
	got, err := partitions.New(e.pool, nil).Archive(bg, end, dir, "alice")
	require.NoError(t, err)
	require.Len(t, got, 2)
	month := got[1]
	dbtest.StockIn(t, e.pool, "BLUE-MUG", 5) // after the archive

	text := textOf(t, ctx)
	require.NoError(t, chromedp.Do(ctx,
		e.signIn("/ops/"),
		chromedp.WaitVisible(`.tiles`),
		chromedp.Click(`nav a[href="/ops/archives"]`),
		chromedp.WaitVisible(`table.archives`),
	))
	fits(t, ctx, "the archives")
	list := text(`table.archives`)
	require.Contains(t, list, "alice")
	require.Contains(t, list, filepath.Join(dir, month.File), "the file")
	require.Contains(t, list, month.FileSHA256[:16], "its checksum")
	require.Regexp(t, fmt.Sprintf(`\s%d\s+%d\s+%d\s`, month.Rows, month.Kept, month.Carried), list, "rows, kept, carried")
	require.Equal(t, int64(1), month.Kept, "RED-MUG's open hold's row")
	require.Equal(t, int64(2), month.Carried, "a balance per stock row")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(fmt.Sprintf(`a[href="/ops/archives/%s"]`, month.Partition)),
		chromedp.WaitVisible(`table.carried`),
	))
	fits(t, ctx, "an archive")
	facts := text(`dl.facts`)
	require.Contains(t, facts, month.DataSHA256)
	require.Contains(t, facts, month.ManifestPath)
	carried := text(`table.carried`)
	// BLUE-MUG: 120 in, 3 sold; RED-MUG: 40 in, the hold's 2 kept apart.
	require.Regexp(t, `BLUE-MUG\s+default\s+main\s+\+117\s+0\s+\+3\s+\+120`, carried)
	require.Regexp(t, `RED-MUG\s+default\s+main\s+\+40\s+0\s+0\s+\+40`, carried)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(`input[name=sku]`, "RED-MUG"),
		chromedp.Submit(`input[name=sku]`),
		chromedp.WaitVisible(`h2 small`),
	))
	carried = text(`table.carried`)
	require.Contains(t, carried, "RED-MUG")
	require.NotContains(t, carried, "BLUE-MUG")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/skus/BLUE-MUG"),
		chromedp.WaitVisible(`p.archived`),
	))
	require.Contains(t, text(`table.ledger`), "carried")
	require.Contains(t, text(`p.archived`), "are archived")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`p.archived a`),
		chromedp.WaitVisible(`table.archives`),
		chromedp.Navigate(e.base+"/ops/skus/BLUE-MUG?before="+oldest),
		chromedp.WaitVisible(`main`),
	))
	require.Contains(t, text(`main`), "were archived")
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	require.Equal(t, http.StatusGone, b.do("GET", "/ops/skus/BLUE-MUG?before="+oldest, nil, nil).status)
	require.Equal(t, http.StatusNotFound, b.do("GET", "/ops/archives/ledger_nowhere", nil, nil).status)
	require.Equal(t, http.StatusBadRequest, b.do("GET", "/ops/archives/"+month.Partition+"?after=x", nil, nil).status)
}
