package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/internal/debian"
)

// TestBrowserDocs opens the API reference and a problem's page in
// Chromium at phone width: each loads nothing besides itself (no script,
// stylesheet, font or image, from here or elsewhere), shows every
// operation, and is no wider than the phone.
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
		chromedp.WindowSize(390, 844))
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)))

	for _, page := range []struct {
		path string
		ops  bool
	}{{"/docs", true}, {"/problems", false}, {"/problems/out_of_stock", false}} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.url+page.path), chromedp.WaitReady("body")), page.path)
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(r => r.name)`))
		require.NoError(t, err)
		require.Empty(t, loaded, "%s loads nothing besides itself", page.path)
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		require.NoError(t, err)
		require.False(t, wide, "%s is no wider than a phone", page.path)
		if page.ops {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("section.op[id^=op-]").length`))
			require.NoError(t, err)
			require.GreaterOrEqual(t, n, 45, "every operation has its section")
		}
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.Equal(t, "out_of_stock: Out of stock · stockhold", title)
}
