package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestStopOneClientFromTheOverview: the overview offers to stop one shop
// key owner's sales; stopped, its holds are refused while another's go
// on, the overview shows what stopped it with a form to restart that asks
// why, and restarting says what it lifted.
func TestStopOneClientFromTheOverview(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dbtest.StockIn(t, e.pool, "A1", 10)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	overview := b.do("GET", "/ops/", nil, nil).body
	require.Contains(t, section(t, overview, "switches"), `<select name="client" aria-label="Client"><option>shop-a</option></select>`)

	token := b.csrf("/ops/")
	a := b.do("POST", "/ops/stop-sale", url.Values{"csrf": {token}, "active": {"true"}, "client": {"shop-a"}, "reason": {""}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Contains(t, html.UnescapeString(b.do("GET", "/ops/", nil, nil).body), "reason is required")
	a = b.do("POST", "/ops/stop-sale", url.Values{"csrf": {token}, "active": {"true"}, "client": {"shop-a"}, "reason": {"storefront oversells"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	overview = html.UnescapeString(b.do("GET", "/ops/", nil, nil).body)
	require.Contains(t, overview, "Sales to shop-a stopped by alice: storefront oversells.")
	require.Contains(t, overview, "Sales to <b>shop-a</b> are stopped: storefront oversells — by alice")
	require.Contains(t, overview, `<button type="submit">Restart sales to shop-a</button>`)

	_, _, err := e.app.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: "a", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeStopSale, de.Code)
	_, _, err = e.app.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop-b", IdempotencyKey: "b", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.NoError(t, err)

	a = b.do("POST", "/ops/stop-sale", url.Values{"csrf": {token}, "active": {"false"}, "client": {"shop-a"}, "reason": {"fixed"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	overview = html.UnescapeString(b.do("GET", "/ops/", nil, nil).body)
	require.Regexp(t, `Sales to shop-a restarted by alice: fixed\. Lifted what alice had stopped [0-9]+s ago: storefront oversells\.`, overview)
	require.NotContains(t, overview, "Restart sales to shop-a")
}

// TestResumeShowsWhatTrippedIt: a pool a protection rule paused shows on
// its page who paused it, when and why (the rule), beside the resume form
// that asks for a reason; resuming says what it lifted.
func TestResumeShowsWhatTrippedIt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dbtest.StockIn(t, e.pool, "A1", 10)
	_, err := e.app.Inventory.Pause(ctx, stock.SwitchRequest{SKU: "A1", Reason: "rule lock_waits: A1 stayed locked", Actor: "system:trip"})
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	page := html.UnescapeString(b.do("GET", "/ops/skus/A1", nil, nil).body)
	require.Regexp(t, `<p class="paused">Paused by system:trip [0-9]+s ago: rule lock_waits: A1 stayed locked</p>`, page)
	require.Contains(t, page, `placeholder="Why resume? (required)"`)

	token := b.csrf("/ops/skus/A1")
	a := b.do("POST", "/ops/skus/A1/resume", url.Values{"csrf": {token}, "pool": {"main"}, "reason": {"row unlocked"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	page = html.UnescapeString(b.do("GET", "/ops/skus/A1", nil, nil).body)
	require.Regexp(t, `Pool main of A1 resumed: row unlocked\. Lifted the pause by system:trip [0-9]+s ago: rule lock_waits: A1 stayed locked\.`, page)
	require.NotContains(t, page, `class="paused"`)
}

// TestRepairFormNamesRefs: the repair form takes refs; the preview keeps
// them for the apply, which stores them on the ledger row, and the SKU's
// ledger shows them.
func TestRepairFormNamesRefs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dbtest.StockIn(t, e.pool, "A1", 10)
	_, err := e.pool.Exec(ctx, `UPDATE stock SET total = total + 2, available = available + 2 WHERE sku = 'A1'`)
	require.NoError(t, err)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	token := b.csrf("/ops/skus/A1")
	form := url.Values{"csrf": {token}, "pool": {"main"}, "to": {"ledger"}, "reason": {"hand edit"}, "refs": {"o-1042, OPS-17,"}}
	a := b.do("POST", "/ops/skus/A1/repair", form, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	preview := b.do("GET", a.header.Get("Location"), nil, nil).body
	require.Contains(t, preview, `<input type="hidden" name="refs" value="o-1042, OPS-17">`)
	require.Contains(t, preview, `<input type="hidden" name="expected" value="-2,-2,0,0,0,0,0,0,0,0">`)
	form.Set("apply", "true")
	form.Set("refs", "o-1042, OPS-17")
	form.Set("expected", "-2,-2,0,0,0,0,0,0")
	a = b.do("POST", "/ops/skus/A1/repair", form, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "{o-1042,OPS-17}", e.scalar(`SELECT refs::text FROM ledger WHERE kind = 'repair'`))
	require.Contains(t, b.do("GET", "/ops/skus/A1", nil, nil).body, `<small class="refs">refs: o-1042, OPS-17</small>`)
}
