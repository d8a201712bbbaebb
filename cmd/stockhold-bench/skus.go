package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// skusReads is how many times each catalogue read is timed.
const skusReads = 20

// skus times GET /v1/skus over the catalogue (-catalogue; above 10,000 SKUs
// it is seeded in SQL), one client at a time: a page of 1,000 SKUs at the
// start, the middle and the end of the keyset (the same cost wherever it
// starts), a low_stock page that matches nothing (it reads its whole
// stretch of rows, the most a filtered page reads), a batch of 100 SKUs
// against the 100 single reads it replaces in the same run (the ratio),
// and a walk of the first 100 pages.
func (b *bench) skus(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	n := b.o.catalogue
	read := func(path string) (time.Duration, answer, error) {
		began := time.Now()
		a, err := b.call("GET", path, b.shop, "", nil, http.StatusOK)
		if err != nil && a.status == 0 {
			// A keep-alive connection the server closed while the
			// catalogue was seeded: read again, on a new one.
			began = time.Now()
			a, err = b.call("GET", path, b.shop, "", nil, http.StatusOK)
		}
		return time.Since(began), a, err
	}
	timed := func(path string) (median, worst time.Duration, err error) {
		var took []time.Duration
		for range skusReads {
			d, _, err := read(path)
			if err != nil {
				return 0, 0, fmt.Errorf("GET %s: %w", path, err)
			}
			took = append(took, d)
		}
		slices.Sort(took)
		return took[len(took)/2], took[len(took)-1], nil
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

	var notes []string
	pages := map[string]float64{}
	for _, at := range []struct {
		name  string
		after int
	}{{"start", -1}, {"middle", n / 2}, {"end", n - 1001}} {
		path := "/v1/skus?limit=1000"
		if at.after >= 0 {
			path += "&cursor=" + spreadSKU(at.after)
		}
		med, worst, err := timed(path)
		if err != nil {
			return nil, err
		}
		notes = append(notes, fmt.Sprintf("page of 1,000 at the %s %s ms (max %s)", at.name, ms(med), ms(worst)))
		pages[at.name] = float64(med.Microseconds()) / 1000
	}
	med, worst, err := timed(fmt.Sprintf("/v1/skus?limit=100&low_stock=true&cursor=%s", spreadSKU(n/2)))
	if err != nil {
		return nil, err
	}
	notes = append(notes, fmt.Sprintf("low_stock page matching nothing %s ms (max %s)", ms(med), ms(worst)))

	// A batch of 100 random SKUs against the same 100 read one by one.
	var batch, single time.Duration
	for range skusReads {
		q := url.Values{}
		var paths []string
		for range 100 {
			sku := spreadSKU(rand.IntN(n))
			q.Add("sku", sku)
			paths = append(paths, "/v1/skus/"+sku)
		}
		d, a, err := read("/v1/skus?" + q.Encode())
		if err != nil {
			return nil, err
		}
		if !strings.Contains(string(a.body), `"missing":[]`) {
			return nil, fmt.Errorf("a batch of seeded SKUs has missing ones: %.200s", a.body)
		}
		batch += d
		for _, p := range paths {
			d, _, err := read(p)
			if err != nil {
				return nil, err
			}
			single += d
		}
	}
	notes = append(notes, fmt.Sprintf("batch of 100 %s ms vs 100 single reads %s ms (%.0fx)",
		ms(batch/skusReads), ms(single/skusReads), float64(single)/float64(batch)))

	// A walk of the first pages, as a catalogue sync does.
	began, seen, cursor := time.Now(), 0, ""
	for page := 0; page < 100; page++ {
		var body struct {
			SKUs []struct {
				SKU string `json:"sku"`
			} `json:"skus"`
			NextCursor *string `json:"next_cursor"`
		}
		_, a, err := read("/v1/skus?limit=1000&cursor=" + url.QueryEscape(cursor))
		if err == nil {
			err = a.json(&body)
		}
		if err != nil {
			return nil, err
		}
		seen += len(body.SKUs)
		if body.NextCursor == nil {
			break
		}
		cursor = *body.NextCursor
	}
	walk := time.Since(began)
	notes = append(notes, fmt.Sprintf("walk of %d SKUs in %.2f s (%.0f SKUs/s)", seen, walk.Seconds(), float64(seen)/walk.Seconds()))
	for _, line := range notes {
		fmt.Fprintf(b.log, "  %s\n", line)
	}
	r := &result{Scenario: "skus", Clients: 1, Note: fmt.Sprintf("%d SKUs: %s", n, strings.Join(notes, "; "))}
	r.figure("catalogue", float64(n))
	for at, v := range pages {
		r.figure("page_"+at+"_ms", v)
	}
	return []*result{r}, nil
}
