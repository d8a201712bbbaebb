package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/db"
)

const (
	flashUnits = 100
	flashUsers = 1000
	endHolds   = 10_000
	bigStock   = 1_000_000_000
)

func (b *bench) scenario(ctx context.Context, name string) ([]*result, error) {
	b.rss.reset()
	switch name {
	case "hot":
		return b.hot(ctx)
	case "spread":
		return b.spread(ctx)
	case "locations":
		return b.locations(ctx)
	case "preorder":
		return b.preorder(ctx)
	case "half":
		return b.half(ctx)
	case "reconcile":
		return b.reconcile(ctx)
	case "multi":
		return b.multi(ctx)
	case "flash":
		return b.flash(ctx)
	case "mixed":
		return b.mixed(ctx)
	case "expiry":
		return b.expiry(ctx)
	case "campaign-end":
		return b.campaignEnd(ctx)
	case "seats":
		return b.seats(ctx)
	case "skus":
		return b.skus(ctx)
	case "soldout":
		return b.soldout(ctx)
	case "bundles":
		return b.bundles(ctx)
	case "archive":
		return b.archive(ctx)
	case "history":
		return b.history(ctx)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// hotReference measures single-unit holds on one SKU with none released,
// sent by rawLoop as soldout's refusals are: what soldout compares with.
// (The seats scenario measures its own, in turns with its venues.)
func (b *bench) hotReference(ctx context.Context) (*result, error) {
	sku := "hot-ref-" + b.run
	if err := b.stockIn(ctx, []string{sku}, bigStock); err != nil {
		return nil, err
	}
	body := holdBody(0, "", sku)
	r := &result{Scenario: "hot (reference)", Clients: b.o.clients}
	t := &tally{}
	el, err := b.rawLoop(ctx, r.Scenario, b.client.addr, b.o.clients, b.o.duration, t, "POST", "/v1/reservations", b.shop, sku, body,
		func(a answer) (bool, error) {
			if a.status != http.StatusCreated {
				return false, fmt.Errorf("HTTP %d: %s", a.status, strings.TrimSpace(string(a.body)))
			}
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	t.fill(r, el)
	r.RSS = b.rss.reset()
	return r, nil
}

// hot: every client holds one unit of the same SKU.
func (b *bench) hot(ctx context.Context) ([]*result, error) {
	if err := b.stockIn(ctx, []string{"hot", "bare-hot"}, bigStock); err != nil {
		return nil, err
	}
	body := holdBody(0, "", "hot")
	r := &result{Scenario: "hot", Clients: b.o.clients}
	t := &tally{}
	el := b.closedLoop(ctx, "hot", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("hot-%s-%d-%d", b.run, w, i), body)
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	if err := b.baseline(ctx, r, func(int) string { return "bare-hot" }); err != nil {
		return nil, err
	}
	return []*result{r}, nil
}

// spread: every client holds one unit of one of the catalogue's SKUs
// (-catalogue, 1,000 by default) at random.
func (b *bench) spread(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	r := &result{Scenario: "spread", Clients: b.o.clients}
	if b.o.catalogue > httpCatalogue {
		if err := b.prewarm(ctx); err != nil {
			return nil, err
		}
		// The rate it is held against: the same run, the same database,
		// over the catalogue's first smallCatalogue SKUs, just before.
		small := &result{Scenario: "spread-small", Clients: b.o.clients}
		smallWAL, err := b.spreadOver(ctx, small, smallCatalogue, spreadBodyOver(0, smallCatalogue))
		if err != nil {
			return nil, err
		}
		bigWAL, err := b.spreadOver(ctx, r, b.o.catalogue, b.spreadBody(0))
		if err != nil {
			return nil, err
		}
		r.figure("small_rate", small.Rate)
		r.figure("small_wal_bytes_per_hold", smallWAL.bytes)
		r.figure("small_fpi_per_hold", smallWAL.fpi)
		r.Note = fmt.Sprintf("over %d SKUs: %.0f holds/s, %s; over its first %d in the same run: %.0f holds/s, %s: %.2fx; no bare-SQL baseline (it needs a catalogue of its own)",
			b.o.catalogue, r.Rate, bigWAL, smallCatalogue, small.Rate, smallWAL, r.Rate/small.Rate)
		fmt.Fprintf(b.log, "  %s\n", r.Note)
		return []*result{r}, nil
	}
	if _, err := b.spreadOver(ctx, r, b.o.catalogue, b.spreadBody(0)); err != nil {
		return nil, err
	}
	if err := b.baseline(ctx, r, func(int) string { return fmt.Sprintf("bare-%08d", rand.IntN(b.o.catalogue)) }); err != nil {
		return nil, err
	}
	return []*result{r}, nil
}

// smallCatalogue is how many of a large catalogue's SKUs spread also holds
// from, in the same run, as the rate the large catalogue's is held against.
const smallCatalogue = 1000

// spreadOver runs spread's load over n SKUs into r and, over a catalogue
// seeded in SQL, returns what PostgreSQL wrote per hold meanwhile.
func (b *bench) spreadOver(ctx context.Context, r *result, n int, body func() []byte) (walPerHold, error) {
	measure := b.o.catalogue > httpCatalogue
	var before walStats
	if measure {
		var err error
		if before, err = b.walNow(ctx); err != nil {
			return walPerHold{}, err
		}
	}
	t := &tally{}
	el := b.closedLoop(ctx, r.Scenario, b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("%s-%s-%d-%d", r.Scenario, b.run, w, i), body())
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	r.figure("catalogue", float64(n))
	b.spreadRate = r.Rate
	if !measure {
		return walPerHold{}, nil
	}
	after, err := b.walNow(ctx)
	if err != nil {
		return walPerHold{}, err
	}
	w := after.since(before, r.Holds)
	r.figure("wal_bytes_per_hold", w.bytes)
	r.figure("fpi_per_hold", w.fpi)
	r.figure("stock_hot_update_pct", w.hotPct)
	return w, nil
}

// walStats are PostgreSQL's counters of what it wrote: the cluster's WAL
// (pg_stat_wal) and the bench database's updates of stock rows.
type walStats struct {
	bytes, fpi, updates, hot float64
	lsn                      string // pg_current_wal_lsn, for pg_waldump
}

// walNow reads the counters, once every backend has sent its own: a
// backend that goes idle sends what it counted within 10 s (PostgreSQL's
// PGSTAT_IDLE_INTERVAL), so the read waits that long first.
func (b *bench) walNow(ctx context.Context) (walStats, error) {
	select {
	case <-time.After(11 * time.Second):
	case <-ctx.Done():
		return walStats{}, ctx.Err()
	}
	var w walStats
	err := b.pool.QueryRow(ctx, `
		SELECT w.wal_bytes::float8, w.wal_fpi::float8, t.n_tup_upd::float8, t.n_tup_hot_upd::float8, pg_current_wal_lsn()::text
		FROM pg_stat_wal w, pg_stat_user_tables t WHERE t.relid = 'stock'::regclass`).Scan(&w.bytes, &w.fpi, &w.updates, &w.hot, &w.lsn)
	return w, err
}

// walPerHold is what PostgreSQL wrote per hold over a scenario.
type walPerHold struct {
	bytes, fpi, hotPct float64
	from, to           string // the LSNs around it
}

func (w walStats) since(before walStats, holds int64) walPerHold {
	p := walPerHold{from: before.lsn, to: w.lsn}
	if holds > 0 {
		p.bytes = (w.bytes - before.bytes) / float64(holds)
		p.fpi = (w.fpi - before.fpi) / float64(holds)
	}
	if u := w.updates - before.updates; u > 0 {
		p.hotPct = 100 * (w.hot - before.hot) / u
	}
	return p
}

func (p walPerHold) String() string {
	return fmt.Sprintf("%.1f KB of WAL and %.2f full-page images per hold, %.0f%% of stock updates HOT (WAL %s to %s)",
		p.bytes/1024, p.fpi, p.hotPct, p.from, p.to)
}

// half: spread at half the rate spread reached, open loop: the latency of
// a hold when the service is not at its limit.
func (b *bench) half(ctx context.Context) ([]*result, error) {
	rate, of := b.spreadRate/2, "half of spread's rate"
	if b.o.halfRate > 0 {
		rate, of = b.o.halfRate, "set by -half-rate"
	}
	if rate == 0 {
		return nil, fmt.Errorf("half runs at half of spread's rate: run spread first, or set -half-rate")
	}
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	body := b.spreadBody(0)
	r := &result{Scenario: "half", Note: fmt.Sprintf("open loop at %.0f holds/s, %s", rate, of)}
	t := &tally{}
	el, pace := b.openLoop(ctx, "half", rate, b.o.duration, t, func(i int) (bool, error) {
		return b.hold(fmt.Sprintf("half-%s-%d", b.run, i), body())
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	r.Note += fmt.Sprintf("; latency from when each request was sent (the pacer's timer woke %.1f ms late at p50, %.1f ms at p99), or from when it was due for the %d the server held back",
		pace.P50, pace.P99, pace.Held)
	return []*result{r}, nil
}

// multi: holds of three lines over the catalogue.
func (b *bench) multi(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	r := &result{Scenario: "multi", Clients: b.o.clients}
	t := &tally{}
	el := b.closedLoop(ctx, "multi", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		p := distinct(3, b.o.catalogue)
		body := holdBody(0, "", spreadSKU(p[0]), spreadSKU(p[1]), spreadSKU(p[2]))
		return b.hold(fmt.Sprintf("multi-%s-%d-%d", b.run, w, i), body)
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	return []*result{r}, nil
}

// flash: 1,000 clients race for 100 units; exactly 100 must be held.
func (b *bench) flash(ctx context.Context) ([]*result, error) {
	sku := "flash-" + b.run
	if err := b.stockIn(ctx, []string{sku}, flashUnits); err != nil {
		return nil, err
	}
	body := holdBody(0, "", sku)
	r := &result{Scenario: "flash", Clients: flashUsers}
	t := &tally{}
	var held, refused atomic.Int64
	gate := make(chan struct{})
	var wg sync.WaitGroup
	lats := make([]time.Duration, flashUsers)
	for i := range flashUsers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			s := time.Now()
			a, err := b.call("POST", "/v1/reservations", b.shop, fmt.Sprintf("flash-%s-%d", b.run, i), body, http.StatusCreated, http.StatusConflict)
			lats[i] = time.Since(s)
			switch {
			case err != nil:
				t.fail(err)
			case a.status == http.StatusCreated:
				held.Add(1)
			case strings.Contains(string(a.body), `"out_of_stock"`):
				refused.Add(1)
			default:
				t.fail(fmt.Errorf("HTTP %d: %s", a.status, a.body))
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	el := time.Since(start)
	t.add(lats)
	t.ok.Store(flashUsers - t.errs.Load())
	t.fill(r, el)
	r.Holds = held.Load()
	r.RSS = b.rss.reset()
	verdict := "yes"
	if held.Load() != flashUnits || refused.Load() != flashUsers-flashUnits {
		verdict = "NO"
	}
	r.figure("held", float64(held.Load()))
	r.figure("refused", float64(refused.Load()))
	r.Note = fmt.Sprintf("exactly %d of %d held: %s (%d held, %d out_of_stock, %d errors); rate is answers/s",
		flashUnits, flashUsers, verdict, held.Load(), refused.Load(), t.errs.Load())
	return []*result{r}, nil
}

// mixed: each client holds (TTL 2 s), then confirms 40% of its holds,
// releases 30% and lets 30% expire; every request is timed.
func (b *bench) mixed(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	body := b.spreadBody(2)
	r := &result{Scenario: "mixed", Clients: b.o.clients}
	t := &tally{}
	var ops atomic.Int64
	var mu sync.Mutex
	var expiring []string
	pending := make([]string, b.o.clients) // a hold each worker still has to decide
	el := b.closedLoop(ctx, "mixed", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		ops.Add(1)
		if id := pending[w]; id != "" {
			pending[w] = ""
			action := "confirm"
			if rand.IntN(7) >= 4 {
				action = "release"
			}
			_, err := b.call("POST", "/v1/reservations/"+id+"/"+action, b.shop, "", nil, http.StatusOK)
			return false, err
		}
		a, err := b.call("POST", "/v1/reservations", b.shop, fmt.Sprintf("mixed-%s-%d-%d", b.run, w, i), body(), http.StatusCreated)
		if err != nil {
			return false, err
		}
		var h struct{ ID string }
		if err := a.json(&h); err != nil {
			return false, err
		}
		if rand.IntN(10) < 3 {
			mu.Lock()
			expiring = append(expiring, h.ID)
			mu.Unlock()
		} else {
			pending[w] = h.ID
		}
		return true, nil
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	lag, still, note, err := b.expiryLag(ctx, expiring, 3*time.Second)
	if err != nil {
		return nil, err
	}
	r.ExpiryLagP50, r.ExpiryLagP99, r.ExpiryLagMax = lag[0], lag[1], lag[2]
	r.figure("not_expired", float64(still))
	r.Note = fmt.Sprintf("%.0f requests/s in all (holds, then confirm 40%%, release 30%%, expire 30%%); %s", float64(ops.Load())/el.Seconds(), note)
	return []*result{r}, nil
}

// expiry: a burst of holds with a 2 s TTL on one SKU, at full rate for
// the scenario's duration (so the first ones expire while the burst goes
// on, on the row the burst's batches keep busy), with a campaign due to
// start while they expire; then how late each hold expired, and how late
// the campaign started.
func (b *bench) expiry(ctx context.Context) ([]*result, error) {
	sku := "burst-sku-" + b.run
	if err := b.stockIn(ctx, []string{sku}, bigStock); err != nil {
		return nil, err
	}
	camp := "burst-" + b.run
	if err := b.stockIn(ctx, []string{camp}, 10); err != nil {
		return nil, err
	}
	startsAt := time.Now().Add(b.o.duration*7/10 + time.Second).UTC().Truncate(time.Millisecond)
	if _, err := b.call("POST", "/v1/campaigns", b.ops, camp, []byte(fmt.Sprintf(
		`{"id":%q,"starts_at":%q,"ends_at":%q,"hold_ttl_seconds":60,"allotments":[{"sku":%q,"quantity":10}]}`,
		camp, startsAt.Format(time.RFC3339Nano), startsAt.Add(time.Hour).Format(time.RFC3339Nano), camp)), http.StatusCreated); err != nil {
		return nil, fmt.Errorf("create campaign: %w", err)
	}
	body := holdBody(2, "", sku)
	r := &result{Scenario: "expiry", Clients: b.o.clients}
	t := &tally{}
	var mu sync.Mutex
	var ids []string
	el := b.closedLoop(ctx, "expiry (burst)", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		a, err := b.call("POST", "/v1/reservations", b.shop, fmt.Sprintf("%s-%d-%d", sku, w, i), body, http.StatusCreated)
		if err != nil {
			return false, err
		}
		var h struct{ ID string }
		if err := a.json(&h); err != nil {
			return false, err
		}
		mu.Lock()
		ids = append(ids, h.ID)
		mu.Unlock()
		return true, nil
	})
	t.fill(r, el)
	r.RSS = b.rss.reset()
	lag, still, note, err := b.expiryLag(ctx, ids, 3*time.Second)
	if err != nil {
		return nil, err
	}
	r.ExpiryLagP50, r.ExpiryLagP99, r.ExpiryLagMax = lag[0], lag[1], lag[2]
	r.figure("not_expired", float64(still))
	r.figure("holds", float64(len(ids)))
	var c struct {
		Status    string     `json:"status"`
		StartedAt *time.Time `json:"started_at"`
	}
	a, err := b.call("GET", "/v1/campaigns/"+camp, b.ops, "", nil, http.StatusOK)
	if err == nil {
		err = a.json(&c)
	}
	if err != nil {
		return nil, err
	}
	started := "not started"
	if c.StartedAt != nil {
		started = fmt.Sprintf("started %d ms after its starts_at", c.StartedAt.Sub(startsAt).Milliseconds())
		r.figure("campaign_late_ms", float64(c.StartedAt.Sub(startsAt).Milliseconds()))
	}
	r.Note = fmt.Sprintf("%d holds of one SKU (2 s TTL) made in %.1f s, then expired: %s; a campaign due while they expired %s", len(ids), el.Seconds(), note, started)
	return []*result{r}, nil
}

// campaignEnd: 10,000 unpaid campaign holds are rolled back while spread
// traffic runs; spread's p99 during the rollback against its p99 just
// before it.
func (b *bench) campaignEnd(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	camp := "end-" + b.run
	if err := b.stockIn(ctx, []string{camp}, endHolds); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	if _, err := b.call("POST", "/v1/campaigns", b.ops, camp, []byte(fmt.Sprintf(
		`{"id":%q,"starts_at":%q,"ends_at":%q,"hold_ttl_seconds":3600,"allotments":[{"sku":%q,"quantity":%d}]}`,
		camp, now.Format(time.RFC3339Nano), now.Add(time.Hour).Format(time.RFC3339Nano), camp, endHolds)), http.StatusCreated); err != nil {
		return nil, fmt.Errorf("create campaign: %w", err)
	}
	if err := b.waitCampaign(ctx, camp, "active", 30*time.Second); err != nil {
		return nil, err
	}
	body := []byte(fmt.Sprintf(`{"campaign":%q,"items":[{"sku":%q,"quantity":1}]}`, camp, camp))
	setup := &tally{}
	var next atomic.Int64
	fillCtx, stop := context.WithCancel(ctx)
	b.closedLoop(fillCtx, "campaign-end (holds)", b.o.clients, time.Minute, setup, func(w, i int) (bool, error) {
		n := next.Add(1)
		if n > endHolds {
			stop()
			return false, nil
		}
		return b.hold(fmt.Sprintf("end-%s-%d", b.run, n), body)
	})
	stop()
	if setup.ok.Load() != endHolds {
		return nil, fmt.Errorf("made %d of %d campaign holds (%d errors)", setup.ok.Load(), endHolds, setup.errs.Load())
	}

	spreadBody := b.spreadBody(0)
	spread := func(label string, ctx context.Context, d time.Duration) (*tally, time.Duration) {
		t := &tally{}
		el := b.closedLoop(ctx, label, b.o.clients, d, t, func(w, i int) (bool, error) {
			return b.hold(fmt.Sprintf("%s-%s-%d-%d", label, b.run, w, i), spreadBody())
		})
		return t, el
	}
	b.rss.reset()
	before, beforeEl := spread("spread before", ctx, b.o.duration)
	quiet := &result{}
	before.fill(quiet, beforeEl)

	if _, err := b.call("POST", "/v1/campaigns/"+camp+"/end", b.ops, "", []byte(`{"operator":"bench","reason":"benchmark"}`), http.StatusAccepted); err != nil {
		return nil, fmt.Errorf("end campaign: %w", err)
	}
	start := time.Now()
	rolling, done := context.WithCancel(ctx)
	var waitErr error
	go func() {
		defer done()
		waitErr = b.waitCampaign(ctx, camp, "rolled_back", 5*time.Minute)
	}()
	during, duringEl := spread("spread during rollback", rolling, 5*time.Minute)
	<-rolling.Done()
	if waitErr != nil {
		return nil, waitErr
	}
	took := time.Since(start)
	r := &result{Scenario: "campaign-end", Clients: b.o.clients}
	during.fill(r, duringEl)
	r.RSS = b.rss.reset()
	r.figure("p99_ratio", r.P99/quiet.P99)
	r.figure("p99_before_ms", quiet.P99)
	r.Note = fmt.Sprintf("%d campaign holds rolled back in %.1f s while spread ran: p99 %.1f ms during, %.1f ms just before (%.2fx); %.0f holds/s before",
		endHolds, took.Seconds(), r.P99, quiet.P99, r.P99/quiet.P99, quiet.Rate)
	return []*result{r}, nil
}

// baseline runs the bare-SQL hold at the same concurrency for the same
// time and puts its rate beside r's.
func (b *bench) baseline(ctx context.Context, r *result, sku func(worker int) string) error {
	t := &tally{}
	el := b.closedLoop(ctx, r.Scenario+" (bare SQL)", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		return true, b.bare(ctx, sku(w), fmt.Sprintf("bare-%s-%s-%d-%d", r.Scenario, b.run, w, i))
	})
	base := &result{}
	t.fill(base, el)
	if base.Errors > 0 {
		return fmt.Errorf("bare SQL: %d errors, first: %s", base.Errors, base.Note)
	}
	r.Baseline, r.BaselineP99 = base.Rate, base.P99
	r.Ratio = r.Rate / base.Rate
	return nil
}

// bare is the naive hold: BEGIN; UPDATE stock ... WHERE available >= 1;
// INSERT reservation; COMMIT, one statement per round trip.
func (b *bench) bare(ctx context.Context, sku, key string) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := db.New(tx)
	if _, err := q.StockReserve(ctx, db.StockReserveParams{Quantity: 1, Sku: sku, Location: "default", Pool: "main"}); err != nil {
		return fmt.Errorf("reserve %s: %w", sku, err)
	}
	// The reservation's own columns, not RETURNING *: a base built
	// before a column was added (make bench-compare) runs it too.
	if _, err := tx.Exec(ctx, `INSERT INTO reservations (id, client, idempotency_key, request_hash, expires_at)
		VALUES ($1, 'bare', $2, 'bare', now() + interval '900 seconds') ON CONFLICT (client, idempotency_key) DO NOTHING`,
		uuid.New(), key); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// expiryLag waits until holds ids are due (plus settle), then reads each
// back and returns how late they expired, p50, p99 and max in ms.
func (b *bench) expiryLag(ctx context.Context, ids []string, settle time.Duration) ([3]float64, int, string, error) {
	var out [3]float64
	if len(ids) == 0 {
		return out, 0, "no holds left to expire", nil
	}
	type hold struct {
		Status     string     `json:"status"`
		ExpiresAt  time.Time  `json:"expires_at"`
		ReleasedAt *time.Time `json:"released_at"`
	}
	read := func(id string) (hold, error) {
		var h hold
		a, err := b.call("GET", "/v1/reservations/"+id, b.ops, "", nil, http.StatusOK)
		if err == nil {
			err = a.json(&h)
		}
		return h, err
	}
	last, err := read(ids[len(ids)-1])
	if err != nil {
		return out, 0, "", err
	}
	fmt.Fprintf(b.log, "  waiting for %d holds to expire\n", len(ids))
	select {
	case <-time.After(time.Until(last.ExpiresAt.Add(settle))):
	case <-ctx.Done():
		return out, 0, "", ctx.Err()
	}
	lags := make([]time.Duration, len(ids))
	held := make([]bool, len(ids))
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range b.o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				h, err := read(ids[i])
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					continue
				}
				if h.Status != "expired" || h.ReleasedAt == nil {
					// Still held: late by at least its age now.
					held[i] = true
					lags[i] = time.Since(h.ExpiresAt)
					continue
				}
				lags[i] = h.ReleasedAt.Sub(h.ExpiresAt)
			}
		}()
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return out, 0, "", firstErr
	}
	still := 0
	for i := range ids {
		if held[i] {
			still++
		}
	}
	p50, _, p99, mx := percentiles(lags)
	out = [3]float64{p50, p99, mx}
	note := fmt.Sprintf("%d expired, the latest %.0f ms after its expires_at", len(ids)-still, mx)
	if still > 0 {
		note = fmt.Sprintf("%d expired, %d NOT expired when read at least %s after their expiry (counted in the lag at their age then, a lower bound), the latest %.0f ms",
			len(ids)-still, still, settle, mx)
	}
	return out, still, note, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// waitCampaign waits until campaign id has status.
func (b *bench) waitCampaign(ctx context.Context, id, status string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		a, err := b.call("GET", "/v1/campaigns/"+id, b.ops, "", nil, http.StatusOK)
		if err != nil {
			return err
		}
		var c struct{ Status string }
		if err := a.json(&c); err != nil {
			return err
		}
		if c.Status == status {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("campaign %s is %s after %s, not %s", id, c.Status, limit, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stockIn puts n units of each of skus in stock, through the API.
func (b *bench) stockIn(ctx context.Context, skus []string, n int64) error {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	work := make(chan string)
	for range min(b.o.clients, len(skus)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sku := range work {
				var err error
				for try := 0; try < 50; try++ { // a 503 (a machine too busy) is retried with the same key
					var a answer
					a, err = b.call("POST", "/v1/skus/"+sku+"/adjustments", b.ops, "in-"+sku+"-"+b.run,
						[]byte(fmt.Sprintf(`{"delta":%d,"reason":"benchmark stock"}`, n)), http.StatusOK)
					if err == nil || a.status != http.StatusServiceUnavailable {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, fmt.Errorf("stock in %s: %w", sku, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, s := range skus {
		if ctx.Err() != nil {
			break
		}
		work <- s
	}
	close(work)
	wg.Wait()
	return cmpErr(firstErr, ctx.Err())
}

// httpCatalogue is the largest catalogue put in stock over HTTP, with the
// baseline's own SKUs; a larger one is seeded in SQL (seedCatalogue).
const httpCatalogue = 10_000

// spreadStock puts the catalogue's SKUs in stock once: over HTTP, with the
// baseline's own as many, up to httpCatalogue SKUs; in SQL beyond.
func (b *bench) spreadStock(ctx context.Context) error {
	a, err := b.do("GET", "/v1/skus/"+spreadSKU(b.o.catalogue-1), b.shop, "", nil)
	if err == nil && a.status == http.StatusOK {
		return nil
	}
	if b.o.catalogue > httpCatalogue {
		return b.seedCatalogue(ctx, b.o.catalogue)
	}
	var skus []string
	for i := range b.o.catalogue {
		skus = append(skus, spreadSKU(i), fmt.Sprintf("bare-%08d", i))
	}
	return b.stockIn(ctx, skus, bigStock)
}

func spreadSKU(i int) string { return fmt.Sprintf("sp-%08d", i) }

// spreadBody returns a function that answers the body of a single-unit
// hold of a catalogue SKU at random: from bodies made once for a catalogue
// that can be held in memory, made on the spot for a larger one.
func (b *bench) spreadBody(ttl int) func() []byte {
	return spreadBodyOver(ttl, b.o.catalogue)
}

// spreadBodyOver is spreadBody over the catalogue's first n SKUs.
func spreadBodyOver(ttl, n int) func() []byte {
	if n > httpCatalogue {
		return func() []byte { return holdBody(ttl, "", spreadSKU(rand.IntN(n))) }
	}
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = holdBody(ttl, "", spreadSKU(i))
	}
	return func() []byte { return bodies[rand.IntN(n)] }
}

// distinct returns k different numbers below n at random.
func distinct(k, n int) []int {
	out := make([]int, 0, k)
	for len(out) < k {
		x := rand.IntN(n)
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// holdBody is a hold of one unit of each of skus.
func holdBody(ttl int, campaign string, skus ...string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for i, s := range skus {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"sku":%q,"quantity":1}`, s)
	}
	sb.WriteString("]")
	if ttl > 0 {
		fmt.Fprintf(&sb, `,"ttl_seconds":%d`, ttl)
	}
	if campaign != "" {
		fmt.Fprintf(&sb, `,"campaign":%q`, campaign)
	}
	sb.WriteString("}")
	return []byte(sb.String())
}
