package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/internal/debian"
)

// phone is the viewport the pages are read at: a phone held upright.
const phoneWidth, phoneHeight = 390, 844

// TestBrowserDocs reads the API reference in Chromium at phone size, as a
// person on call would: from the contents at /docs a tap on an operation
// opens its tag's page at that operation, a tap on a body's type opens the
// schema, and every page of the reference (and the problems' pages) loads
// nothing besides itself (no script, stylesheet, font or image, from here
// or elsewhere), is no wider than the phone, and a tag's page opens on the
// list of its operations. It logs each page's height.
func TestBrowserDocs(t *testing.T) {
	t.Parallel()
	path, err := debian.Ensure("chromium", "chromium")
	if errors.Is(err, debian.ErrNotRoot) {
		t.Skip(err)
	}
	require.NoError(t, err, "install chromium")
	e := setup(t, nil)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(phoneWidth, phoneHeight))
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(phoneWidth, phoneHeight)))

	eval := func(js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		require.NoError(t, err, js)
		return v
	}
	// opens taps the link sel and waits for page to show the element id
	// at the top of the screen, as a tap on a link to #id does.
	opens := func(sel, page, id string) {
		t.Helper()
		err := chromedp.Do(ctx, chromedp.Click(sel), chromedp.WaitReady("#"+id),
			chromedp.Poll[chromedp.Void](`location.pathname == "`+page+`" && document.readyState == "complete" && `+
				`Math.abs(document.getElementById("`+id+`").getBoundingClientRect().top) < 2`, chromedp.WithPollingTimeout(10*time.Second)))
		require.NoError(t, err, "a tap on %s opens %s#%s at the top of the screen", sel, page, id)
	}

	// From the contents to an operation, and on to its body's schema.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.url+"/docs"), chromedp.WaitReady("body")))
	opens(`a[href="/docs/holds#op-createReservation"]`, "/docs/holds", "op-createReservation")
	opens(`#op-createReservation a[href="/docs/schemas#schema-HoldRequest"]`, "/docs/schemas", "schema-HoldRequest")

	pages := []string{"/docs"}
	for _, tag := range eval(`[...document.querySelectorAll("nav li a")].map(a => a.getAttribute("href"))`).([]any) {
		pages = append(pages, tag.(string))
	}
	require.Contains(t, pages, "/docs/holds")
	pages = append(pages, "/problems", "/problems/out_of_stock")
	for _, page := range pages {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.url+page), chromedp.WaitReady("body")), page)
		require.Empty(t, eval(`performance.getEntriesByType("resource").map(r => r.name)`), "%s loads nothing besides itself", page)
		require.Equal(t, false, eval(`document.documentElement.scrollWidth > window.innerWidth`), "%s is no wider than a phone", page)
		if strings.HasPrefix(page, "/docs/") && page != "/docs/schemas" {
			top := eval(`document.querySelector("main > ul.ops").getBoundingClientRect().top`).(float64)
			require.Less(t, top, float64(phoneHeight/2), "%s opens on the list of its operations", page)
		}
		t.Logf("%s is %v px tall at %d px wide", page, eval(`document.documentElement.scrollHeight`), phoneWidth)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.Equal(t, "out_of_stock: Out of stock · stockhold", title)
}
