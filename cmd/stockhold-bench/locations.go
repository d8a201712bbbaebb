package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// The locations scenario: holds allocated across warehouses.
const (
	// locationSKUs are the SKUs the scenario holds from, each stocked at
	// every one of benchLocations.
	locationSKUs = 1_000
)

// benchLocations are the scenario's warehouses, in priority order: the
// first has none of every other SKU (a row at 0: allocation reads it and
// finds it short), the other two plenty of every SKU. benchSpots are where
// they are, for the nearest strategy, and shipTos where its holds ship.
var (
	benchLocations = []string{"wh-1", "wh-2", "wh-3"}
	benchSpots     = [][2]float64{{48.86, 2.35}, {45.76, 4.84}, {52.52, 13.40}}
	shipTos        = [][2]float64{{43.30, 5.37}, {53.55, 9.99}, {50.85, 4.35}, {47.22, -1.55}}
)

// strategyRuns are the strategies the scenario runs after priority, each
// against spread's rate in the same run.
var strategyRuns = []string{"most_stock", "nearest"}

func locationSKU(i int) string { return fmt.Sprintf("loc-%05d", i) }

// locations: every client holds one unit of one of locationSKUs at
// random, naming no location, so that each hold is allocated among three
// by priority, and half the time the first location is short and the line
// goes to the second. It runs after spread in the same run, whose rate it
// is compared with: allocation is inside the group-committed batch, so the
// ratio is the cost of locking three rows per line instead of one and
// deciding among them.
func (b *bench) locations(ctx context.Context) ([]*result, error) {
	if b.spreadRate == 0 {
		return nil, fmt.Errorf("locations is compared with spread's rate in the same run: run spread first (-scenarios spread,locations)")
	}
	if err := b.locationStock(ctx); err != nil {
		return nil, err
	}
	bodies := make([][]byte, locationSKUs)
	for i := range bodies {
		bodies[i] = holdBody(0, "", locationSKU(i))
	}
	r := b.againstSpread(ctx, "locations", bodies)
	second, err := b.secondShare(ctx)
	if err != nil {
		return nil, err
	}
	r.Note = fmt.Sprintf("%d SKUs at %d locations, allocated by priority, the first short for half of them (%.0f%% of the holds went to the second): %.0f holds/s, %.2fx spread's %.0f holds/s in this run",
		locationSKUs, len(benchLocations), second*100, r.Rate, r.VsSpread, b.spreadRate)
	out := []*result{r}
	for _, s := range strategyRuns {
		out = append(out, b.locationsBy(ctx, s))
	}
	return out, nil
}

// locationsBy is the locations scenario's holds allocated by strategy s
// (nearest: to one of shipTos), its rate against spread's in the same run.
func (b *bench) locationsBy(ctx context.Context, s string) *result {
	bodies := make([][]byte, locationSKUs)
	for i := range bodies {
		body := fmt.Sprintf(`{"items":[{"sku":%q,"quantity":1}],"strategy":%q`, locationSKU(i), s)
		if s == "nearest" {
			p := shipTos[i%len(shipTos)]
			body += fmt.Sprintf(`,"ship_to":{"latitude":%.2f,"longitude":%.2f}`, p[0], p[1])
		}
		bodies[i] = []byte(body + "}")
	}
	r := b.againstSpread(ctx, "locations-"+s, bodies)
	r.Note = fmt.Sprintf("the same holds allocated by %s: %.0f holds/s, %.2fx spread's %.0f holds/s in this run", s, r.Rate, r.VsSpread, b.spreadRate)
	return r
}

// againstSpread runs scenario: every client holds one of bodies at
// random for the run's duration; its rate is compared with spread's in
// the same run.
func (b *bench) againstSpread(ctx context.Context, scenario string, bodies [][]byte) *result {
	r := &result{Scenario: scenario, Clients: b.o.clients}
	t := &tally{}
	el := b.closedLoop(ctx, scenario, b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("%s-%s-%d-%d", scenario, b.run, w, i), bodies[rand.IntN(len(bodies))])
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	r.VsSpread = r.Rate / b.spreadRate
	return r
}

// locationStock makes the scenario's locations and stock once: over HTTP,
// as an operator would. A location there already (a reused database) is
// taken as it is.
func (b *bench) locationStock(ctx context.Context) error {
	if a, err := b.do("GET", "/v1/skus/"+locationSKU(locationSKUs-1), b.shop, "", nil); err == nil && a.status == http.StatusOK {
		return nil
	}
	for i, id := range benchLocations {
		body := fmt.Sprintf(`{"id":%q,"name":%q,"priority":%d,"latitude":%.2f,"longitude":%.2f}`, id, id, i+1, benchSpots[i][0], benchSpots[i][1])
		if _, err := b.call("POST", "/v1/locations", b.ops, "loc-"+id+"-"+b.run, []byte(body), http.StatusCreated, http.StatusConflict); err != nil {
			return fmt.Errorf("location %s: %w", id, err)
		}
	}
	type adjustment struct {
		sku, location string
		delta         int64
	}
	var work []adjustment
	for i := range locationSKUs {
		sku := locationSKU(i)
		if i%2 == 0 {
			work = append(work, adjustment{sku, benchLocations[0], bigStock})
		} else {
			// A row at 0: the first location is short.
			work = append(work, adjustment{sku, benchLocations[0], 1}, adjustment{sku, benchLocations[0], -1})
		}
		for _, l := range benchLocations[1:] {
			work = append(work, adjustment{sku, l, bigStock})
		}
	}
	ch := make(chan []adjustment)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range b.o.clients {
		wg.Go(func() {
			for batch := range ch {
				for _, a := range batch {
					key := fmt.Sprintf("in-%s-%s-%d-%s", a.sku, a.location, a.delta, b.run)
					body := fmt.Sprintf(`{"location":%q,"delta":%d,"reason":"benchmark stock"}`, a.location, a.delta)
					var err error
					for try := 0; try < 50; try++ { // a 503 is retried with the same key
						var ans answer
						ans, err = b.call("POST", "/v1/skus/"+a.sku+"/adjustments", b.ops, key, []byte(body), http.StatusOK)
						if err == nil || ans.status != http.StatusServiceUnavailable {
							break
						}
						time.Sleep(100 * time.Millisecond)
					}
					if err != nil {
						mu.Lock()
						firstErr = cmpErr(firstErr, fmt.Errorf("stock %s at %s: %w", a.sku, a.location, err))
						mu.Unlock()
						return
					}
				}
			}
		})
	}
	// One SKU's adjustments in order (the +1 before the -1), SKUs at once.
	for i := 0; i < len(work); {
		j := i + 1
		for j < len(work) && work[j].sku == work[i].sku {
			j++
		}
		select {
		case ch <- work[i:j]:
		case <-ctx.Done():
		}
		i = j
	}
	close(ch)
	wg.Wait()
	return firstErr
}

// secondShare is the share of the scenario's held units that went to the
// second location.
func (b *bench) secondShare(ctx context.Context) (float64, error) {
	var second, all int64
	err := b.pool.QueryRow(ctx, `
		SELECT coalesce(sum(quantity) FILTER (WHERE location = $1), 0), coalesce(sum(quantity), 0)
		FROM reservation_lines WHERE sku LIKE 'loc-%'`, benchLocations[1]).Scan(&second, &all)
	if err != nil || all == 0 {
		return 0, err
	}
	return float64(second) / float64(all), nil
}
