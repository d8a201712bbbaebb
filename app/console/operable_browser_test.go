package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// TestBrowserFiveQuestions reads the overview in Chromium at 390 px, as a
// person on call would, and finds the five go-live questions answered:
// stock left (lowest first, the pool under its threshold flagged with the
// threshold), holds expiring in the next 10 minutes, orders confirmed
// last, open alerts with their owner (taken from the page), and the
// switches in force. Holds and SKUs are listed before any search, hold ids
// are shown long enough to tell apart, a campaign's pool is shown apart
// from main, and no page is wider than the phone.
func TestBrowserFiveQuestions(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	dbtest.StockIn(e.t, e.pool, "BLUE-MUG", 120)
	dbtest.StockIn(e.t, e.pool, "RED-MUG", 40)
	dbtest.StockIn(e.t, e.pool, "GREEN-MUG", 30)
	_, err := e.app.Inventory.SetThreshold(bg, stock.Threshold{SKU: "RED-MUG", Threshold: ptr[int64](38), Actor: "test"})
	require.NoError(t, err)
	ids := []string{
		e.hold("k1", "order-1", "RED-MUG", 2).String(),
		e.hold("k2", "order-2", "BLUE-MUG", 1).String(),
		e.hold("k3", "order-3", "BLUE-MUG", 1).String(),
	}
	paid := e.hold("k4", "order-paid", "BLUE-MUG", 1)
	_, err = e.app.Inventory.Confirm(bg, paid, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err)
	_, err = e.pool.Exec(bg, `UPDATE reservations SET expires_at = now() + interval '2 minutes' WHERE id = $1`, ids[0])
	require.NoError(t, err)
	_, err = e.app.Inventory.Pause(bg, stock.SwitchRequest{SKU: "GREEN-MUG", Reason: "recount", Actor: "bob"})
	require.NoError(t, err)
	_, err = e.app.Inventory.SetStopSale(bg, stock.StopSaleChange{Active: true, Reason: "payments down", Actor: "bob"})
	require.NoError(t, err)
	alert, err := alerts.New(e.pool, e.app.Inserter, false).Raise(bg, alerts.Raise{
		Level: alerts.Warning, Kind: "late_confirmation", Subject: "hold:x", Details: map[string]any{}, Action: "Reinstate or refund.",
	})
	require.NoError(t, err)
	// A campaign's pool of BLUE-MUG, apart from main.
	req, err := http.NewRequest("POST", e.base+"/v1/campaigns", strings.NewReader(fmt.Sprintf(
		`{"id": "bf", "starts_at": %q, "ends_at": %q, "hold_ttl_seconds": 60, "allotments": [{"sku": "BLUE-MUG", "quantity": 10}]}`,
		time.Now().UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.ops)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "bf")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, 201, res.StatusCode)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "1", e.scalarFor(c, `SELECT count(*)::text FROM stock WHERE pool = 'bf'`))
	}, 20*time.Second, 50*time.Millisecond, "the campaign starts")

	text := textOf(t, ctx)
	fits := func(page string) {
		t.Helper()
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		require.NoError(t, err)
		require.False(t, wide, "%s is wider than the phone", page)
		// Every visible field's placeholder fits in it, whole.
		cut, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			const c = document.createElement("canvas").getContext("2d");
			return [...document.querySelectorAll("input[placeholder]")].filter(i => i.offsetParent !== null).filter(i => {
				const s = getComputedStyle(i);
				c.font = s.font;
				return c.measureText(i.placeholder).width > i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) + 1;
			}).map(i => i.placeholder);
		})()`))
		require.NoError(t, err)
		require.Empty(t, cut, "%s cuts these placeholders short", page)
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844),
		e.signIn("/ops/"),
		chromedp.WaitVisible(`#stock`),
	))
	fits("the overview")

	// How much stock is left: lowest first, the pool under its threshold
	// flagged, with the threshold.
	first := text(`#stock tr:nth-child(2)`)
	require.Contains(t, first, "RED-MUG")
	require.Contains(t, first, "low")
	require.Contains(t, first, "38")
	require.Contains(t, text(`#stock`), "bf", "the campaign's pool is its own row")

	// Which holds expire soon, which orders were confirmed.
	require.Contains(t, text(`#expiring`), "order-1")
	require.NotContains(t, text(`#expiring`), "order-2", "it expires in 15 minutes")
	require.Contains(t, text(`#confirmed`), "order-paid")

	// Who handles each difference: nobody yet, then the operator who
	// takes it.
	require.Contains(t, text(`#open-alerts`), "nobody")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#open-alerts form.take button`),
		chromedp.WaitVisible(`.flash`),
	))
	require.Contains(t, text(`.flash`), "is alice's")
	require.Equal(t, "alice", e.scalar(`SELECT owner FROM alerts WHERE id = $1`, alert.ID))
	require.Contains(t, text(`#open-alerts`), "alice")

	// The switches in force.
	require.Contains(t, text(`#stop-sale`), "payments down")
	switches := text(`#switches`)
	require.Contains(t, switches, "GREEN-MUG")
	require.Contains(t, switches, "recount")

	// Holds before any search, each id shown long enough to be told apart
	// and linking to the whole id.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/holds"),
		chromedp.WaitVisible(`table.stack`),
	))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.stack td[data-label=hold] a")].map(a => a.textContent.trim())`))
	require.NoError(t, err)
	links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.stack td[data-label=hold] a")].map(a => a.getAttribute("href"))`))
	require.NoError(t, err)
	fits("/ops/holds")
	require.Len(t, shown, 4)
	seen := map[string]bool{}
	for i, s := range shown {
		require.False(t, seen[s], "%q is shown for two holds: %v", s, shown)
		seen[s] = true
		full := strings.TrimPrefix(links[i], "/ops/holds/")
		require.Len(t, full, 36)
		require.True(t, strings.HasPrefix(full, s), "%q is not a prefix of %q", s, full)
	}

	// SKUs before any search, one row per pool.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/skus"),
		chromedp.WaitVisible(`table.pools`),
	))
	fits("/ops/skus")
	pools, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("table.pools tr")].slice(1).map(r => r.querySelector("[data-label=SKU]").textContent.trim() + "/" + r.querySelector("[data-label=pool]").textContent.trim())`))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"BLUE-MUG/main", "BLUE-MUG/bf", "RED-MUG/main", "GREEN-MUG/main"}, pools)

	// Every other page with tables fits too: no table scrolls sideways
	// inside its box (the ledger's eleven columns did).
	for _, page := range []string{"/ops/skus/BLUE-MUG", links[0], "/ops/holds/" + ids[1], "/ops/campaigns", "/ops/campaigns/bf", "/ops/rollbacks", "/ops/reconciliations", "/ops/"} {
		// Loaded when its heading is there, asked of the page itself: a
		// WaitVisible here now and then never returned (chromedp lost the
		// new document's nodes), failing the test at its deadline.
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.base+page)), page)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && document.querySelector("h1") !== null`))
			assert.NoError(c, err)
			assert.True(c, ok)
		}, 20*time.Second, 50*time.Millisecond, page)
		fits(page)
		boxes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll(".scroll")].filter(d => d.scrollWidth > d.clientWidth).map(d => d.textContent.trim().slice(0, 40))`))
		require.NoError(t, err)
		require.Empty(t, boxes, "%s has tables that scroll sideways", page)
	}

	// A paused pool's page: the box to resume "even if the books disagree"
	// is a box the size of a letter, on the same line as its words.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.base+"/ops/skus/GREEN-MUG"), chromedp.WaitVisible(`form[action$="/resume"]`)))
	fits("/ops/skus/GREEN-MUG")
	box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
		const i = document.querySelector('form[action$="/resume"] input[type=checkbox]');
		const b = i.getBoundingClientRect(), l = i.closest("label").getBoundingClientRect();
		return [b.width, b.height, l.height, parseFloat(getComputedStyle(i.closest("label")).lineHeight) || 24];
	})()`))
	require.NoError(t, err)
	require.LessOrEqual(t, box[0], 24.0, "the checkbox's width")
	require.LessOrEqual(t, box[1], 24.0, "the checkbox's height")
	require.Less(t, box[2], 2*box[3], "the checkbox and its words on one line")

	// Stop-sale is lifted from the page, with a reason.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/"),
		chromedp.SendKeys(`form[action="/ops/stop-sale"] input[name=reason]`, "payments back"),
		chromedp.Click(`form[action="/ops/stop-sale"] button`),
		chromedp.WaitVisible(`.flash`),
	))
	require.Equal(t, "false alice payments back", e.scalar(`SELECT active::text || ' ' || actor || ' ' || reason FROM stop_sale`))
}

func ptr[T any](v T) *T { return &v }

// TestBrowserOverviewAlertsFirstOnAPhone: on a phone the open alerts are
// on the overview's first screen, above the stock left, however many SKUs
// there are (with many SKUs the alerts were thousands of pixels down,
// below every stock card).
func TestBrowserOverviewAlertsFirstOnAPhone(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	for i := range 30 {
		dbtest.StockIn(e.t, e.pool, fmt.Sprintf("SKU-%02d", i), int64(10+i))
	}
	_, err := alerts.New(e.pool, e.app.Inserter, false).Raise(context.Background(), alerts.Raise{
		Level: alerts.Critical, Kind: "books_out_of_balance", Subject: "sku:SKU-07/main", SKU: "SKU-07", Pool: "main",
		Details: map[string]any{}, Action: "Repair the books, then resume.",
	})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844),
		e.signIn("/ops/"),
		chromedp.WaitVisible(`#stock`),
	))
	place, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
		const top = id => document.getElementById(id).getBoundingClientRect().top + window.scrollY;
		return [top("open-alerts"), top("stock"), window.innerHeight, document.documentElement.scrollHeight];
	})()`))
	require.NoError(t, err)
	alertsAt, stockAt, screen, page := place[0], place[1], place[2], place[3]
	require.Greater(t, page, 2*screen, "the page is long: thirty SKUs of stock")
	require.Less(t, alertsAt, stockAt, "the alerts come before the stock")
	require.Less(t, alertsAt+60, screen, "the alerts are on the first screen (at %.0f px of %.0f)", alertsAt, screen)
	shown, err := chromedp.Run(ctx, chromedp.Text(`#open-alerts`))
	require.NoError(t, err)
	require.Contains(t, shown, "books_out_of_balance")
}
