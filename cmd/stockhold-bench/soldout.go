package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

const (
	// soldoutUnits are what the soldout scenario's SKU has before the
	// rush; soldoutHammer is how long its clients go on after they are
	// gone.
	soldoutUnits  = 100
	soldoutHammer = 10 * time.Second
	// statsSettle is how long PostgreSQL may keep a backend's counts of
	// transactions before they show in pg_stat_database: a backend that
	// goes idle reports what it did within PGSTAT_IDLE_INTERVAL, 10 s.
	statsSettle = 11 * time.Second
)

// soldout: soldoutUnits units, then 64 clients asking for one each for
// soldoutHammer after they are gone. Reports the refusals per second
// against single-unit holds on one SKU in the same run, and how many
// PostgreSQL transactions the bench database ran while they were refused
// (pg_stat_database's xact_commit + xact_rollback, read once every
// backend's counts have settled), less what the server runs when idle,
// measured over as long a quiet window just before. Its baseline is the
// floor (floor.go): the same requests sent as long to net/http alone,
// answering the same refusal, right after.
func (b *bench) soldout(ctx context.Context) ([]*result, error) {
	hot, err := b.hotReference(ctx)
	if err != nil {
		return nil, err
	}
	sku := "soldout-" + b.run
	if err := b.stockIn(ctx, []string{sku}, soldoutUnits); err != nil {
		return nil, err
	}
	body := holdBody(0, "", sku)
	// An answer of the hammer: a refusal, which counts as made.
	refused := func(a answer) (bool, error) {
		switch {
		case a.status == http.StatusCreated:
			return false, fmt.Errorf("a hold was made on a sold-out SKU")
		case a.status != http.StatusConflict || !bytes.Contains(a.body, []byte(`"out_of_stock"`)):
			return false, fmt.Errorf("HTTP %d: %s", a.status, bytes.TrimSpace(a.body))
		}
		return true, nil
	}
	ask := func(key string) (bool, error) {
		a, err := b.do("POST", "/v1/reservations", b.shop, key, body)
		if err != nil || a.status == http.StatusCreated {
			return err == nil, err
		}
		_, err = refused(a)
		return false, err
	}

	// The rush: until the last unit is gone.
	var held atomic.Int64
	rush, gone := context.WithCancel(ctx)
	b.closedLoop(rush, "soldout (rush)", b.o.clients, time.Minute, &tally{}, func(w, i int) (bool, error) {
		made, err := ask(fmt.Sprintf("%s-rush-%d-%d", sku, w, i))
		if made && held.Add(1) == soldoutUnits {
			gone()
		}
		return made, err
	})
	gone()
	if held.Load() != soldoutUnits {
		return nil, fmt.Errorf("the rush held %d of %d units", held.Load(), soldoutUnits)
	}
	// A refusal, which the floor answers with.
	a, err := b.do("POST", "/v1/reservations", b.shop, sku+"-floor", body)
	if err != nil {
		return nil, err
	}
	if _, err := refused(a); err != nil {
		return nil, err
	}

	// What the server runs when nobody asks, once the rush's counts have
	// settled.
	fmt.Fprintf(b.log, "  waiting %s for PostgreSQL's counts to settle, then %s of quiet\n", statsSettle, statsSettle)
	if err := sleep(ctx, statsSettle); err != nil {
		return nil, err
	}
	quietFrom, err := b.transactions(ctx)
	if err != nil {
		return nil, err
	}
	quietAt := time.Now()
	if err := sleep(ctx, statsSettle); err != nil {
		return nil, err
	}
	from, err := b.transactions(ctx)
	if err != nil {
		return nil, err
	}
	fromAt := time.Now()
	quiet := float64(from-quietFrom) / fromAt.Sub(quietAt).Seconds()

	r := &result{Scenario: "soldout", Clients: b.o.clients}
	t := &tally{}
	el, err := b.rawLoop(ctx, "soldout (refusals)", b.client.addr, b.o.clients, soldoutHammer, t, "POST", "/v1/reservations", b.shop, sku, body, refused)
	if err != nil {
		return nil, err
	}
	t.fill(r, el)
	r.RSS = b.rss.reset()
	// The floor, at once: the same requests answered with the same
	// refusal by net/http alone. It runs no transactions, and the idle
	// rate taken off the window covers its stretch of it.
	fl, err := b.floor(ctx, sku, body, a.body, refused)
	if err != nil {
		return nil, err
	}
	r.Baseline, r.BaselineP99, r.Ratio = fl.Rate, fl.P99, r.Rate/fl.Rate
	fmt.Fprintf(b.log, "  waiting %s for PostgreSQL's counts to settle\n", statsSettle)
	if err := sleep(ctx, statsSettle); err != nil {
		return nil, err
	}
	to, err := b.transactions(ctx)
	if err != nil {
		return nil, err
	}
	window := time.Since(fromAt).Seconds()
	spent := float64(to-from) - quiet*window
	r.figure("vs_hot", r.Rate/hot.Rate)
	r.figure("hot_rate", hot.Rate)
	r.figure("pg_share_pct", 100*max(spent, 0)/float64(r.Holds))
	r.Note = fmt.Sprintf("rate is refusals/s (every answer 409 out_of_stock), %.2fx single-unit holds on one SKU in this run (%.0f/s; goal 5x); "+
		"PostgreSQL ran %d transactions in the %.0f s window around them, %.0f of them beyond the server's idle rate (%.1f/s): %.3f%% of the %d refusals (goal at most 10%%: one shared key lookup per group of refusals waiting at once); "+
		"the baseline is the floor: net/http alone answering the same requests with the same refusal, right after, %.0f/s (%.2fx the holds; %.1f µs of its CPU a refusal against the server's %.1f µs)",
		r.Rate/hot.Rate, hot.Rate, to-from, window, spent, quiet, 100*max(spent, 0)/float64(r.Holds), r.Holds,
		fl.Rate, fl.Rate/hot.Rate, fl.ServerCPU, r.ServerCPU)
	return []*result{r}, nil
}

// transactions is the bench database's transactions so far, as
// pg_stat_database counts them.
func (b *bench) transactions(ctx context.Context) (int64, error) {
	var n int64
	err := b.pool.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
