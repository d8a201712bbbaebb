package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"github.com/stockhold/stockhold/app/buildinfo"
)

// goal is one promise the benchmarks hold stockhold to: what is measured,
// the target, the command that measures it, and how to read it off one
// run's results.
type goal struct {
	// id keys the goal in the report's data: never change it, or the
	// report forgets the goal's last figure.
	id      string
	what    string
	target  string
	command string
	// read returns the figure a run measured and whether it meets the
	// target; ok is false when the run did not measure the goal.
	read func(r *benchRun) (figure string, met, ok bool)
}

// benchRun is one invocation's results, by scenario, and what it ran with.
type benchRun struct {
	results map[string]*result
	o       options
	// before is the report's data before this run: goals measured across
	// runs read their other side from it.
	before reportData
	// on is where the run measured (machine), taken when it started.
	on string
}

func (r *benchRun) get(scenario string) *result { return r.results[scenario] }

// defaultCatalogue is the catalogue the goals over 1,000 SKUs are stated
// for; bigCatalogue the one of the large-catalogue goals.
const (
	defaultCatalogue = 1000
	bigCatalogue     = 10_000_000
)

// ran reports whether every scenario named ran.
func (r *benchRun) ran(scenarios ...string) bool {
	for _, s := range scenarios {
		if r.results[s] == nil {
			return false
		}
	}
	return true
}

// goals are every benchmark goal, in the report's order.
var goals = []goal{
	{id: "hot", what: "`hot`: single-unit holds on one SKU, against the bare-SQL hold at the same concurrency",
		target: "at least 10x", command: "make bench BENCH_FLAGS='-scenarios hot'",
		read: func(r *benchRun) (string, bool, bool) {
			h := r.get("hot")
			if h == nil || h.Baseline == 0 {
				return "", false, false
			}
			return fmt.Sprintf("%.2fx (%s holds/s against %s)", h.Ratio, thousands(h.Rate), thousands(h.Baseline)), h.Ratio >= 10, true
		}},
	{id: "spread", what: "`spread`: single-unit holds over 1,000 SKUs, against the bare-SQL hold",
		target: "at least 2x", command: "make bench BENCH_FLAGS='-scenarios spread'",
		read: func(r *benchRun) (string, bool, bool) {
			s := r.get("spread")
			if s == nil || s.Baseline == 0 || r.o.catalogue != defaultCatalogue {
				return "", false, false
			}
			return fmt.Sprintf("%.2fx (%s holds/s against %s)", s.Ratio, thousands(s.Rate), thousands(s.Baseline)), s.Ratio >= 2, true
		}},
	{id: "spread-p99", what: "`spread`: p99 of a hold at 64 clients",
		target: "at most 20 ms", command: "make bench BENCH_FLAGS='-scenarios spread'",
		read: func(r *benchRun) (string, bool, bool) {
			s := r.get("spread")
			if s == nil || r.o.catalogue != defaultCatalogue {
				return "", false, false
			}
			return fmt.Sprintf("%.1f ms (the bare SQL's %.1f ms)", s.P99, s.BaselineP99), s.P99 <= 20, true
		}},
	{id: "half-p99", what: "`half`: p99 of a hold at half of spread's rate, open loop",
		target: "at most 10 ms", command: "make bench BENCH_FLAGS='-scenarios spread,half'",
		read: func(r *benchRun) (string, bool, bool) {
			h := r.get("half")
			if h == nil || r.o.catalogue != defaultCatalogue {
				return "", false, false
			}
			return fmt.Sprintf("%.1f ms at %s holds/s", h.P99, thousands(h.Rate)), h.P99 <= 10, true
		}},
	{id: "locations", what: "`locations`: holds allocated among three warehouses by priority, against `spread` in turns in the same run",
		target: "at least 0.9x", command: "make bench BENCH_FLAGS='-scenarios locations -duration 20s -turns 20'",
		read: func(r *benchRun) (string, bool, bool) { return vsSpreadGoal(r, "locations", 0.9) }},
	{id: "locations-most_stock", what: "`locations` allocated by `most_stock`, against `spread` in turns in the same run",
		target: "at least 0.9x", command: "make bench BENCH_FLAGS='-scenarios locations -duration 20s -turns 20'",
		read: func(r *benchRun) (string, bool, bool) { return vsSpreadGoal(r, "locations-most_stock", 0.9) }},
	{id: "locations-nearest", what: "`locations` allocated by `nearest` to a hold's `ship_to`, against `spread` in turns in the same run",
		target: "at least 0.9x", command: "make bench BENCH_FLAGS='-scenarios locations -duration 20s -turns 20'",
		read: func(r *benchRun) (string, bool, bool) { return vsSpreadGoal(r, "locations-nearest", 0.9) }},
	{id: "preorder", what: "`preorder`: holds past what is on hand, promised against a supplier's delivery within the backorder horizon, against `spread` in turns in the same run",
		target: "at least 0.8x", command: "make bench BENCH_FLAGS='-scenarios preorder -duration 20s -turns 20'",
		read: func(r *benchRun) (string, bool, bool) { return vsSpreadGoal(r, "preorder", 0.8) }},
	{id: "flash", what: "`flash`: 1,000 clients at once racing for 100 units",
		target: "exactly 100 held, 900 refused", command: "make bench BENCH_FLAGS='-scenarios flash'",
		read: func(r *benchRun) (string, bool, bool) {
			f := r.get("flash")
			if f == nil {
				return "", false, false
			}
			held, refused := f.Figures["held"], f.Figures["refused"]
			return fmt.Sprintf("%.0f held, %.0f refused, %d errors", held, refused, f.Errors),
				held == flashUnits && refused == flashUsers-flashUnits && f.Errors == 0, true
		}},
	{id: "rss", what: "the server's peak resident memory over the default scenarios",
		target: "at most 150 MB", command: "make bench",
		read: func(r *benchRun) (string, bool, bool) {
			if !r.ran(scenarioNames...) {
				return "", false, false
			}
			peak := 0.0
			for _, s := range r.results {
				peak = max(peak, s.RSS)
			}
			return fmt.Sprintf("%.0f MB", peak), peak <= 150, true
		}},
	{id: "mixed-expiry", what: "`mixed`: how late holds left to expire expire, while holds, confirms and releases go on",
		target: "p99 at most 1 s", command: "make bench BENCH_FLAGS='-scenarios mixed'",
		read: func(r *benchRun) (string, bool, bool) {
			m := r.get("mixed")
			if m == nil {
				return "", false, false
			}
			return lagFigure(m), m.ExpiryLagP99 <= 1000 && m.Figures["not_expired"] == 0, true
		}},
	{id: "expiry-burst", what: "`expiry`: a 5 s full-rate burst of holds with a 2 s TTL on one SKU; how late they expire",
		target: "p99 at most 1 s, every hold expired", command: "make bench BENCH_FLAGS='-scenarios expiry'",
		read: func(r *benchRun) (string, bool, bool) {
			e := r.get("expiry")
			if e == nil {
				return "", false, false
			}
			return fmt.Sprintf("%s, %s holds", lagFigure(e), thousands(e.Figures["holds"])),
				e.ExpiryLagP99 <= 1000 && e.Figures["not_expired"] == 0, true
		}},
	{id: "expiry-campaign", what: "`expiry`: a campaign due while the burst expires starts",
		target: "within 1 s of its starts_at", command: "make bench BENCH_FLAGS='-scenarios expiry'",
		read: func(r *benchRun) (string, bool, bool) {
			e := r.get("expiry")
			if e == nil {
				return "", false, false
			}
			late, ok := e.Figures["campaign_late_ms"]
			if !ok {
				return "not started", false, true
			}
			return fmt.Sprintf("%.0f ms late", late), late <= 1000, true
		}},
	{id: "campaign-end", what: "`campaign-end`: spread's p99 while 10,000 unpaid campaign holds are rolled back, against just before",
		target: "at most 2x", command: "make bench BENCH_FLAGS='-scenarios campaign-end'",
		read: func(r *benchRun) (string, bool, bool) {
			c := r.get("campaign-end")
			if c == nil {
				return "", false, false
			}
			ratio := c.Figures["p99_ratio"]
			return fmt.Sprintf("%.2fx (%.1f ms against %.1f ms)", ratio, c.P99, c.Figures["p99_before_ms"]), ratio <= 2, true
		}},
	{id: "seats-size", what: "`seats`: seat holds on a 50,000-seat venue against a 2,000-seat one, in turns",
		target: "at least 0.8x", command: "make bench BENCH_FLAGS='-scenarios seats'",
		read: func(r *benchRun) (string, bool, bool) {
			small, large := r.get("seats 2000"), r.get("seats 50000")
			if small == nil || large == nil || small.Rate == 0 {
				return "", false, false
			}
			x := large.Rate / small.Rate
			return fmt.Sprintf("%.2fx (%s against %s holds/s)", x, thousands(large.Rate), thousands(small.Rate)), x >= 0.8, true
		}},
	{id: "seats-vs-hot", what: "`seats`: seat holds (1-4 named or together, each released) against single-unit holds on one SKU, in turns",
		target: "at least 0.3x on each venue", command: "make bench BENCH_FLAGS='-scenarios seats'",
		read: func(r *benchRun) (string, bool, bool) {
			hot, small, large := r.get("hot (reference)"), r.get("seats 2000"), r.get("seats 50000")
			if hot == nil || small == nil || large == nil || hot.Rate == 0 {
				return "", false, false
			}
			a, b := small.Rate/hot.Rate, large.Rate/hot.Rate
			return fmt.Sprintf("%.2fx on 2,000 seats, %.2fx on 50,000", a, b), a >= 0.3 && b >= 0.3, true
		}},
	{id: "seats-vs-plain", what: "`seats`: seat holds against the plain table a developer would write by hand (`UPDATE seats SET holder`), in turns",
		target: "at least 1x on each venue", command: "make bench BENCH_FLAGS='-scenarios seats'",
		read: func(r *benchRun) (string, bool, bool) {
			small, large := r.get("seats 2000"), r.get("seats 50000")
			if small == nil || large == nil || small.Baseline == 0 || large.Baseline == 0 {
				return "", false, false
			}
			return fmt.Sprintf("%.2fx on 2,000 seats, %.2fx on 50,000", small.Ratio, large.Ratio), small.Ratio >= 1 && large.Ratio >= 1, true
		}},
	{id: "seats-p99", what: "`seats`: p99 of a seat hold at 64 clients",
		target: "at most 100 ms on each venue", command: "make bench BENCH_FLAGS='-scenarios seats'",
		read: func(r *benchRun) (string, bool, bool) {
			small, large := r.get("seats 2000"), r.get("seats 50000")
			if small == nil || large == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f ms on 2,000 seats, %.1f ms on 50,000", small.P99, large.P99), small.P99 <= 100 && large.P99 <= 100, true
		}},
	{id: "soldout-rate", what: "`soldout`: refusals of a sold-out SKU against single-unit holds on one SKU sent the same way",
		target: "at least 5x", command: "make bench BENCH_FLAGS='-scenarios soldout'",
		read: func(r *benchRun) (string, bool, bool) {
			s := r.get("soldout")
			if s == nil || s.Figures["vs_hot"] == 0 {
				return "", false, false
			}
			x := s.Figures["vs_hot"]
			return fmt.Sprintf("%.2fx (%s refusals/s; the bare net/http floor answers %.2fx the holds)", x, thousands(s.Rate),
				s.Baseline/s.Figures["hot_rate"]), x >= 5, true
		}},
	// A refusal from memory first looks its Idempotency-Key up, in a read
	// that starts after it arrived, so that a retry of a hold granted on
	// another instance a moment before gets its first answer (replay.go).
	// One lookup runs at a time and carries every refusal waiting for it:
	// PostgreSQL runs one read per group of refusals waiting at once. A
	// closed loop of N clients has at most N waiting, so no run can go
	// below 100% / N of the refusals (1.6% at 64): the goal is that the
	// reads stay shared, at least ten refusals to a read on average.
	{id: "soldout-pg", what: "`soldout`: PostgreSQL transactions per refusal, each refusal's Idempotency-Key looked up in one read shared by the refusals waiting at once",
		target:  "at most 10% (one read per 10 refusals; by construction no lower than 100% / clients, 1.6% at 64)",
		command: "make bench BENCH_FLAGS='-scenarios soldout'",
		read: func(r *benchRun) (string, bool, bool) {
			s := r.get("soldout")
			if s == nil {
				return "", false, false
			}
			p, ok := s.Figures["pg_share_pct"]
			if !ok {
				return "", false, false
			}
			if p <= 0 {
				return fmt.Sprintf("%.3f%% at %d clients", p, s.Clients), true, true
			}
			return fmt.Sprintf("%.3f%% (a read per %.1f refusals at %d clients, whose bound is %.1f%%)", p, 100/p, s.Clients, 100/float64(s.Clients)),
				p <= 10, true
		}},
	{id: "catalogue-holds", what: "`spread` over a catalogue of 10,000,000 SKUs, against its first 1,000 in the same run",
		target: "at least 0.8x", command: "DEVDB_SHARED_BUFFERS=6GB make bench BENCH_FLAGS='-catalogue 10000000 -scenarios spread -duration 20s -keep'",
		read: func(r *benchRun) (string, bool, bool) {
			s := r.get("spread")
			if s == nil || r.o.catalogue != bigCatalogue {
				return "", false, false
			}
			small := s.Figures["small_rate"]
			if small == 0 {
				return "", false, false
			}
			x := s.Rate / small
			return fmt.Sprintf("%.2fx (%s against %s holds/s)", x, thousands(s.Rate), thousands(small)), x >= 0.8, true
		}},
	{id: "reconcile-full", what: "`reconcile`: a full reconciliation from the watermark over 10,000,000 SKUs with a year of history (100 million ledger rows)",
		target: "at most 60 s", command: "make bench-year YEAR_FLAGS='HOLDS=4100000', then DEVDB_SHARED_BUFFERS=6GB make bench BENCH_FLAGS='-catalogue 10000000 -reuse -scenarios reconcile'",
		read: func(r *benchRun) (string, bool, bool) {
			c := r.get("reconcile")
			if c == nil || r.o.catalogue != bigCatalogue {
				return "", false, false
			}
			f := c.Figures["full_s"]
			if first, ok := c.Figures["first_s"]; ok {
				return fmt.Sprintf("%.0f s (the first run, writing every checkpoint, %.0f s)", f, first), f <= 60, true
			}
			return fmt.Sprintf("%.0f s, the slowest of three", f), f <= 60, true
		}},
	{id: "reconcile-incremental", what: "`reconcile`: an incremental reconciliation after holds on 10,000 of 10,000,000 SKUs with a year of history",
		target: "at most 2 s", command: "make bench-year YEAR_FLAGS='HOLDS=4100000', then DEVDB_SHARED_BUFFERS=6GB make bench BENCH_FLAGS='-catalogue 10000000 -reuse -scenarios reconcile'",
		read: func(r *benchRun) (string, bool, bool) {
			c := r.get("reconcile")
			if c == nil || r.o.catalogue != bigCatalogue {
				return "", false, false
			}
			f := c.Figures["incremental_s"]
			return fmt.Sprintf("%.1f s", f), f <= 2, true
		}},
	{id: "catalogue-pages", what: "`skus`: a page of 1,000 SKUs (`GET /v1/skus`) at the start, middle and end of 10,000,000 SKUs",
		target: "the same anywhere: the slowest within 2x the fastest", command: "make bench BENCH_FLAGS='-catalogue 10000000 -scenarios skus -reuse'",
		read: func(r *benchRun) (string, bool, bool) {
			s := r.get("skus")
			if s == nil || r.o.catalogue != bigCatalogue {
				return "", false, false
			}
			a, b, c := s.Figures["page_start_ms"], s.Figures["page_middle_ms"], s.Figures["page_end_ms"]
			lo, hi := min(a, b, c), max(a, b, c)
			return fmt.Sprintf("%.1f, %.1f and %.1f ms", a, b, c), lo > 0 && hi <= 2*lo, true
		}},
	{id: "history-archive", what: "`archive` of the oldest month of a year's history (10,000,000 SKUs, `make bench-year`): holds' p99 over the catalogue while it runs, against just before",
		target: "at most 2x", command: "make bench-year && DEVDB_SHARED_BUFFERS=6GB make bench BENCH_FLAGS='-catalogue 10000000 -reuse -scenarios archive -archive-before oldest -duration 20s'",
		read: func(r *benchRun) (string, bool, bool) {
			a := r.get("archive")
			if a == nil || r.o.catalogue != bigCatalogue || r.o.archiveBefore == "" {
				return "", false, false
			}
			ratio := a.Figures["p99_ratio"]
			return fmt.Sprintf("%.2fx (%.1f ms against %.1f ms; %s rows archived in %.0f s)", ratio, a.P99, a.Figures["p99_before_ms"],
				thousands(a.Figures["archived_rows"]), a.Figures["archive_seconds"]), ratio <= 2, true
		}},
	{id: "history-reads", what: "`history`: the event feed (a page of 1,000) and a SKU's ledger (a page of 100) from a cursor in the oldest month of a year's history not archived (`make bench-year`)",
		target: "the feed within 2x of a page from the current month; the SKU's ledger within 50 ms", command: "make bench BENCH_FLAGS='-catalogue 10000000 -reuse -scenarios history'",
		read: func(r *benchRun) (string, bool, bool) {
			h := r.get("history")
			if h == nil || r.o.catalogue != bigCatalogue {
				return "", false, false
			}
			eo, er, lo, lr := h.Figures["events_old_ms"], h.Figures["events_recent_ms"], h.Figures["ledger_old_ms"], h.Figures["ledger_recent_ms"]
			if er == 0 || lr == 0 {
				return "", false, false
			}
			return fmt.Sprintf("events %.1f ms against %.1f from the current month (%.2fx); ledger %.1f ms (its newest page %.1f ms)", eo, er, eo/er, lo, lr),
				eo <= 2*er && lo <= 50, true
		}},
}

// spreadRateKey is where the report keeps the rate of the last spread run
// over the default catalogue, which the large catalogue's is compared with.
const spreadRateKey = "spread_holds_per_second_at_1000"

// lagFigure is a scenario's expiry lag as the report shows it.
func lagFigure(r *result) string {
	s := fmt.Sprintf("p99 %.0f ms (p50 %.0f)", r.ExpiryLagP99, r.ExpiryLagP50)
	if n := r.Figures["not_expired"]; n > 0 {
		s += fmt.Sprintf(", %.0f NOT expired", n)
	}
	return s
}

// thousands writes v rounded, with commas between thousands.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Round(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// reportData is what the report keeps between runs, in the file itself:
// each goal's last figure, and numbers a later run compares with.
type reportData struct {
	Goals   map[string]measured `json:"goals"`
	Numbers map[string]float64  `json:"numbers,omitempty"`
}

// measured is a goal's figure as a run measured it, and where.
type measured struct {
	Figure string `json:"figure"`
	Met    bool   `json:"met"`
	// On is the revision the bench was built from and the machine's CPUs.
	On string `json:"on"`
}

// dataMark opens the report's data, an HTML comment at its end.
const dataMark = "<!-- bench data: "

// readReport reads the data of the report at path; a file that does not
// exist yet has none.
func readReport(path string) (reportData, error) {
	d := reportData{Goals: map[string]measured{}, Numbers: map[string]float64{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	return parseReport(b)
}

func parseReport(b []byte) (reportData, error) {
	d := reportData{Goals: map[string]measured{}, Numbers: map[string]float64{}}
	i := bytes.LastIndex(b, []byte(dataMark))
	if i < 0 {
		return d, errors.New("no bench data in the report: it is written by make bench, not by hand")
	}
	rest := b[i+len(dataMark):]
	j := bytes.Index(rest, []byte(" -->"))
	if j < 0 {
		return d, errors.New("the report's bench data is not closed")
	}
	if err := json.Unmarshal(rest[:j], &d); err != nil {
		return d, fmt.Errorf("the report's bench data: %w", err)
	}
	if d.Goals == nil {
		d.Goals = map[string]measured{}
	}
	if d.Numbers == nil {
		d.Numbers = map[string]float64{}
	}
	return d, nil
}

// record folds one run into the report's data: the goals it measured get
// its figures, the others keep theirs. It returns the ids it measured.
func record(d reportData, r *benchRun, on string) (reportData, []string) {
	out := reportData{Goals: map[string]measured{}, Numbers: map[string]float64{}}
	for k, v := range d.Goals {
		out.Goals[k] = v
	}
	for k, v := range d.Numbers {
		out.Numbers[k] = v
	}
	r.before = d
	var ids []string
	for _, g := range goals {
		fig, met, ok := g.read(r)
		if !ok {
			continue
		}
		out.Goals[g.id] = measured{Figure: fig, Met: met, On: on}
		ids = append(ids, g.id)
	}
	if s := r.get("spread"); s != nil && r.o.catalogue == defaultCatalogue {
		out.Numbers[spreadRateKey] = math.Round(s.Rate)
	}
	return out, ids
}

// machine says where a run measured: the revision the bench was built
// from (marked when the checkout had changes) and the machine's CPUs.
// Without VCS information in the binary (GOFLAGS=-buildvcs=false), the
// revision is the checkout's it runs in, as git says.
func machine() string {
	rev := "unknown revision"
	if b, ok := buildinfo.Read(); ok && b.Revision != "" {
		rev = b.Revision[:min(7, len(b.Revision))]
		if b.Modified {
			rev += "+changes"
		}
	} else if out, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			rev += "+changes"
		}
	}
	return fmt.Sprintf("%s, %d CPUs", rev, runtime.NumCPU())
}

// renderReport writes the whole report from its data.
// turnsSection is the report's part on the goals held against spread in
// turns (spreadturns.go).
const turnsSection = `
## Against spread, in turns

The goals stated against ` + "`spread`" + ` (` + "`locations`" + ` by each strategy,
` + "`preorder`" + `) are measured in turns within one run: spread's holds, then
each of the scenario's (priority, most_stock, nearest), then spread again,
` + "`-turns`" + ` times, each turn ` + "`-duration`" + ` divided by the turns long, after one
turn of each to warm up and before a closing turn of spread. Each turn of a
strategy is held against the mean of the spread turns on either side of it,
and the figure is the median of those ratios, with the lowest and highest:
a minute in which the shared machine is busy lands on a turn or two of
each side rather than on a whole side, which measured one after the other,
5 s each, moved the same build's ratios from 0.70x to 1.38x. The bench
also prints each turn's ratio, the ratio over all turns and each side's CPU
per request (server and database), which moves less than a rate:

` + "```" + `
make bench BENCH_FLAGS='-scenarios locations -duration 20s -turns 20'
` + "```" + `
`

// compareSection is the report's part on comparing two revisions (compare.go).
const compareSection = `
## Comparing two revisions

On this machine the same build moves 20% between runs, even the bare SQL;
one run before a change and one after cannot tell a change from the noise.
` + "`make bench-compare BASE=<commit>`" + ` builds the server at that commit (from
` + "`git archive`" + ` into a temporary directory) and at the checkout, then runs
the scenarios ` + "`BENCH_FLAGS`" + ` names, as ` + "`make bench`" + ` takes them, against
each in alternate rounds on the same dev cluster: base, head, base, head,
` + "`BENCH_ROUNDS`" + ` of each (default 3). Every round is a whole run of its own
(a fresh database migrated by that server's own ` + "`migrate up`" + `, a fresh
server), driven by the checkout's bench, and it writes no report. It prints,
per scenario, the median of each measure (holds/s, p99, the rate against
the bare-SQL hold where the scenario measures it, the server's peak RSS) for
both, head's over base's, and each side's spread (its lowest and highest
round); the last column says ` + "`better`" + ` or ` + "`worse`" + ` only when the two spreads
do not overlap, otherwise ` + "`within spread`" + `. The checkout's bench drives
both sides, so BASE must be new enough for its own SQL: the bare-SQL hold
of hot and spread writes stock rows keyed by location. A change to the
hold path shows its comparison in its note:

` + "```" + `
make bench-compare BASE=main BENCH_FLAGS='-scenarios hot,spread' BENCH_ROUNDS=3
make bench-compare BASE=HEAD~1 BENCH_FLAGS='-scenarios hot -duration 3s'
` + "```" + `
`

func renderReport(d reportData) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# Performance

<!-- Written by make bench (cmd/stockhold-bench -report): change the goals in cmd/stockhold-bench/goals.go, not this file. -->

Every goal stockhold's benchmarks hold it to, the figure the last run that
measured it gave, where it ran (the revision the bench was built from and
the machine's CPUs) and the command that measures it again. ` + "`make bench`" + `
rewrites this file after each run: the rows of the goals the run measured
get its figures, the others keep theirs. The server, PostgreSQL and the load
share the machine, so absolute rates move from run to run; the ratios,
measured within one run, are what the goals are stated in. What each
scenario does is in ` + "`stockhold-bench -h`" + ` and its package documentation
(` + "`cmd/stockhold-bench`" + `); ` + "`-profile DIR`" + ` writes each timed phase's profiles.

| goal | target | last figure | met | on | command |
| --- | --- | --- | --- | --- | --- |
`)
	for _, g := range goals {
		m, ok := d.Goals[g.id]
		fig, met, on := "not measured yet", "-", "-"
		if ok {
			fig, on = m.Figure, m.On
			met = "no"
			if m.Met {
				met = "yes"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | `%s` |\n", g.what, g.target, cell(fig), met, on, cell(g.command))
	}
	b.WriteString(`
Measurements outside ` + "`make bench`" + `, each run with ` + "`go test`" + ` against the dev
database (` + "`export DATABASE_URL=$(go run ./cmd/devdb up)`" + ` first):

| what | command |
| --- | --- |
`)
	for _, m := range microBenchmarks {
		fmt.Fprintf(&b, "| %s | `%s` |\n", m[0], cell(m[1]))
	}
	b.WriteString(turnsSection)
	b.WriteString(compareSection)
	known := map[string]bool{}
	for _, g := range goals {
		known[g.id] = true
	}
	// Data of goals no longer defined is dropped with them.
	keep := reportData{Goals: map[string]measured{}, Numbers: d.Numbers}
	for k, v := range d.Goals {
		if known[k] {
			keep.Goals[k] = v
		}
	}
	data, err := json.Marshal(keep)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(data, []byte("-->")) {
		return nil, errors.New("a figure contains -->")
	}
	fmt.Fprintf(&b, "\n%s%s -->\n", dataMark, data)
	return b.Bytes(), nil
}

// cell is text safe in a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// microBenchmarks are the go test benchmarks, with the command of each.
var microBenchmarks = [][2]string{
	{"a bulk adjustment of 1,000 lines against 1,000 single-line transactions", "go test -run '^$' -bench BulkAdjustment -benchtime 3x ./app/inventory/"},
	{"a hold batch's allocation in Go (20 holds) by each strategy, the SKUs at one location or three", "go test -run '^$' -bench DecideByStrategy -benchtime 20000x ./app/inventory/"},
	{"rollback batches: batches/s and the gap between batches against the pause", "go test -run '^$' -bench RollbackChain -benchtime 1x ./jobs/"},
	{"decoding a hold's body, and the check of its keys alone", "go test -run '^$' -bench DecodeHold -benchtime 300000x ./app/api/"},
	{"a sold-out refusal through the whole handler, without the network", "go test -run '^$' -bench SoldOutRefusal -benchmem ./app/api/"},
	{"checking a name (NFC, no format or control characters)", "go test -run '^$' -bench ValidName -benchtime 2000000x ./app/domain/"},
	{"counting a hold request per SKU, and timing a statement", "go test -run '^$' -bench 'HoldAsked|TracerBatchQuery' -benchtime 300000x ./app/metrics/"},
}

// writeReport folds r into the report at path and writes it whole. It
// returns the goals the run measured, and those of them not met.
func writeReport(path string, r *benchRun) (measuredIDs, missed []string, err error) {
	d, err := readReport(path)
	if err != nil {
		return nil, nil, err
	}
	on := r.on
	if on == "" {
		on = machine()
	}
	d, measuredIDs = record(d, r, on)
	b, err := renderReport(d)
	if err != nil {
		return nil, nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, nil, err
	}
	for _, id := range measuredIDs {
		if !d.Goals[id].Met {
			missed = append(missed, id)
		}
	}
	slices.Sort(missed)
	return measuredIDs, missed, nil
}

// vsSpreadGoal reads the ratio to spread of a scenario run in turns with
// spread's holds (inTurnsWithSpread): the median of its turns', with their
// range, against the target (at least want).
func vsSpreadGoal(r *benchRun, scenario string, want float64) (string, bool, bool) {
	l := r.get(scenario)
	if l == nil || l.VsSpread == 0 {
		return "", false, false
	}
	return fmt.Sprintf("%.2fx, the median of %.0f turns (%.2f–%.2fx; %s holds/s)", l.VsSpread, l.Figures["turns"],
		l.Figures["vs_spread_min"], l.Figures["vs_spread_max"], thousands(l.Rate)), l.VsSpread >= want, true
}
