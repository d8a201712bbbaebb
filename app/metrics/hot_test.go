package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// series collects what h exports, by sku label.
func (h *hot) series(t *testing.T) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	h.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		require.NoError(t, m.Write(&pb))
		out[pb.GetLabel()[0].GetValue()] = pb.GetCounter().GetValue()
	}
	return out
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// TestHotSKUsStayBounded: of 30 SKUs asked for, the 20 most asked in the
// last minute are exported by name and the rest as _other; every request
// is in exactly one series; a SKU enters at 0 and leaves when it falls out
// of the top; _other never goes down; a minute later the window is empty.
func TestHotSKUsStayBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h := newHot(func() time.Time { return now })
	total := 0.0
	ask := func(sku string, n int) {
		for range n {
			h.add(sku)
			total++
		}
	}
	for i := range 30 {
		ask(fmt.Sprintf("S%02d", i), i+1) // S29 the most asked
	}
	got := h.series(t)
	require.Equal(t, map[string]float64{OtherSKU: total}, got, "no top chosen before the first step ends")

	now = now.Add(hotStep)
	top := h.top()
	require.Len(t, top, HotTop)
	require.Equal(t, HotSKU{SKU: "S29", Holds: 30}, top[0])
	require.Equal(t, HotSKU{SKU: "S10", Holds: 11}, top[HotTop-1])
	ask("S29", 5)
	ask("S00", 2) // not in the top: under _other
	got = h.series(t)
	require.Len(t, got, HotTop+1, "bounded: the top and _other")
	require.InDelta(t, 5.0, got["S29"], 0, "a SKU's series starts at 0 when it enters the top")
	require.InDelta(t, 0.0, got["S10"], 0)
	require.NotContains(t, got, "S00")
	require.InDelta(t, total, sum(got), 0, "every request is in exactly one series")
	other := got[OtherSKU]

	// S00 becomes the hottest; S10, the least of the top, falls out.
	ask("S00", 100)
	now = now.Add(hotStep)
	got = h.series(t)
	require.Contains(t, got, "S00")
	require.NotContains(t, got, "S10")
	require.InDelta(t, 5.0, got["S29"], 0, "a SKU that stays keeps its count")
	require.GreaterOrEqual(t, got[OtherSKU], other, "_other never goes down")
	ask("S00", 1)
	require.InDelta(t, 1.0, h.series(t)["S00"], 0)

	// A minute without requests empties the window and the top.
	now = now.Add(hotSteps * hotStep)
	require.Empty(t, h.top())
	got = h.series(t)
	require.Equal(t, []string{OtherSKU}, keys(got))
}

// TestHotSKUsCountABoundedNumberPerStep: past hotTracked SKUs in one step,
// new ones are not counted in the window (their requests still are, under
// _other), and the ones seen before go on counting.
func TestHotSKUsCountABoundedNumberPerStep(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h := newHot(func() time.Time { return now })
	h.add("FIRST")
	for i := range hotTracked + 10 {
		h.add(fmt.Sprint("C", i))
	}
	h.add("FIRST")
	require.Len(t, h.steps[h.cur], hotTracked)
	require.Equal(t, int64(2), h.steps[h.cur]["FIRST"])
	require.InDelta(t, float64(hotTracked+12), h.series(t)[OtherSKU], 0)
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
