package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/partitions"
)

// historyReads is how many times each read of the history scenario is
// timed.
const historyReads = 5

// historyWalk bounds the walk of a day's report through its pages.
const historyWalk = 2 * time.Minute

// history times the reads that reach into the ledger's past, on a history
// a run with -keep or make bench-year left (-reuse), one client at a time:
// the event feed (GET /v1/events) and a SKU's ledger (GET
// /v1/skus/{sku}/ledger) from a cursor in the oldest month not archived,
// against the same from the current month; the daily report
// (GET /v1/reports/daily) of a day in the middle of the history, its first
// page and every page; and, once a month is archived, the feed from a
// cursor before the archive (410). It prints the disk each of the ledger's
// partitions takes.
func (b *bench) history(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	parts, err := partitions.New(b.pool, slog.New(slog.DiscardHandler)).List(ctx)
	if err != nil {
		return nil, err
	}
	archived := map[string]bool{}
	rows, err := b.pool.Query(ctx, `SELECT partition FROM ledger_archives`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		archived[n] = true
	}

	// A row of each partition with rows, not archived: its id, feed
	// position and SKU.
	type sample struct {
		part    partitions.Partition
		id      int64
		feedXid string
		sku     string
	}
	var live []sample
	for _, p := range parts {
		if archived[p.Name] {
			continue
		}
		var s sample
		err := b.pool.QueryRow(ctx, fmt.Sprintf(`SELECT id, feed_xid::text, sku FROM %s WHERE feed_xid IS NOT NULL ORDER BY id LIMIT 1 OFFSET 1000`,
			pgx.Identifier{p.Name}.Sanitize())).Scan(&s.id, &s.feedXid, &s.sku)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", p.Name, err)
		}
		s.part = p
		live = append(live, s)
	}
	if len(live) < 2 {
		return nil, fmt.Errorf("the ledger has %d months with rows: the history scenario wants a history (make bench-year, then -reuse)", len(live))
	}
	old, recent, middle := live[0], live[len(live)-1], live[len(live)/2]

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	read := func(path string, status int) (time.Duration, answer, error) {
		began := time.Now()
		a, err := b.call("GET", path, b.ops, "", nil, status)
		if err != nil && a.status == 0 {
			// A keep-alive connection the server closed: again, on a new one.
			began = time.Now()
			a, err = b.call("GET", path, b.ops, "", nil, status)
		}
		return time.Since(began), a, err
	}
	timed := func(path string, status int) (median, worst time.Duration, err error) {
		var took []time.Duration
		for range historyReads {
			d, _, err := read(path, status)
			if err != nil {
				return 0, 0, fmt.Errorf("GET %s: %w", path, err)
			}
			took = append(took, d)
		}
		slices.Sort(took)
		return took[len(took)/2], took[len(took)-1], nil
	}
	r := &result{Scenario: "history", Clients: 1}
	var notes []string
	measure := func(name, what, path string, status int) error {
		med, worst, err := timed(path, status)
		if err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("%s %.1f ms (max %.1f)", what, ms(med), ms(worst)))
		r.figure(name+"_ms", ms(med))
		fmt.Fprintf(b.log, "  %s: GET %s: %.1f ms, the slowest of %d %.1f ms\n", what, path, ms(med), historyReads, ms(worst))
		return nil
	}
	for _, m := range []struct {
		name, what, path string
	}{
		{"events_old", "events from a cursor in " + old.part.Name, fmt.Sprintf("/v1/events?limit=1000&cursor=%s-%d-0", old.feedXid, old.id)},
		{"events_recent", "events from a cursor in " + recent.part.Name, fmt.Sprintf("/v1/events?limit=1000&cursor=%s-%d-0", recent.feedXid, recent.id)},
		{"ledger_old", "a SKU's ledger from a cursor in " + old.part.Name, fmt.Sprintf("/v1/skus/%s/ledger?limit=100&cursor=%d", old.sku, old.id+1)},
		{"ledger_recent", "a SKU's ledger, newest first", fmt.Sprintf("/v1/skus/%s/ledger?limit=100", old.sku)},
	} {
		if err := measure(m.name, m.what, m.path, http.StatusOK); err != nil {
			return nil, err
		}
	}

	// The daily report of a day in the middle: its first page, then every
	// page of its pools.
	day := middle.part.From.AddDate(0, 0, 14).Format("2006-01-02")
	if err := measure("report_page", "the daily report of "+day+", first page", "/v1/reports/daily?limit=100&date="+day, http.StatusOK); err != nil {
		return nil, err
	}
	began, pages, pools, cursor := time.Now(), 0, 0, ""
	for time.Since(began) < historyWalk {
		var body struct {
			Pools      []struct{} `json:"pools"`
			NextCursor *string    `json:"next_cursor"`
		}
		path := "/v1/reports/daily?limit=1000&date=" + day
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		_, a, err := read(path, http.StatusOK)
		if err == nil {
			err = a.json(&body)
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		pages++
		pools += len(body.Pools)
		if body.NextCursor == nil {
			cursor = ""
			break
		}
		cursor = *body.NextCursor
	}
	walk := time.Since(began)
	line := fmt.Sprintf("the whole report of %s, %d pools in %d pages of 1,000, %.1f s", day, pools, pages, walk.Seconds())
	if cursor != "" {
		line = fmt.Sprintf("the report of %s: %d pools in %d pages of 1,000 in %.1f s, stopped there", day, pools, pages, walk.Seconds())
	}
	notes = append(notes, line)
	fmt.Fprintf(b.log, "  %s\n", line)
	r.figure("report_walk_s", walk.Seconds())

	// A cursor before an archive's end.
	var feedXid string
	var maxID int64
	err = b.pool.QueryRow(ctx, `SELECT feed_xid::text, max_id FROM ledger_archives WHERE rows > 0 ORDER BY to_at DESC LIMIT 1`).Scan(&feedXid, &maxID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		if err := measure("events_archived", "events from a cursor in an archived month (410)",
			fmt.Sprintf("/v1/events?limit=1000&cursor=%s-%d-0", feedXid, maxID), http.StatusGone); err != nil {
			return nil, err
		}
	}

	disk, err := b.ledgerDisk(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(b.log, disk)
	r.Note = strings.Join(notes, "; ")
	return []*result{r}, nil
}

// ledgerDisk is a table of the disk each of the ledger's partitions, and
// the tables beside it, take (pg_total_relation_size; rows as ANALYZE last
// counted them).
func (b *bench) ledgerDisk(ctx context.Context) (string, error) {
	rows, err := b.pool.Query(ctx, `
		SELECT c.relname, c.reltuples::bigint, pg_relation_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid)
		FROM pg_class c
		WHERE c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'ledger'::regclass)
		   OR c.relname IN ('stock', 'reservations', 'reservation_lines', 'ledger_checkpoints')
		ORDER BY c.relname LIKE 'ledger\_%' DESC, c.relname`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var sb strings.Builder
	fmt.Fprintf(&sb, "  %-24s %12s %10s %10s %10s %8s\n", "table", "rows", "heap MB", "index MB", "total MB", "B/row")
	var ledgerRows, ledgerBytes int64
	for rows.Next() {
		var name string
		var n, heap, index, total int64
		if err := rows.Scan(&name, &n, &heap, &index, &total); err != nil {
			return "", err
		}
		per := "-"
		if n > 0 {
			per = fmt.Sprintf("%d", total/n)
		}
		if strings.HasPrefix(name, "ledger_") && name != "ledger_checkpoints" {
			ledgerRows += max(n, 0)
			ledgerBytes += total
		}
		fmt.Fprintf(&sb, "  %-24s %12d %10d %10d %10d %8s\n", name, max(n, 0), heap>>20, index>>20, total>>20, per)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	fmt.Fprintf(&sb, "  the ledger: %d rows, %d MB\n", ledgerRows, ledgerBytes>>20)
	return sb.String(), nil
}
