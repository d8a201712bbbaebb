package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// result is one line of the table.
type result struct {
	Scenario string  `json:"scenario"`
	Clients  int     `json:"clients"`
	Holds    int64   `json:"holds"`
	Seconds  float64 `json:"seconds"`
	// Rate is holds made per second (requests answered per second for
	// flash, whose point is the refusals).
	Rate   float64 `json:"holds_per_second"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
	// RSS is the server's peak resident memory during the scenario.
	RSS float64 `json:"server_rss_mb"`
	// ServerCPU is the CPU time the server process spent per request
	// while the scenario's requests ran (user and system, from /proc):
	// what a request costs the server, whatever else shares the machine.
	ServerCPU float64 `json:"server_cpu_us_per_request,omitempty"`
	// DatabaseCPU is the same for the PostgreSQL backends serving the
	// bench database, when they run on this machine.
	DatabaseCPU float64 `json:"database_cpu_us_per_request,omitempty"`
	// Baseline is the bare-SQL transaction's rate at the same concurrency.
	Baseline    float64 `json:"baseline_tx_per_second,omitempty"`
	BaselineP99 float64 `json:"baseline_p99_ms,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"`
	// VsSpread is the rate against the spread scenario's in the same run
	// (locations).
	VsSpread float64 `json:"vs_spread,omitempty"`
	// ExpiryLag is how late holds expired (released_at - expires_at).
	ExpiryLagP50 float64 `json:"expiry_lag_p50_ms,omitempty"`
	ExpiryLagP99 float64 `json:"expiry_lag_p99_ms,omitempty"`
	ExpiryLagMax float64 `json:"expiry_lag_max_ms,omitempty"`
	Note         string  `json:"note,omitempty"`
	// Figures are the numbers beyond these that a goal is read from
	// (goals.go), by name: "held" of flash, "campaign_late_ms" of expiry,
	// "vs_hot" of soldout, and so on.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// figure records a number a goal is read from.
func (r *result) figure(name string, v float64) {
	if r.Figures == nil {
		r.Figures = map[string]float64{}
	}
	r.Figures[name] = v
}

// tally collects what the requests of a run did.
type tally struct {
	ok, errs atomic.Int64
	mu       sync.Mutex
	lat      []time.Duration
	firstErr atomic.Value
	// cpu and dbCPU are the server's and the database backends' CPU time
	// while the requests ran.
	cpu, dbCPU time.Duration
}

func (t *tally) add(lats []time.Duration) {
	t.mu.Lock()
	t.lat = append(t.lat, lats...)
	t.mu.Unlock()
}

func (t *tally) fail(err error) {
	t.errs.Add(1)
	t.firstErr.CompareAndSwap(nil, err.Error())
}

// answers counts the requests answered, errors left out: each closed-loop
// request's latency is kept, error or not.
func (t *tally) answers() int64 { return int64(len(t.lat)) - t.errs.Load() }

// fill puts the tally's figures into r.
func (t *tally) fill(r *result, elapsed time.Duration) {
	r.Holds = t.ok.Load()
	r.Seconds = elapsed.Seconds()
	r.Rate = float64(r.Holds) / elapsed.Seconds()
	r.Errors = t.errs.Load()
	if len(t.lat) > 0 {
		r.ServerCPU = float64(t.cpu.Microseconds()) / float64(len(t.lat))
		r.DatabaseCPU = float64(t.dbCPU.Microseconds()) / float64(len(t.lat))
	}
	r.P50, r.P95, r.P99, r.Max = percentiles(t.lat)
	if e, ok := t.firstErr.Load().(string); ok && r.Note == "" {
		r.Note = "first error: " + e
	}
}

func percentiles(lat []time.Duration) (p50, p95, p99, mx float64) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		i := int(q * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	return at(0.50), at(0.95), at(0.99), at(1)
}

// timed starts a closed loop's timed phase of length d: its profile
// (with -profile), its deadline (on the context it returns), its progress
// lines and its count of CPU time; end stops them, in that order reversed.
func (b *bench) timed(ctx context.Context, name string, d time.Duration, t *tally) (_ context.Context, end func()) {
	unprofile := b.profiled(ctx, name, d)
	ctx, cancel := context.WithTimeout(ctx, d)
	stop := b.progress(name, t)
	uncount := b.measureCPU(ctx, t)
	return ctx, func() {
		uncount()
		stop()
		cancel()
		unprofile()
	}
}

// closedLoop runs clients workers, each doing one request after another
// until d has passed; do returns whether the request made a hold.
func (b *bench) closedLoop(ctx context.Context, name string, clients int, d time.Duration, t *tally,
	do func(worker, i int) (bool, error)) time.Duration {
	ctx, end := b.timed(ctx, name, d, t)
	defer end()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lats []time.Duration
			for i := 0; ctx.Err() == nil; i++ {
				s := time.Now()
				ok, err := do(w, i)
				lats = append(lats, time.Since(s))
				switch {
				case err != nil:
					t.fail(err)
				case ok:
					t.ok.Add(1)
				}
			}
			t.add(lats)
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// A leg is one side of a comparison that alternate runs in turns.
type leg struct {
	name string
	t    *tally
	// do is closedLoop's; its i goes on from turn to turn (each turn,
	// the warm-up's first, starts perTurn after the last), so keys made
	// from it stay unique.
	do func(worker, i int) (bool, error)
	// settle, if set, waits for the work the leg's requests left behind
	// off the clock (releases still queued) to be done, on the leg's
	// clock, so that the next leg starts on a quiet server and no leg's
	// figures carry work of another.
	settle func()
	// el is the leg's time over every turn, settling included; settled
	// is how much of it settling took.
	el, settled time.Duration
	// rates are the leg's holds/s in each turn, in order (the warm-up's
	// left out).
	rates []float64
}

// perTurn is more requests than a worker makes in one turn.
const perTurn = 1 << 24

// alternate runs each leg with clients workers for d in all, in turns
// (-turns, 5 by default): d/turns of each leg in order, turns times over.
// The legs of a comparison are
// then measured over the same stretch of the run, so that what the
// shared machine does meanwhile (other work, a neighbour's steal) weighs
// on each alike: measured one after the other, 5 s each, the seats
// scenario's ratios spread from 0.24x to 0.39x on identical code. A
// round of turns first warms every leg up, counted nowhere (a leg's first
// turn is its first touch of its SKU, table and connections: the 50,000
// seat venue's had a p99 of 386 ms, its later turns 50 to 96 ms).
func (b *bench) alternate(ctx context.Context, clients int, d time.Duration, legs ...*leg) {
	turns := b.o.turns
	for n := -1; n < turns; n++ {
		for _, l := range legs {
			if ctx.Err() != nil {
				return
			}
			name, t := fmt.Sprintf("%s %d/%d", l.name, n+1, turns), l.t
			if n < 0 {
				name, t = l.name+" (warm-up)", &tally{}
			}
			start, made := time.Now(), t.ok.Load()
			b.closedLoop(ctx, name, clients, d/time.Duration(turns), t, func(w, i int) (bool, error) {
				return l.do(w, (n+1)*perTurn+i)
			})
			var settled time.Duration
			if l.settle != nil {
				at := time.Now()
				l.settle()
				settled = time.Since(at)
			}
			if n < 0 {
				continue
			}
			el := time.Since(start)
			l.settled += settled
			l.el += el
			l.rates = append(l.rates, float64(t.ok.Load()-made)/el.Seconds())
		}
	}
}

// openLoop sends rate requests a second for d, each from its own goroutine
// (up to limit at once), and returns how late the pacer was.
//
// Latency is counted from when a request was sent, or from when it was due
// whenever the server held the pacer back (every slot taken by requests
// still waiting for answers): so a slow answer shows as latency instead of
// a lower rate, but the pacer's own timer, which on this machine wakes up
// 0.5 ms late at p50 and several ms at p99 even when it is idle, is not
// charged to the server. The pacer catches up at once when it wakes late:
// the rate holds.
func (b *bench) openLoop(ctx context.Context, name string, rate float64, d time.Duration, t *tally,
	do func(i int) (bool, error)) (time.Duration, pacing) {
	defer b.profiled(ctx, name, d)()
	stop := b.progress(name, t)
	defer stop()
	defer b.measureCPU(ctx, t)()
	const limit = 512
	slots := make(chan struct{}, limit)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		lats     []time.Duration
		lateness []time.Duration
		held     bool // the server held the pacer back and it has not caught up yet
		p        pacing
	)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
			held = false
		}
		from := time.Now()
		lateness = append(lateness, from.Sub(due))
		if held {
			from = due
		}
		select {
		case slots <- struct{}{}:
		default:
			p.Held++
			held = true
			slots <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			ok, err := do(i)
			l := time.Since(from)
			mu.Lock()
			lats = append(lats, l)
			mu.Unlock()
			switch {
			case err != nil:
				t.fail(err)
			case ok:
				t.ok.Add(1)
			}
		}()
	}
	wg.Wait()
	t.add(lats)
	p.P50, p.P99 = percentile(lateness, 0.5), percentile(lateness, 0.99)
	return time.Since(start), p
}

// pacing is how far behind its schedule an open loop's pacer sent requests.
type pacing struct {
	P50, P99 float64 // ms
	// Held counts the requests the pacer had to hold back because every
	// slot was taken (latency then counts from when they were due).
	Held int
}

func percentile(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
}

// measureCPU starts measuring the CPU time of the server and of the
// database backends serving the bench database; the function it returns
// stops and puts the figures in t.
func (b *bench) measureCPU(ctx context.Context, t *tally) (stop func()) {
	cpu, db := b.serverCPU(), b.backendsCPU(ctx)
	return func() {
		t.cpu += b.serverCPU() - cpu
		for pid, c := range b.backendsCPU(context.WithoutCancel(ctx)) {
			t.dbCPU += c - db[pid] // a backend that is new started from zero
		}
	}
}

// progress prints the run's count every second until stopped.
func (b *bench) progress(name string, t *tally) (stop func()) {
	done := make(chan struct{})
	start, from := time.Now(), t.ok.Load()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				el := time.Since(start)
				n := t.ok.Load() - from
				fmt.Fprintf(b.log, "  %-22s %4.0fs %9d holds %9.0f/s %6d errors\n", name, el.Seconds(), n, float64(n)/el.Seconds(), t.errs.Load())
			}
		}
	}()
	return func() { close(done) }
}

// answer is an HTTP answer.
type answer struct {
	status int
	body   []byte
}

func (a answer) json(v any) error { return json.Unmarshal(a.body, v) }

// do sends one request and reads the whole answer.
func (b *bench) do(method, path, token, key string, body []byte) (answer, error) {
	return b.client.do(method, path, token, key, body)
}

// call sends one request, and turns an answer whose status is not one of
// statuses into an error.
func (b *bench) call(method, path, token, key string, body []byte, statuses ...int) (answer, error) {
	a, err := b.do(method, path, token, key, body)
	if err != nil {
		return a, err
	}
	if !slices.Contains(statuses, a.status) {
		return a, fmt.Errorf("HTTP %d: %s", a.status, strings.TrimSpace(string(a.body)))
	}
	return a, nil
}

// hold asks for one hold and reports whether it was made (201).
func (b *bench) hold(key string, body []byte) (bool, error) {
	a, err := b.call("POST", "/v1/reservations", b.shop, key, body, http.StatusCreated)
	return err == nil && a.status == http.StatusCreated, err
}

func printTable(w io.Writer, results []*result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tclients\tholds/s\tp50 ms\tp95 ms\tp99 ms\terrors\tserver RSS MB\tCPU µs/req server+db\tbaseline tx/s\tbaseline p99 ms\tratio\texpiry lag p50/p99 ms\t")
	for _, r := range results {
		base, baseP99, ratio, lag := "-", "-", "-", "-"
		if r.Baseline > 0 {
			base = fmt.Sprintf("%.0f", r.Baseline)
			baseP99 = fmt.Sprintf("%.1f", r.BaselineP99)
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		if r.ExpiryLagP99 > 0 || r.ExpiryLagP50 > 0 {
			lag = fmt.Sprintf("%.0f / %.0f", r.ExpiryLagP50, r.ExpiryLagP99)
		}
		clients := "open"
		if r.Clients > 0 {
			clients = fmt.Sprint(r.Clients)
		}
		cpu := "-"
		if r.ServerCPU > 0 || r.DatabaseCPU > 0 {
			cpu = fmt.Sprintf("%.0f + %.0f", r.ServerCPU, r.DatabaseCPU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Scenario, clients, r.Rate, r.P50, r.P95, r.P99, r.Errors, r.RSS, cpu, base, baseP99, ratio, lag)
	}
	tw.Flush()
	for _, r := range results {
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Scenario, r.Note)
		}
	}
}
