package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// A comparison (-compare BASE) runs the same scenarios against two servers,
// the one -server names (the checkout) and BASE (another revision's binary),
// in alternate rounds on the same PostgreSQL cluster: base, checkout, base,
// checkout... -rounds times each. Each run is a whole bench run of its own
// (a fresh database, migrated by the server under test, and a fresh
// server), so a slow minute on the machine lands on one round of one side
// rather than on a whole side. Per scenario it prints each measure's median
// for both, the checkout's against the base's, and each side's spread
// (the lowest and highest round): a difference is one only when the two
// spreads do not overlap.

// compareFlags are the flags a comparison does not hand on to its runs:
// each run gets its server, -json and -migrate-with-server instead, and a
// comparison writes no report.
var compareFlags = []string{"compare", "rounds", "server", "json", "report", "render", "migrate-with-server"}

// compareSide is one of the two servers a comparison runs.
type compareSide struct {
	name   string // "base" or "head"
	server string
}

// runCompare runs the comparison o asks for: args are the flags each run
// gets besides its server.
func runCompare(ctx context.Context, o options, args []string, stdout, stderr io.Writer) error {
	if o.rounds < 1 {
		return fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	}
	sides := []compareSide{{"base", o.compare}, {"head", o.server}}
	runs := map[string][]map[string]*result{}
	for round := 1; round <= o.rounds; round++ {
		for _, s := range sides {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(stderr, "round %d of %d, %s (%s):\n", round, o.rounds, s.name, s.server)
			var out bytes.Buffer
			runArgs := append(slices.Clip(args), "-server", s.server, "-json", "-migrate-with-server")
			if err := run(ctx, runArgs, &out, stderr); err != nil {
				return fmt.Errorf("round %d, %s: %w", round, s.name, err)
			}
			var rep report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				return fmt.Errorf("round %d, %s: read the run's results: %w", round, s.name, err)
			}
			byScenario := map[string]*result{}
			for _, r := range rep.Results {
				byScenario[r.Scenario] = r
			}
			runs[s.name] = append(runs[s.name], byScenario)
		}
	}
	fmt.Fprintf(stdout, "base %s against head %s, %d rounds each, alternated\n", o.compare, o.server, o.rounds)
	printComparison(stdout, compareRuns(o.scenarios, runs["base"], runs["head"]))
	return nil
}

// compareArgs returns the flags fs was given, as arguments, without those a
// comparison sets itself (compareFlags).
func compareArgs(fs *flag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(compareFlags, f.Name) {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// measure is one number a comparison reads off a scenario's result.
type measure struct {
	name string
	// higher is true when more is better (a rate), false when less is
	// (a latency, memory).
	higher bool
	read   func(r *result) float64
}

// measures are what a comparison reports per scenario: the rate, the p99,
// the rate against the bare-SQL hold of the same run (hot and spread,
// which cancels much of what the machine does between runs), the rate
// against spread's in turns (locations, preorder) and the server's peak
// resident memory.
var measures = []measure{
	{"holds/s", true, func(r *result) float64 { return r.Rate }},
	{"p99 ms", false, func(r *result) float64 { return r.P99 }},
	{"x bare SQL", true, func(r *result) float64 { return r.Ratio }},
	{"x spread", true, func(r *result) float64 { return r.VsSpread }},
	{"RSS MB", false, func(r *result) float64 { return r.RSS }},
}

// spread is a measure's rounds on one side.
type spread struct {
	median, min, max float64
}

// summarize returns the median, lowest and highest of values (not empty).
// The median of an even count is the mean of the middle two.
func summarize(values []float64) spread {
	v := slices.Clone(values)
	slices.Sort(v)
	n := len(v)
	m := v[n/2]
	if n%2 == 0 {
		m = (v[n/2-1] + v[n/2]) / 2
	}
	return spread{median: m, min: v[0], max: v[n-1]}
}

// comparison is one measure of one scenario on both sides.
type comparison struct {
	scenario, measure string
	base, head        spread
	// ratio is head's median over base's (0 when base's is 0).
	ratio float64
	// verdict is "within spread" when the two sides' spreads overlap,
	// otherwise "better" or "worse" (for the head).
	verdict string
}

// compareRuns compares each scenario's measures over the rounds of both
// sides: scenarios in the order given (those neither side ran left out),
// then any other scenario the runs reported (such as seats' venues), by
// name. A measure is left out when a round of either side lacks it.
func compareRuns(order []string, base, head []map[string]*result) []comparison {
	names := slices.Clone(order)
	var more []string
	for _, rounds := range [][]map[string]*result{base, head} {
		for _, byScenario := range rounds {
			for name := range byScenario {
				if !slices.Contains(names, name) && !slices.Contains(more, name) {
					more = append(more, name)
				}
			}
		}
	}
	slices.Sort(more)
	names = append(names, more...)
	var out []comparison
	for _, name := range names {
		for _, m := range measures {
			b, okB := collect(base, name, m)
			h, okH := collect(head, name, m)
			if !okB || !okH {
				continue
			}
			c := comparison{scenario: name, measure: m.name, base: summarize(b), head: summarize(h)}
			if c.base.median != 0 {
				c.ratio = c.head.median / c.base.median
			}
			c.verdict = verdict(c.base, c.head, m.higher)
			out = append(out, c)
		}
	}
	return out
}

// collect returns a measure of a scenario over rounds; ok is false when a
// round did not run the scenario or did not measure it (zero).
func collect(rounds []map[string]*result, scenario string, m measure) ([]float64, bool) {
	if len(rounds) == 0 {
		return nil, false
	}
	var v []float64
	for _, byScenario := range rounds {
		r := byScenario[scenario]
		if r == nil || m.read(r) == 0 {
			return nil, false
		}
		v = append(v, m.read(r))
	}
	return v, true
}

// verdict says whether head differs from base beyond the rounds' spread:
// only when every round of one side is beyond every round of the other.
func verdict(base, head spread, higher bool) string {
	switch {
	case head.min > base.max:
		if higher {
			return "better"
		}
		return "worse"
	case head.max < base.min:
		if higher {
			return "worse"
		}
		return "better"
	}
	return "within spread"
}

// printComparison writes the comparisons as a table.
func printComparison(w io.Writer, cs []comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tmeasure\tbase median\thead median\thead/base\tbase spread\thead spread\tdifference")
	for _, c := range cs {
		ratio := "-"
		if c.ratio != 0 {
			ratio = fmt.Sprintf("%.2fx", c.ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.scenario, c.measure,
			number(c.base.median), number(c.head.median), ratio,
			number(c.base.min)+"–"+number(c.base.max), number(c.head.min)+"–"+number(c.head.max), c.verdict)
	}
	tw.Flush()
}

// number formats a measure: whole numbers from 100 up (with thousands
// separators), one decimal below, two below 10.
func number(v float64) string {
	switch {
	case math.Round(v*10) >= 1000:
		return thousands(v)
	case math.Round(v*100) >= 1000:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
