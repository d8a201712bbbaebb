package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReportKeepsWhatARunDidNotMeasure: a run rewrites the rows of the
// goals it measured and keeps every other row as the last run that
// measured it left it; the report reads back to the same data.
func TestReportKeepsWhatARunDidNotMeasure(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "PERFORMANCE.md")
	first := &benchRun{o: options{catalogue: defaultCatalogue}, results: map[string]*result{
		"hot":   {Scenario: "hot", Rate: 5000, Baseline: 400, Ratio: 12.5},
		"flash": {Scenario: "flash", Figures: map[string]float64{"held": 100, "refused": 900}},
	}}
	ids, missed, err := writeReport(path, first)
	require.NoError(t, err)
	require.Equal(t, []string{"hot", "flash"}, ids)
	require.Empty(t, missed)

	second := &benchRun{o: options{catalogue: defaultCatalogue}, results: map[string]*result{
		"hot": {Scenario: "hot", Rate: 3000, Baseline: 400, Ratio: 7.5},
	}}
	ids, missed, err = writeReport(path, second)
	require.NoError(t, err)
	require.Equal(t, []string{"hot"}, ids)
	require.Equal(t, []string{"hot"}, missed)

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(b)
	require.Contains(t, text, "| 7.50x (3,000 holds/s against 400) | no |", "the hot row is the second run's")
	require.Contains(t, text, "| 100 held, 900 refused, 0 errors | yes |", "the flash row is still the first run's")
	require.Contains(t, text, "| not measured yet | - | - |", "a goal no run measured says so")
	require.Equal(t, 1, strings.Count(text, dataMark))

	d, err := parseReport(b)
	require.NoError(t, err)
	again, err := renderReport(d)
	require.NoError(t, err)
	require.Equal(t, text, string(again), "the report is its data, rendered")
}

// TestGoalsReadTheirScenarios checks how goals are read off a run: a goal
// whose scenarios did not run is not measured, the server's memory only
// over the default scenarios, the large catalogue's holds against the last
// run over 1,000 SKUs.
func TestGoalsReadTheirScenarios(t *testing.T) {
	t.Parallel()
	byID := map[string]goal{}
	for _, g := range goals {
		require.NotContains(t, byID, g.id, "goal ids are unique")
		byID[g.id] = g
		require.Regexp(t, `^([A-Z_]+=\S+ )*make bench`, g.command, "%s: make bench, after the environment it needs", g.id)
	}
	read := func(id string, r *benchRun) (string, bool, bool) {
		t.Helper()
		g, ok := byID[id]
		require.True(t, ok, id)
		return g.read(r)
	}

	some := &benchRun{o: options{catalogue: defaultCatalogue}, results: map[string]*result{"hot": {Scenario: "hot", RSS: 90}}}
	_, _, ok := read("rss", some)
	require.False(t, ok, "memory is read over the default scenarios only")
	all := &benchRun{o: options{catalogue: defaultCatalogue}, results: map[string]*result{}}
	for _, s := range scenarioNames {
		all.results[s] = &result{Scenario: s, RSS: 100}
	}
	all.results["mixed"].RSS = 160
	fig, met, ok := read("rss", all)
	require.True(t, ok)
	require.False(t, met)
	require.Equal(t, "160 MB", fig)

	_, met, ok = read("flash", &benchRun{results: map[string]*result{"flash": {Figures: map[string]float64{"held": 101, "refused": 899}}}})
	require.True(t, ok)
	require.False(t, met, "101 held is an oversell")

	big := &benchRun{o: options{catalogue: bigCatalogue}, results: map[string]*result{"spread": {Scenario: "spread", Rate: 900,
		Figures: map[string]float64{"small_rate": 1000}}}}
	fig, met, ok = read("catalogue-holds", big)
	require.True(t, ok)
	require.True(t, met)
	require.Equal(t, "0.90x (900 against 1,000 holds/s)", fig)
	_, _, ok = read("spread", big)
	require.False(t, ok, "spread's goals are over 1,000 SKUs")

	fig, met, ok = read("soldout-pg", &benchRun{results: map[string]*result{"soldout": {Clients: 64, Figures: map[string]float64{"pg_share_pct": 6.25}}}})
	require.True(t, ok)
	require.True(t, met, "a read per 16 refusals shares the reads")
	require.Equal(t, "6.250% (a read per 16.0 refusals at 64 clients, whose bound is 1.6%)", fig)
	_, met, _ = read("soldout-pg", &benchRun{results: map[string]*result{"soldout": {Clients: 64, Figures: map[string]float64{"pg_share_pct": 25}}}})
	require.False(t, met, "a read per 4 refusals does not")

	_, met, ok = read("expiry-burst", &benchRun{results: map[string]*result{"expiry": {ExpiryLagP99: 300, Figures: map[string]float64{"not_expired": 3}}}})
	require.True(t, ok)
	require.False(t, met, "holds not expired miss the goal whatever the lag")
}

// TestPerformanceReportIsGenerated: docs/internals/PERFORMANCE.md is what
// make bench writes, byte for byte: its data, rendered. A change made by
// hand, or to the goals without a run, shows here.
func TestPerformanceReportIsGenerated(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "internals", "PERFORMANCE.md"))
	require.NoError(t, err)
	d, err := parseReport(b)
	require.NoError(t, err)
	again, err := renderReport(d)
	require.NoError(t, err)
	require.Equal(t, string(b), string(again), "docs/internals/PERFORMANCE.md is written by make bench: run it (or render the data again after changing goals.go)")
}

// TestAgainstSpreadInTurns: a leg's turn is held against the mean of the
// spread turns on either side of it, and the goal is the median of those
// ratios, read with their range.
func TestAgainstSpreadInTurns(t *testing.T) {
	t.Parallel()
	// Spread slows down over the run; the leg runs at 0.9x whatever the
	// machine does, but a slow turn of the leg (the third) stays one turn.
	around := []float64{4000, 3000, 3000, 2000, 2000}
	rates := []float64{3150, 2700, 1000, 1800}
	ratios := turnRatios(rates, around)
	require.InDeltaSlice(t, []float64{0.9, 0.9, 0.4, 0.9}, ratios, 1e-9)
	s := summarize(ratios)
	require.InDelta(t, 0.9, s.median, 1e-9)

	var goal goal
	for _, g := range goals {
		if g.id == "locations-nearest" {
			goal = g
		}
	}
	r := &benchRun{o: options{catalogue: defaultCatalogue}, results: map[string]*result{
		"locations-nearest": {Scenario: "locations-nearest", Rate: 2540, VsSpread: s.median,
			Figures: map[string]float64{"turns": 4, "vs_spread_min": s.min, "vs_spread_max": s.max}},
	}}
	fig, met, ok := goal.read(r)
	require.True(t, ok)
	require.True(t, met)
	require.Equal(t, "0.90x, the median of 4 turns (0.40–0.90x; 2,540 holds/s)", fig)
	r.results["locations-nearest"].VsSpread = 0.89
	_, met, _ = goal.read(r)
	require.False(t, met, "0.89x is short of 0.9x")
}
