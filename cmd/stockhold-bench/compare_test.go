package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSummarizeTakesMedianAndSpread: the median of an odd count is the
// middle round, of an even count the mean of the middle two, whatever the
// order the rounds came in; the spread is the lowest and highest round.
func TestSummarizeTakesMedianAndSpread(t *testing.T) {
	t.Parallel()
	require.Equal(t, spread{median: 300, min: 100, max: 900}, summarize([]float64{900, 100, 300}))
	require.Equal(t, spread{median: 250, min: 100, max: 900}, summarize([]float64{900, 200, 100, 300}))
	require.Equal(t, spread{median: 7, min: 7, max: 7}, summarize([]float64{7}))
	in := []float64{3, 1, 2}
	summarize(in)
	require.Equal(t, []float64{3, 1, 2}, in, "the rounds are left in their order")
}

// TestVerdictOnlyBeyondTheSpread: a side is better or worse only when every
// round of it is beyond every round of the other; for latencies and memory
// less is better.
func TestVerdictOnlyBeyondTheSpread(t *testing.T) {
	t.Parallel()
	base := spread{median: 1000, min: 900, max: 1100}
	require.Equal(t, "within spread", verdict(base, spread{median: 1150, min: 1050, max: 1200}, true))
	require.Equal(t, "within spread", verdict(base, spread{median: 850, min: 700, max: 900}, true), "touching is overlapping")
	require.Equal(t, "better", verdict(base, spread{median: 1200, min: 1101, max: 1300}, true))
	require.Equal(t, "worse", verdict(base, spread{median: 800, min: 700, max: 899}, true))
	require.Equal(t, "worse", verdict(base, spread{median: 1200, min: 1101, max: 1300}, false))
	require.Equal(t, "better", verdict(base, spread{median: 800, min: 700, max: 899}, false))
}

// TestCompareRunsPrintsEachScenario: per scenario and measure, both sides'
// medians, head's over base's, each side's spread and the verdict; the
// bare-SQL ratio only for scenarios that measured it, scenarios in the
// order asked, then those only the runs named (seats' venues).
func TestCompareRunsPrintsEachScenario(t *testing.T) {
	t.Parallel()
	round := func(hot, hotP99, ratio, spreadRate, rss float64) map[string]*result {
		return map[string]*result{
			"hot":         {Scenario: "hot", Rate: hot, P99: hotP99, Ratio: ratio, RSS: rss},
			"spread":      {Scenario: "spread", Rate: spreadRate, P99: 50, RSS: rss},
			"seats-2000":  {Scenario: "seats-2000", Rate: 10, P99: 5, RSS: rss},
			"not-in-head": {Scenario: "not-in-head", Rate: 1, P99: 1, RSS: 1},
		}
	}
	base := []map[string]*result{round(3000, 20, 10, 1500, 100), round(3200, 22, 11, 1400, 106), round(3100, 30, 12, 1600, 108)}
	head := []map[string]*result{round(2800, 19, 9, 1700, 64), round(3300, 21, 9.9, 1800, 66), round(2900, 25, 9.5, 1750, 69)}
	for _, h := range head {
		delete(h, "not-in-head")
	}
	cs := compareRuns([]string{"spread", "hot", "flash"}, base, head)
	var out bytes.Buffer
	printComparison(&out, cs)
	require.Equal(t, strings.Join([]string{
		"scenario    measure     base median  head median  head/base  base spread  head spread  difference",
		"spread      holds/s     1,500        1,750        1.17x      1,400–1,600  1,700–1,800  better",
		"spread      p99 ms      50.0         50.0         1.00x      50.0–50.0    50.0–50.0    within spread",
		"spread      RSS MB      106          66.0         0.62x      100–108      64.0–69.0    better",
		"hot         holds/s     3,100        2,900        0.94x      3,000–3,200  2,800–3,300  within spread",
		"hot         p99 ms      22.0         21.0         0.95x      20.0–30.0    19.0–25.0    within spread",
		"hot         x bare SQL  11.0         9.50         0.86x      10.0–12.0    9.00–9.90    worse",
		"hot         RSS MB      106          66.0         0.62x      100–108      64.0–69.0    better",
		"seats-2000  holds/s     10.0         10.0         1.00x      10.0–10.0    10.0–10.0    within spread",
		"seats-2000  p99 ms      5.00         5.00         1.00x      5.00–5.00    5.00–5.00    within spread",
		"seats-2000  RSS MB      106          66.0         0.62x      100–108      64.0–69.0    better",
		"",
	}, "\n"), out.String())
}

// TestNumberRoundsBeforeItChoosesItsForm: a figure that rounds up to the
// next form takes that form (99.96 is 100, not 100.0).
func TestNumberRoundsBeforeItChoosesItsForm(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{99.96: "100", 99.94: "99.9", 9.996: "10.0", 9.994: "9.99", 1234.5: "1,235", 0.5: "0.50"} {
		require.Equal(t, want, number(in), "%v", in)
	}
}

// TestCompareArgsHandsOnTheScenarioFlags: each run of a comparison gets the
// flags it was given but those the comparison sets itself.
func TestCompareArgsHandsOnTheScenarioFlags(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("server", "", "")
	fs.String("compare", "", "")
	fs.Int("rounds", 3, "")
	fs.Bool("json", false, "")
	fs.String("report", "", "")
	fs.String("scenarios", "", "")
	fs.Duration("duration", 0, "")
	fs.Int("clients", 64, "")
	require.NoError(t, fs.Parse([]string{"-server", "bin/stockhold", "-compare", "/tmp/b/stockhold", "-rounds=5", "-json",
		"-report", "x.md", "-scenarios", "hot,spread", "-duration", "3s"}))
	require.Equal(t, []string{"-duration=" + (3 * time.Second).String(), "-scenarios=hot,spread"}, compareArgs(fs))
}
