package metrics

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Which SKUs are hot: the hold requests of the last minute counted per SKU
// in this process, the top of them exported as stockhold_sku_holds_total
// and listed on the console's overview.
const (
	// HotTop is how many SKUs stockhold_sku_holds_total names; the
	// others are counted under OtherSKU, so the series stay bounded.
	HotTop = 20
	// OtherSKU is the label of the hold requests for SKUs outside the top.
	OtherSKU = "_other"
	// hotStep is one bucket of the window; the window is the current step
	// and the hotSteps-1 before it (a minute, in 10-second steps).
	hotStep  = 10 * time.Second
	hotSteps = 6
	// hotTracked bounds the SKUs one step counts: past it, a SKU not seen
	// yet in the step is not counted in the window (its requests still go
	// to OtherSKU). A SKU hot enough to matter is seen early in a step.
	hotTracked = 4096
)

var descSKUHolds = desc("stockhold_sku_holds_total",
	"Hold requests by SKU (a request counts once for each SKU it names), for the 20 SKUs with the most in the last minute in this process; "+
		"the others under sku=\"_other\". A SKU's series starts at 0 when it enters the top and goes when it leaves.", "sku")

// HotSKU is a SKU and its hold requests in the last minute.
type HotSKU struct {
	SKU   string `json:"sku"`
	Holds int64  `json:"holds"`
}

// hot counts hold requests per SKU in a window of steps, and keeps the
// counters stockhold_sku_holds_total exports: one per SKU of the top
// (chosen again at each step) and OtherSKU for every request not counted
// under a SKU of the top. So every request is counted in exactly one
// series, and every series only grows while it is exported.
type hot struct {
	mu    sync.Mutex
	now   func() time.Time
	steps [hotSteps]map[string]int64
	// cur is the index of the current step in steps, which began at
	// curStart.
	cur      int
	curStart time.Time
	shown    map[string]float64
	other    float64
}

func newHot(now func() time.Time) *hot {
	h := &hot{now: now, shown: map[string]float64{}}
	for i := range h.steps {
		h.steps[i] = map[string]int64{}
	}
	h.curStart = now().Truncate(hotStep)
	return h
}

// hotSKUs is this process's count.
var hotSKUs = newHot(time.Now)

// add counts one hold request naming sku.
func (h *hot) add(sku string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.advance()
	step := h.steps[h.cur]
	if n, ok := step[sku]; ok || len(step) < hotTracked {
		step[sku] = n + 1
	}
	if _, ok := h.shown[sku]; ok {
		h.shown[sku]++
	} else {
		h.other++
	}
}

// advance moves the window to now; entering a new step, it chooses the
// top again: SKUs that stay keep their counters, new ones start at 0.
// The caller holds mu.
func (h *hot) advance() {
	start := h.now().Truncate(hotStep)
	if !start.After(h.curStart) {
		return
	}
	moved := int(start.Sub(h.curStart) / hotStep)
	for range min(moved, hotSteps) {
		h.cur = (h.cur + 1) % hotSteps
		h.steps[h.cur] = map[string]int64{}
	}
	h.curStart = start
	shown := make(map[string]float64, HotTop)
	for _, s := range h.topLocked() {
		shown[s.SKU] = h.shown[s.SKU]
	}
	h.shown = shown
}

// topLocked is the top of the window, most requests first (ties by SKU).
func (h *hot) topLocked() []HotSKU {
	sum := map[string]int64{}
	for _, step := range h.steps {
		for sku, n := range step {
			sum[sku] += n
		}
	}
	out := make([]HotSKU, 0, len(sum))
	for sku, n := range sum {
		out = append(out, HotSKU{SKU: sku, Holds: n})
	}
	slices.SortFunc(out, func(a, b HotSKU) int {
		if c := cmp.Compare(b.Holds, a.Holds); c != 0 {
			return c
		}
		return cmp.Compare(a.SKU, b.SKU)
	})
	return out[:min(len(out), HotTop)]
}

func (h *hot) top() []HotSKU {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.advance()
	return h.topLocked()
}

func init() { prometheus.MustRegister(hotSKUs) }

// Describe and Collect make hot a prometheus.Collector.
func (h *hot) Describe(ch chan<- *prometheus.Desc) { ch <- descSKUHolds }

func (h *hot) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.advance()
	for sku, n := range h.shown {
		ch <- prometheus.MustNewConstMetric(descSKUHolds, prometheus.CounterValue, n, sku)
	}
	ch <- prometheus.MustNewConstMetric(descSKUHolds, prometheus.CounterValue, h.other, OtherSKU)
}

// HotSKUs returns the SKUs with the most hold requests in this process in
// the last minute (in 10-second steps), at most HotTop, most first.
func HotSKUs() []HotSKU { return hotSKUs.top() }
