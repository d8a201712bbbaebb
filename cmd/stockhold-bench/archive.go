package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
// p99s and their ratio, and how often a backend waited for a lock during
// it. With -archive-before it writes and cuts nothing: it archives the
// months before that one (YYYY-MM; oldest: the oldest month not archived)
// as they are (a history make bench-year made),
// measuring holds over the whole catalogue the same way; -archive-dir
// keeps the files, for stockhold ledger restore.
func (b *bench) archive(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	parts := partitions.New(b.pool, slog.New(slog.DiscardHandler))
	var (
		cut  time.Time
		fill *result
	)
	switch b.o.archiveBefore {
	case "oldest":
		var err error
		if cut, err = b.oldestMonthEnd(ctx, parts); err != nil {
			return nil, err
		}
	case "":
		var err error
		if fill, cut, err = b.archiveMonth(ctx, parts); err != nil {
			return nil, err
		}
	default:
		var err error
		if cut, err = time.Parse("2006-01", b.o.archiveBefore); err != nil {
			return nil, fmt.Errorf("-archive-before %q: want a month, YYYY-MM, or oldest", b.o.archiveBefore)
		}
	}
	body := b.spreadBody(0)

	before := &result{Scenario: "archive-before", Clients: b.o.clients}
	bt := &tally{}
	el := b.closedLoop(ctx, "archive-before", b.o.clients, b.o.duration, bt, func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("ab-%s-%d-%d", b.run, w, i), body())
	})
	bt.fill(before, el)

	dir := b.o.archiveDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "stockhold-bench-archive-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	// During: the holds run from the archive's start until it ends.
	until, ended := context.WithCancel(ctx)
	defer ended()
	var (
		got  []partitions.Archived
		took time.Duration
		aErr error
	)
	finished := make(chan struct{})
	var locks lockWaits
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		b.sampleLockWaits(until, &locks)
	}()
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
	<-sampled
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
	during.figure("lock_wait_samples", float64(locks.waited))
	during.Note = fmt.Sprintf("archive of %d ledger rows (%d kept, %d balances carried) in %.1f s: holds' p99 %.1f ms during it (%d holds, %.0f/s), %.1f ms before (%.0f/s): %.2fx (goal at most 2x); a backend waited for a lock in %d of %d samples (every 20 ms), at most %d at once",
		rows, kept, carried, took.Seconds(), during.P99, during.Holds, during.Rate, before.P99, before.Rate, ratio, locks.waited, locks.samples, locks.most)
	fmt.Fprintf(b.log, "  %s\n", during.Note)
	if fill == nil {
		return []*result{before, during}, nil
	}
	return []*result{fill, before, during}, nil
}

// oldestMonthEnd is the end of the ledger's oldest partition with rows
// that is not archived.
func (b *bench) oldestMonthEnd(ctx context.Context, parts *partitions.Service) (time.Time, error) {
	list, err := parts.List(ctx)
	if err != nil {
		return time.Time{}, err
	}
	for _, p := range list {
		var rows bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_archives WHERE partition = $1)`, p.Name).Scan(&rows); err != nil {
			return time.Time{}, err
		}
		if rows {
			continue
		}
		if err := b.pool.QueryRow(ctx, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s)`, pgx.Identifier{p.Name}.Sanitize())).Scan(&rows); err != nil {
			return time.Time{}, err
		}
		if rows {
			return p.To, nil
		}
	}
	return time.Time{}, errors.New("-archive-before oldest: the ledger has no month with rows left to archive")
}

// archiveMonth fills the ledger's current month (-archive-rows rows in
// SQL, then the run's duration of real holds, each confirmed) and ends it
// now; it returns the fill's result and the cut.
func (b *bench) archiveMonth(ctx context.Context, parts *partitions.Service) (*result, time.Time, error) {
	if err := b.archiveHistory(ctx); err != nil {
		return nil, time.Time{}, err
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
	fill.Note = strings.TrimSuffix(fmt.Sprintf("the month archived: %.0f holds/s, each confirmed, for %.0f s; %s", fill.Rate, fill.Seconds, fill.Note), "; ")
	for {
		cut, err := parts.CutNow(ctx, time.Second)
		if err == nil {
			return fill, cut, nil
		}
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		fmt.Fprintf(b.log, "  cut the month: %v; again\n", err)
	}
}

// lockWaits samples, every 20 ms until ctx ends, how many of the bench
// database's backends wait for a lock (pg_stat_activity).
type lockWaits struct {
	samples, waited, most int
}

func (b *bench) sampleLockWaits(ctx context.Context, into *lockWaits) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			continue
		}
		into.samples++
		if n > 0 {
			into.waited++
		}
		into.most = max(into.most, n)
	}
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
