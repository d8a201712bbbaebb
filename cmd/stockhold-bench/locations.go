package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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

// strategyRuns are the strategies the scenario runs beside priority, each
// against spread in the same turns.
var strategyRuns = []string{"most_stock", "nearest"}

func locationSKU(i int) string { return fmt.Sprintf("loc-%05d", i) }

// locations: every client holds one unit of one of locationSKUs at
// random, naming no location, so that each hold is allocated among three,
// and half the time the first location (by priority) is short. It runs in
// turns (alternate) with spread's holds: spread, then the holds allocated
// by priority (the scenario's own row), by most_stock and by nearest
// (each to one of shipTos), turn after turn, so that each strategy's ratio
// to spread is taken between figures measured a few seconds apart
// (inTurnsWithSpread). Allocation is inside the group-committed batch, so
// the ratio is the cost of locking three rows per line instead of one and
// deciding among them.
func (b *bench) locations(ctx context.Context) ([]*result, error) {
	if err := b.locationStock(ctx); err != nil {
		return nil, err
	}
	legs := []spreadLeg{{scenario: "locations", bodies: make([][]byte, locationSKUs)}}
	for i := range legs[0].bodies {
		legs[0].bodies[i] = holdBody(0, "", locationSKU(i))
	}
	for _, s := range strategyRuns {
		l := spreadLeg{scenario: "locations-" + s, bodies: make([][]byte, locationSKUs)}
		for i := range l.bodies {
			body := fmt.Sprintf(`{"items":[{"sku":%q,"quantity":1}],"strategy":%q`, locationSKU(i), s)
			if s == "nearest" {
				p := shipTos[i%len(shipTos)]
				body += fmt.Sprintf(`,"ship_to":{"latitude":%.2f,"longitude":%.2f}`, p[0], p[1])
			}
			l.bodies[i] = []byte(body + "}")
		}
		legs = append(legs, l)
	}
	out, err := b.inTurnsWithSpread(ctx, legs)
	if err != nil {
		return nil, err
	}
	for _, r := range out[1:] {
		where, err := b.shares(ctx, r.Scenario)
		if err != nil {
			return nil, err
		}
		strategy := strings.TrimPrefix(r.Scenario, "locations-")
		if r.Scenario == "locations" {
			strategy = "priority"
			where = fmt.Sprintf("%d SKUs at %d locations, the first short for half of them; %s", locationSKUs, len(benchLocations), where)
		}
		r.Note = fmt.Sprintf("allocated by %s (%s): %s", strategy, where, r.Note)
	}
	return out, nil
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

// shares says where the holds of one leg of the scenario went: the share
// of their units at each location.
func (b *bench) shares(ctx context.Context, scenario string) (string, error) {
	rows, err := b.pool.Query(ctx, `
		SELECT l.location, sum(l.quantity)::float8 / sum(sum(l.quantity)) OVER ()
		FROM reservation_lines l JOIN reservations r ON r.id = l.reservation_id
		WHERE r.idempotency_key LIKE $1 GROUP BY l.location ORDER BY l.location`, turnKeyPrefix(scenario, b.run)+"%")
	if err != nil {
		return "", err
	}
	var parts []string
	for rows.Next() {
		var at string
		var share float64
		if err := rows.Scan(&at, &share); err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%.0f%% at %s", share*100, at))
	}
	return strings.Join(parts, ", "), rows.Err()
}
