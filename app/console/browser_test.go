package console_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/internal/debian"
)

var (
	chromiumOnce sync.Once
	chromiumPath string
	chromiumErr  error
)

// chromium finds Debian's Chromium, installing it when it is missing and
// the tests run as root (CI); elsewhere the test is skipped.
func chromium(t *testing.T) string {
	t.Helper()
	chromiumOnce.Do(func() { chromiumPath, chromiumErr = debian.Ensure("chromium", "chromium") })
	if errors.Is(chromiumErr, debian.ErrNotRoot) {
		t.Skip(chromiumErr)
	}
	require.NoError(t, chromiumErr, "install chromium")
	return chromiumPath
}

// tab starts a fresh headless Chromium at phone size and returns a context
// to drive its tab.
func tab(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(412, 915),
		chromedp.Flag("hide-scrollbars", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(412, 915)))
	return ctx
}

// screenshot saves the page as docs/screenshots/name.png when
// UPDATE_SCREENSHOTS=1, so the README's pictures are of the real console
// and CI never dirties the tree.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := filepath.Join("..", "..", "docs", "screenshots")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// signIn opens path in the console, which asks for a key first, and signs
// in with the ops key; the caller waits for what the page should show.
func (e *env) signIn(path string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(e.base+path),
		chromedp.WaitVisible(`input[name=key]`),
		chromedp.SendKeys(`input[name=key]`, e.ops),
		chromedp.Click(`form[action="/ops/signin"] button`),
	)
}

// textOf returns a reader of the text of the first element a selector
// finds on the tab's page.
func textOf(t *testing.T, ctx context.Context) func(sel string) string {
	return func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		require.NoError(t, err, sel)
		return s
	}
}

// fits fails the test when the page in the tab is wider than the phone.
func fits(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	require.NoError(t, err)
	require.False(t, wide, "%s is wider than the phone", page)
}

// TestBrowserOperatorFlow drives the console in headless Chromium the way
// an operator would: sign in, find a SKU, pause and resume it, find a hold
// by its order reference and release it, dry-run a rollback then run it,
// acknowledge an alert, and open the job dashboard. Each action is checked
// in the database, with the signed-in key's name as the actor.
func TestBrowserOperatorFlow(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	dbtest.StockIn(e.t, e.pool, "BLUE-MUG", 120)
	dbtest.StockIn(e.t, e.pool, "RED-MUG", 40)
	hold := e.hold("k1", "order-7", "BLUE-MUG", 2)
	e.hold("k2", "order-8", "BLUE-MUG", 1)
	red1 := e.hold("k3", "order-9", "RED-MUG", 1)
	red2 := e.hold("k4", "order-10", "RED-MUG", 2)
	alert, err := alerts.New(e.pool, e.app.Inserter, false).Raise(bg, alerts.Raise{
		Level: alerts.Warning, Kind: "stuck_holds_waiting", Subject: "sku:BLUE-MUG/main", SKU: "BLUE-MUG", Pool: "main",
		Details: map[string]any{"held": 3}, Action: "Look at the SKU's stuck holds.",
	})
	require.NoError(t, err)
	_, err = e.app.Reconcile.Run(bg, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI})
	require.NoError(t, err)
	status := func(sql string, args ...any) func(c *assert.CollectT) string {
		return func(c *assert.CollectT) string { return e.scalarFor(c, sql, args...) }
	}
	eventually := func(want string, got func(*assert.CollectT) string, msg string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, want, got(c)) }, 20*time.Second, 50*time.Millisecond, msg)
	}

	// Sign in: the console sends a browser without a session to the form.
	require.NoError(t, chromedp.Do(ctx,
		e.signIn("/ops/"),
		chromedp.WaitVisible(`.tiles`),
	))
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.Equal(t, "Overview · stockhold ops", title)
	screenshot(t, ctx, "overview")

	// Find a SKU by the start of its name, open it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/skus"),
		chromedp.SendKeys(`input[name=q]`, "BLUE"),
		chromedp.Click(`form.search button`),
		// The list shows rows before any search: wait for the results
		// page (its form echoes the query), not a link of the first.
		chromedp.WaitVisible(`input[name=q][value="BLUE"]`),
		chromedp.WaitVisible(`a[href="/ops/skus/BLUE-MUG"]`),
		chromedp.Click(`a[href="/ops/skus/BLUE-MUG"]`),
		chromedp.WaitVisible(`form[action$="/pause"]`),
	))
	screenshot(t, ctx, "sku")

	// Pause it, then resume it, each with a reason.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(`form[action$="/pause"] input[name=reason]`, "count in progress"),
		chromedp.Click(`form[action$="/pause"] button`),
		chromedp.WaitVisible(`form[action$="/resume"]`),
	))
	require.Equal(t, "paused", e.scalar(`SELECT status FROM stock WHERE sku = 'BLUE-MUG'`))
	require.Equal(t, "alice count in progress",
		e.scalar(`SELECT actor || ' ' || reason FROM ledger WHERE sku = 'BLUE-MUG' AND kind = 'pause'`))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(`form[action$="/resume"] input[name=reason]`, "count done"),
		chromedp.Click(`form[action$="/resume"] button`),
		chromedp.WaitVisible(`form[action$="/pause"]`),
	))
	require.Equal(t, "on_sale", e.scalar(`SELECT status FROM stock WHERE sku = 'BLUE-MUG'`))
	require.Equal(t, "alice", e.scalar(`SELECT actor FROM ledger WHERE sku = 'BLUE-MUG' AND kind = 'resume'`))

	// Look a hold up by its order reference and release it.
	holdLink := fmt.Sprintf(`a[href="/ops/holds/%s"]`, hold)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/holds"),
		chromedp.SendKeys(`input[name=order_ref]`, "order-7"),
		chromedp.Click(`form.search button`),
		chromedp.WaitVisible(`input[name=order_ref][value="order-7"]`),
		chromedp.WaitVisible(holdLink),
		chromedp.Click(holdLink),
		chromedp.WaitVisible(`form[action$="/release"]`),
		chromedp.SendKeys(`form[action$="/release"] input[name=reason]`, "customer called"),
		chromedp.Click(`form[action$="/release"] button`),
		chromedp.WaitVisible(`.flash`),
	))
	require.Equal(t, "released alice customer called",
		e.scalar(`SELECT status || ' ' || released_by || ' ' || release_reason FROM reservations WHERE id = $1`, hold))

	// A rollback starts as a dry run, whose page shows the count before it
	// offers the real rollback.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/rollbacks"),
		chromedp.SendKeys(`input[name=sku]`, "RED-MUG"),
		chromedp.SendKeys(`form[action="/ops/rollbacks"] input[name=reason]`, "payment provider outage"),
		chromedp.Click(`form[action="/ops/rollbacks"] button`),
		chromedp.WaitVisible(`form[action$="/run"] button`),
	))
	count, err := chromedp.Run(ctx, chromedp.Text(`#dry-run-count`))
	require.NoError(t, err)
	require.Equal(t, "Would release 2 holds (3 units).", strings.TrimSpace(count))
	require.Equal(t, "held held", e.scalar(`SELECT string_agg(status, ' ') FROM reservations WHERE id IN ($1, $2)`, red1, red2),
		"a dry run changes nothing")
	screenshot(t, ctx, "rollback")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`form[action$="/run"] button`)))
	eventually("released released", status(`SELECT string_agg(status, ' ') FROM reservations WHERE id IN ($1, $2)`, red1, red2),
		"the real rollback releases both holds")
	require.Equal(t, "alice payment provider outage", e.scalar(
		`SELECT operator || ' ' || reason FROM rollback_requests WHERE NOT dry_run`))
	require.Equal(t, "2", e.scalar(`SELECT count(*)::text FROM ledger WHERE sku = 'RED-MUG' AND kind = 'rollback' AND actor = 'alice'`))
	// Its page shows the reconciliation of the SKUs it covered that its
	// last batch asked for.
	eventually("rollback", status(`SELECT coalesce(max(r.trigger), '') FROM rollback_requests q JOIN reconcile_runs r ON r.id = q.reconcile_run_id WHERE NOT q.dry_run`),
		"the real rollback asks for a reconciliation of its SKUs")
	real := e.scalar(`SELECT id::text FROM rollback_requests WHERE NOT dry_run`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.base+"/ops/rollbacks/"+real), chromedp.WaitVisible(`.facts`)))
	facts, err := chromedp.Run(ctx, chromedp.Text(`.facts`))
	require.NoError(t, err)
	require.Contains(t, facts, "reconciliation #")

	// Acknowledge the alert.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/alerts"),
		chromedp.Click(fmt.Sprintf(`#alert-%d form.ack button`, alert.ID)),
		chromedp.WaitVisible(`.flash`),
	))
	require.Equal(t, "acked alice", e.scalar(`SELECT status || ' ' || acked_by FROM alerts WHERE id = $1`, alert.ID))

	// The session opens River's dashboard, linked from every page: no
	// second sign-in.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`nav a[href="/ops/jobs/"]`),
		chromedp.Navigate(e.base+"/ops/jobs/"),
		chromedp.Poll[chromedp.Void](`document.title === "River" && document.querySelector("#root") !== null && document.querySelector("#root").childElementCount > 0`),
	))
	title, err = chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.Equal(t, "River", title)
	// And the dashboard leads back to the console.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`#stockhold-console`),
		chromedp.Click(`#stockhold-console`),
		chromedp.WaitVisible(`#open-alerts`),
	))
	title, err = chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.Contains(t, title, "stockhold ops")
}

// TestBrowserSeatMap: a SKU of seats shows a seat map, by row and
// position, coloured by status, a held or sold seat linking to its hold;
// the SKU list marks it as units.
func TestBrowserSeatMap(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	var plan []stock.UnitSpec
	for _, row := range []string{"A", "B", "C", "D"} {
		for p := int32(1); p <= 12; p++ {
			pos := p
			plan = append(plan, stock.UnitSpec{ID: fmt.Sprintf("%s-%d", row, p), Group: row, Position: &pos})
		}
	}
	_, _, err := e.app.Inventory.AddUnitsOnce(bg, idempotency.NewKey("ops", "plan"), stock.UnitsChange{SKU: "GALA", Reason: "plan", Actor: "ops", Units: plan})
	require.NoError(t, err)
	seatsHold := func(key string, item inventory.Item) uuid.UUID {
		r, _, err := e.app.Inventory.Hold(bg, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: key, OrderRef: key, Items: []inventory.Item{item}})
		require.NoError(t, err)
		return r.ID
	}
	held := seatsHold("ana", inventory.Item{SKU: "GALA", Units: []string{"A-5", "A-6"}})
	sold := seatsHold("ben", inventory.Item{SKU: "GALA", Quantity: 4, Adjacent: true})
	_, err = e.app.Inventory.Confirm(bg, sold, inventory.Caller{Name: "shop-a"})
	require.NoError(t, err)
	_, _, err = e.app.Inventory.RetireUnitsOnce(bg, idempotency.NewKey("ops", "broken"), stock.UnitsChange{SKU: "GALA", Reason: "broken", Actor: "ops",
		Units: []stock.UnitSpec{{ID: "C-7"}}})
	require.NoError(t, err)

	require.NoError(t, chromedp.Do(ctx,
		e.signIn("/ops/"),
		chromedp.WaitVisible(`.tiles`),
		chromedp.Navigate(e.base+"/ops/skus?q=GA"),
		chromedp.WaitVisible(`a[href="/ops/skus/GALA"]`),
	))
	badge, err := chromedp.Run(ctx, chromedp.Text(`table .badge`))
	require.NoError(t, err)
	require.Equal(t, "units", badge)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`a[href="/ops/skus/GALA"]`),
		chromedp.WaitVisible(`.seatmap`),
	))
	count := func(sel string) int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 4, count(`.seatmap .seatrow`))
	require.Equal(t, 41, count(`.seatmap .seat.available`))
	require.Equal(t, 2, count(fmt.Sprintf(`.seatmap a.seat.held[href="/ops/holds/%s"]`, held)))
	require.Equal(t, 4, count(fmt.Sprintf(`.seatmap a.seat.sold[href="/ops/holds/%s"]`, sold)))
	require.Equal(t, 1, count(`.seatmap .seat.retired[title="C-7: retired"]`))
	screenshot(t, ctx, "seatmap")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(fmt.Sprintf(`.seatmap a.seat.held[href="/ops/holds/%s"]`, held)),
		chromedp.WaitVisible(`form[action$="/release"]`),
	))
}

// TestBrowserLocations shows a SKU per location with every state (two
// warehouses, a hold allocated to the first, units moved to damaged and
// to quality control, a transfer on its way), and the locations page:
// each location's totals, the transfer in transit with its age, a count
// with its difference. At phone width nothing scrolls sideways. Its
// screenshots are docs/screenshots/locations-sku.png and locations.png.
func TestBrowserLocations(t *testing.T) {
	t.Parallel()
	ctx := tab(t)
	e := setup(t)
	bg := context.Background()
	inv := e.app.Inventory
	key := func(k string) idempotency.Key { return idempotency.NewKey("alice", k) }
	for i, l := range []string{"paris", "berlin"} {
		_, _, err := inv.CreateLocationOnce(bg, key(l), stock.NewLocation{ID: l, Name: strings.ToUpper(l[:1]) + l[1:], Priority: int32(i + 1), Actor: "alice"})
		require.NoError(t, err)
	}
	for loc, n := range map[string]int64{"paris": 20, "berlin": 12} {
		_, err := inv.Adjust(bg, stock.Adjustment{SKU: "MUG", Location: loc, Delta: n, Reason: "delivery", Actor: "alice"})
		require.NoError(t, err)
	}
	_, _, err := inv.Hold(bg, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: "o-1", OrderRef: "o-1", Items: []inventory.Item{{SKU: "MUG", Quantity: 3}}})
	require.NoError(t, err)
	_, _, err = inv.MoveOnce(bg, key("dropped"), stock.Move{SKU: "MUG", Location: "berlin", From: "available", To: "damaged", Quantity: 2, Reason: "dropped", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.MoveOnce(bg, key("check"), stock.Move{SKU: "MUG", Location: "paris", From: "available", To: "quality_control", Quantity: 1, Reason: "returned, to check", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.CreateTransferOnce(bg, key("rebalance"), stock.NewTransfer{SKU: "MUG", From: "paris", To: "berlin", Quantity: 5, Reason: "rebalance", Actor: "alice"})
	require.NoError(t, err)
	_, _, err = inv.CountOnce(bg, key("count"), stock.StockCount{SKU: "MUG", Location: "berlin", Counted: 9, Reason: "monthly count", Actor: "alice"})
	require.NoError(t, err)

	text := textOf(t, ctx)
	require.NoError(t, chromedp.Do(ctx,
		e.signIn("/ops/"),
		chromedp.WaitVisible(`.tiles`),
		chromedp.Navigate(e.base+"/ops/skus/MUG"),
		chromedp.WaitVisible(`table.bylocation`),
	))
	rows := text(`table.bylocation`)
	// paris: 20 in, 3 held, 1 to quality control, 5 sent: 11 available.
	require.Regexp(t, `paris\s+main\s+11\s+3\s+0\s+1\s+0\s+0\s+15\s+0\s+0\s+on sale`, rows)
	// berlin: 12 in, 2 damaged, 5 on their way, counted 9 on the shelf (three less).
	require.Regexp(t, `berlin\s+main\s+7\s+0\s+0\s+0\s+2\s+0\s+9\s+5\s+0\s+on sale`, rows)
	require.Contains(t, text(`table.ledger`), "incoming +5")
	fits(t, ctx, "the SKU's page")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`nav a[href="/ops/locations"]`),
		chromedp.WaitVisible(`table.transfers`),
	))
	require.Regexp(t, `paris\s+Paris\s+1\s+taken\s+11\s+3\s+0\s+1\s+0\s+0\s+15\s+0`, text(`table.locations`))
	transit := text(`table.transfers`)
	require.Contains(t, transit, "MUG")
	require.Regexp(t, `paris\s+berlin\s+5\s+0\s+5`, transit)
	require.Contains(t, text(`table.counts`), "monthly count")
	require.Regexp(t, `berlin\s+9\s+12\s+-3`, text(`table.counts`))
	fits(t, ctx, "the locations page")

	// The screenshots, at a desktop's width.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)))
	screenshot(t, ctx, "locations")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/ops/skus/MUG"),
		chromedp.WaitVisible(`table.bylocation`),
	))
	screenshot(t, ctx, "locations-sku")
}
