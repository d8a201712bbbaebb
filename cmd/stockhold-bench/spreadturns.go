package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The scenarios measured against spread (locations, preorder) run in turns
// with spread's holds rather than after them: on this shared machine the
// rate of the same build moves by half between runs minutes apart, and
// measured one after the other, 5 s each, the locations strategies' ratios
// to spread ranged from 0.70x to 1.38x over five runs of the same code.

// spreadLeg is a scenario measured against spread: single-unit holds of
// one of bodies at random.
type spreadLeg struct {
	scenario string
	bodies   [][]byte
}

// turnKeyPrefix is how the idempotency keys of a leg's holds begin.
func turnKeyPrefix(scenario, run string) string { return "t-" + scenario + "-" + run + "-" }

// inTurnsWithSpread runs spread's holds (over the catalogue, as the spread
// scenario holds) and each of legs in turns (alternate: -turns of each,
// -duration in all per leg, after a turn of each to warm up), then one
// closing turn of spread. It returns spread's result in these turns
// ("<first leg>-spread") and one per leg, whose VsSpread is the median,
// over the turns, of the leg's rate against the mean of the spread turns
// on either side of it (the one that opened its turn and the one that
// opened the next, or closed the run). The lowest and highest of those
// ratios and the ratio of the leg's holds/s over all its turns to
// spread's are the figures vs_spread_min, vs_spread_max and
// vs_spread_overall.
func (b *bench) inTurnsWithSpread(ctx context.Context, legs []spreadLeg) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	newLeg := func(scenario string, body func() []byte) *leg {
		prefix := turnKeyPrefix(scenario, b.run)
		return &leg{name: scenario, t: &tally{}, do: func(w, i int) (bool, error) {
			return b.hold(fmt.Sprintf("%s%d-%d", prefix, w, i), body())
		}}
	}
	spread := newLeg(legs[0].scenario+"-spread", b.spreadBody(0))
	all := []*leg{spread}
	for _, l := range legs {
		all = append(all, newLeg(l.scenario, func() []byte { return l.bodies[rand.IntN(len(l.bodies))] }))
	}
	b.alternate(ctx, b.o.clients, b.o.duration, all...)
	// The closing turn of spread, the other side of the last turn's legs.
	closing, turns := &tally{}, b.o.turns
	start := time.Now()
	b.closedLoop(ctx, spread.name+" (closing)", b.o.clients, b.o.duration/time.Duration(turns), closing, func(w, i int) (bool, error) {
		return spread.do(w, (turns+1)*perTurn+i)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	around := append(spread.rates, float64(closing.ok.Load())/time.Since(start).Seconds())
	rss := b.rss.reset()

	sr := &result{Scenario: spread.name, Clients: b.o.clients, RSS: rss}
	spread.t.fill(sr, spread.el)
	sr.Note = fmt.Sprintf("spread's holds in %d turns with %s's, the rate they are held against", turns, legs[0].scenario)
	out := []*result{sr}
	for _, l := range all[1:] {
		r := &result{Scenario: l.name, Clients: b.o.clients, RSS: rss}
		l.t.fill(r, l.el)
		ratios := turnRatios(l.rates, around)
		s := summarize(ratios)
		r.VsSpread = s.median
		r.figure("vs_spread_min", s.min)
		r.figure("vs_spread_max", s.max)
		r.figure("vs_spread_overall", r.Rate/sr.Rate)
		r.figure("turns", float64(turns))
		cpu := ""
		if c := sr.ServerCPU + sr.DatabaseCPU; c > 0 {
			r.figure("cpu_vs_spread", (r.ServerCPU+r.DatabaseCPU)/c)
			cpu = fmt.Sprintf("; CPU per request (server and database) %.2fx spread's", (r.ServerCPU+r.DatabaseCPU)/c)
		}
		r.Note = fmt.Sprintf("%.0f holds/s; against spread's in the turns around each of its %d: median %.2fx (%.2f–%.2fx); over all its turns %.2fx spread's %.0f holds/s%s",
			r.Rate, turns, s.median, s.min, s.max, r.Rate/sr.Rate, sr.Rate, cpu)
		fmt.Fprintf(b.log, "  %s against spread, turn by turn: %s; median %.2fx, over all turns %.2fx%s\n", l.name, ratioList(ratios), s.median, r.Rate/sr.Rate, cpu)
		out = append(out, r)
	}
	return out, nil
}

// turnRatios is each turn's rate of a leg (rates) against the mean of the
// spread turns on either side of it: around has one more turn than rates,
// around[n] the spread turn that opened turn n.
func turnRatios(rates, around []float64) []float64 {
	out := make([]float64, len(rates))
	for n, rate := range rates {
		out[n] = rate / ((around[n] + around[n+1]) / 2)
	}
	return out
}

// ratioList formats ratios as "0.91 0.95 ...".
func ratioList(ratios []float64) string {
	parts := make([]string, len(ratios))
	for i, x := range ratios {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}
