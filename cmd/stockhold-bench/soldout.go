package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
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
// measured over as long a quiet window just before.
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
	ask := func(key string) (bool, error) {
		a, err := b.call("POST", "/v1/reservations", b.shop, key, body, http.StatusCreated, http.StatusConflict)
		switch {
		case err != nil:
			return false, err
		case a.status == http.StatusCreated:
			return true, nil
		case !strings.Contains(string(a.body), `"out_of_stock"`):
			return false, fmt.Errorf("HTTP 409: %s", a.body)
		}
		return false, nil
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
	// Each refusal counts as made.
	el, err := b.rawLoop(ctx, "soldout (refusals)", b.o.clients, soldoutHammer, t, "POST", "/v1/reservations", b.shop, sku, body,
		func(a answer) (bool, error) {
			switch {
			case a.status == http.StatusCreated:
				return false, fmt.Errorf("a hold was made on a sold-out SKU")
			case a.status != http.StatusConflict || !bytes.Contains(a.body, []byte(`"out_of_stock"`)):
				return false, fmt.Errorf("HTTP %d: %s", a.status, bytes.TrimSpace(a.body))
			}
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	t.fill(r, el)
	r.RSS = b.rss.reset()
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
	r.Note = fmt.Sprintf("rate is refusals/s (every answer 409 out_of_stock), %.2fx single-unit holds on one SKU in this run (%.0f/s; goal 5x); "+
		"PostgreSQL ran %d transactions in the %.0f s window around them, %.0f of them beyond the server's idle rate (%.1f/s): %.3f%% of the %d refusals (goal below 1%%)",
		r.Rate/hot.Rate, hot.Rate, to-from, window, spent, quiet, 100*max(spent, 0)/float64(r.Holds), r.Holds)
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
