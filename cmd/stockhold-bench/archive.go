package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/partitions"
)

// The archive scenario: holds' latency while a month of the ledger is
// archived under them. It fills the ledger's current month: -archive-rows
// rows written in SQL (holds over spread's SKUs made and released, by
// pairs of rows that sum to nothing, so every stock row's books still
// close), then real holds each confirmed for the run's duration; it ends
// that month now (partitions.CutNow, as the turn of a month would), then
// measures spread's single-unit holds for the run's duration (before),
// and again from the archive's start to its end (during), and prints both
// p99s and their ratio.
func (b *bench) archive(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	if err := b.archiveHistory(ctx); err != nil {
		return nil, err
	}
	body := b.spreadBody(0)
	fill := &result{Scenario: "archive-fill", Clients: b.o.clients}
	ft := &tally{}
	el := b.closedLoop(ctx, "archive-fill", b.o.clients, b.o.duration, ft, func(w, i int) (bool, error) {
		a, err := b.call("POST", "/v1/reservations", b.shop, fmt.Sprintf("af-%s-%d-%d", b.run, w, i), body(), http.StatusCreated)
		if err != nil {
			return false, err
		}
		var h struct {
			ID uuid.UUID `json:"id"`
		}
		if err := a.json(&h); err != nil {
			return false, err
		}
		_, err = b.call("POST", "/v1/reservations/"+h.ID.String()+"/confirm", b.shop, "", nil, http.StatusOK)
		return err == nil, err
	})
	ft.fill(fill, el)
	parts := partitions.New(b.pool, slog.New(slog.DiscardHandler))
	var cut time.Time
	for {
		var err error
		if cut, err = parts.CutNow(ctx, time.Second); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fmt.Fprintf(b.log, "  cut the month: %v; again\n", err)
	}

	before := &result{Scenario: "archive-before", Clients: b.o.clients}
	bt := &tally{}
	el = b.closedLoop(ctx, "archive-before", b.o.clients, b.o.duration, bt, func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("ab-%s-%d-%d", b.run, w, i), body())
	})
	bt.fill(before, el)

	dir, err := os.MkdirTemp("", "stockhold-bench-archive-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// During: the holds run from the archive's start until it ends.
	until, ended := context.WithCancel(ctx)
	defer ended()
	var (
		got  []partitions.Archived
		took time.Duration
		aErr error
	)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer ended()
		began := time.Now()
		got, aErr = parts.Archive(ctx, cut, dir, "bench")
		took = time.Since(began)
	}()
	during := &result{Scenario: "archive", Clients: b.o.clients}
	dt := &tally{}
	el = b.closedLoop(until, "archive", b.o.clients, time.Hour, dt, func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("ad-%s-%d-%d", b.run, w, i), body())
	})
	<-finished
	dt.fill(during, el)
	during.RSS = b.rss.reset()
	if aErr != nil {
		return nil, fmt.Errorf("archive: %w", aErr)
	}
	var rows, kept, carried int64
	for _, a := range got {
		rows, kept, carried = rows+a.Rows, kept+a.Kept, carried+a.Carried
	}
	ratio := during.P99 / before.P99
	during.figure("p99_before_ms", before.P99)
	during.figure("p99_ratio", ratio)
	during.figure("archived_rows", float64(rows))
	during.figure("archive_seconds", took.Seconds())
	during.Note = fmt.Sprintf("archive of %d ledger rows (%d kept, %d balances carried) in %.1f s: holds' p99 %.1f ms during it (%d holds, %.0f/s), %.1f ms before (%.0f/s): %.2fx (goal at most 2x)",
		rows, kept, carried, took.Seconds(), during.P99, during.Holds, during.Rate, before.P99, before.Rate, ratio)
	fill.Note = strings.TrimSuffix(fmt.Sprintf("the month archived: %.0f holds/s, each confirmed, for %.0f s; %s", fill.Rate, fill.Seconds, fill.Note), "; ")
	fmt.Fprintf(b.log, "  %s\n", during.Note)
	return []*result{fill, before, during}, nil
}

// archiveHistory writes -archive-rows ledger rows into the current month:
// holds of one unit over spread's SKUs, each a reserve row and a release
// row (no event; the stock row's version as it is), in transactions of
// 100,000 rows.
func (b *bench) archiveHistory(ctx context.Context) error {
	began := time.Now()
	n := min(b.o.catalogue, httpCatalogue)
	for done := 0; done < b.o.archiveRows; done += 100_000 {
		pairs := min(100_000, b.o.archiveRows-done) / 2
		if _, err := b.pool.Exec(ctx, `
			INSERT INTO ledger (sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
			                    stock_version, actor, reason, reservation_id)
			SELECT s.sku, s.location, s.pool, k.kind, 0, k.d * -1, k.d, 0, s.version, 'bench', 'archive history', h.id
			FROM (SELECT gen_random_uuid() AS id, 'sp-' || lpad((i % $2)::text, 8, '0') AS sku FROM generate_series(1, $1) i) h
			JOIN stock s ON s.sku = h.sku AND s.location = 'default' AND s.pool = 'main'
			CROSS JOIN (VALUES ('reserve', 1), ('release', -1)) k(kind, d)
			ORDER BY h.id, k.d DESC`, pairs, n); err != nil {
			return fmt.Errorf("write the archive's history: %w", err)
		}
	}
	fmt.Fprintf(b.log, "  %d ledger rows written for the archive in %.0f s\n", b.o.archiveRows, time.Since(began).Seconds())
	return nil
}
