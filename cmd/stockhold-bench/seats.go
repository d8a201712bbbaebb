package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// A venue of the seats scenario: rows of seatsPerRow seats, "R001-1",
// "R001-2", ...
const (
	seatsPerRow = 100
	// minRows is the smallest venue, in rows.
	minRows = 5
	// seatsSold: one hold made in seatsSold is confirmed, the others are
	// released, so the venue stays mostly free and its size is what
	// differs between two venues.
	seatsSold = 100
	// unitsPerRequest is the most units one request may add.
	unitsPerRequest = 10_000
)

// parseSeats reads -seats: venue sizes, comma-separated, each a multiple
// of a row.
func parseSeats(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(strings.ReplaceAll(f, "_", "")); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < minRows*seatsPerRow || n%seatsPerRow != 0 || n > 1_000_000 {
			return nil, fmt.Errorf("-seats %q: want venue sizes from %d to 1,000,000 seats, in whole rows of %d", f, minRows*seatsPerRow, seatsPerRow)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-seats: name at least one venue size")
	}
	return out, nil
}

// venue is the shape of a venue of size seats.
type venue struct{ size, rows int }

func newVenue(size int) venue { return venue{size: size, rows: size / seatsPerRow} }

// seatAsk is one request of the seats scenario: named seats, or a number
// of seats together.
type seatAsk struct {
	named    []string
	together int
}

// ask draws a request: one in five asks for 2-4 seats together, the
// others name 1-4 seats of one row anywhere in the venue (so that what is
// measured is what a hold costs, not how often buyers want the same
// seats: TestNamedSeatsRace and the torture test race for them).
func (v venue) ask(r *rand.Rand) seatAsk {
	n := 1 + r.IntN(4)
	if r.IntN(5) == 0 {
		return seatAsk{together: max(n, 2)}
	}
	row := r.IntN(v.rows)
	var ids []string
	for _, p := range r.Perm(seatsPerRow)[:n] {
		ids = append(ids, seatID(row, p))
	}
	return seatAsk{named: ids}
}

func seatID(row, pos int) string { return fmt.Sprintf("R%03d-%d", row+1, pos+1) }

func (v venue) ids() []string {
	out := make([]string, 0, v.size)
	for row := range v.rows {
		for p := range seatsPerRow {
			out = append(out, seatID(row, p))
		}
	}
	return out
}

// seats: an on-sale rush on venues of each size -seats names (2,000 and
// 50,000 by default), each beside the plain table a developer would write
// by hand for the same venue, and quantity holds on one hot SKU measured
// in the same run for scale. Each client asks for 1-4 named seats of a
// row, or for 2-4 seats together; a hold made is released (one in
// seatsSold confirmed) off the clock by as many other workers as there
// are clients (fewer made releases what limits the holds made), so seats
// keep coming back and the venue stays mostly free: what differs between
// two venues is their size. At the end no seat may have been sold twice.
func (b *bench) seats(ctx context.Context) ([]*result, error) {
	hot, err := b.hotReference(ctx, false)
	if err != nil {
		return nil, err
	}
	out := []*result{hot}
	var rushes []*result
	for _, n := range b.o.seats {
		r, err := b.seatRush(ctx, n)
		if err != nil {
			return nil, err
		}
		rushes = append(rushes, r)
		out = append(out, r)
	}
	var sum []string
	for _, r := range rushes {
		sum = append(sum, fmt.Sprintf("%s: %.0f holds/s, %.2fx hot quantity holds (goal 0.3x), %.2fx the plain table (goal 1x), p99 %.1f ms (goal 100 ms)",
			r.Scenario, r.Rate, r.Rate/hot.Rate, r.Ratio, r.P99))
	}
	if first, last := rushes[0], rushes[len(rushes)-1]; first != last {
		sum = append(sum, fmt.Sprintf("%s over %s: %.2fx (goal 0.8x)", last.Scenario, first.Scenario, last.Rate/first.Rate))
	}
	hot.Note = "the reference for the seats rows (single-unit holds on one SKU, none released): " + strings.Join(sum, "; ")
	return out, nil
}

// seatRush is the seats scenario on one venue of n seats, then its
// plain-table baseline.
func (b *bench) seatRush(ctx context.Context, n int) (*result, error) {
	v := newVenue(n)
	sku := fmt.Sprintf("seats-%d-%s", n, b.run)
	if err := b.venue(sku, v); err != nil {
		return nil, err
	}
	// A venue goes on sale some time after it is loaded, by when
	// autovacuum has analyzed the new units (within a minute of a load):
	// the planner then knows the table's size, as it would.
	if _, err := b.pool.Exec(ctx, "ANALYZE units"); err != nil {
		return nil, err
	}
	releases := make(chan string, 4096)
	var rel sync.WaitGroup
	var relErrs atomic.Int64
	for range b.o.clients {
		rel.Go(func() {
			for path := range releases {
				if _, err := b.call("POST", path, b.shop, "", nil, http.StatusOK, http.StatusConflict); err != nil {
					relErrs.Add(1)
				}
			}
		})
	}
	var held, refused atomic.Int64
	r := &result{Scenario: fmt.Sprintf("seats %d", n), Clients: b.o.clients}
	t := &tally{}
	el := b.closedLoop(ctx, r.Scenario, b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		ask := v.ask(rand.New(rand.NewPCG(uint64(w), uint64(i))))
		item := map[string]any{"sku": sku}
		if ask.together > 0 {
			item["quantity"], item["adjacent"] = ask.together, true
		} else {
			item["units"] = ask.named
		}
		body, _ := json.Marshal(map[string]any{"items": []any{item}})
		a, err := b.call("POST", "/v1/reservations", b.shop, fmt.Sprintf("%s-%d-%d", sku, w, i), body,
			http.StatusCreated, http.StatusConflict)
		if err != nil {
			return false, err
		}
		if a.status == http.StatusConflict {
			if !strings.Contains(string(a.body), `"unit_unavailable"`) && !strings.Contains(string(a.body), `"out_of_stock"`) {
				return false, fmt.Errorf("HTTP 409: %s", a.body)
			}
			refused.Add(1)
			return false, nil
		}
		held.Add(1)
		var h struct {
			ID string `json:"id"`
		}
		if err := a.json(&h); err != nil {
			return false, err
		}
		if i%seatsSold == 0 {
			releases <- "/v1/reservations/" + h.ID + "/confirm"
		} else {
			releases <- "/v1/reservations/" + h.ID + "/release"
		}
		return true, nil
	})
	close(releases)
	rel.Wait()
	t.fill(r, el)
	r.RSS = b.rss.reset()

	base, err := b.plainSeats(ctx, v)
	if err != nil {
		return nil, err
	}
	r.Baseline, r.BaselineP99 = base.Rate, base.P99
	r.Ratio = r.Rate / base.Rate

	check, err := db.New(b.pool).UnitsSoldTwice(ctx, sku)
	if err != nil {
		return nil, err
	}
	verdict := "none"
	if check.SoldTwice > 0 {
		verdict = fmt.Sprintf("%d: BROKEN", check.SoldTwice)
	}
	r.Note = fmt.Sprintf("holds/s counts holds made; %d made, %d refused (seats taken): %.0f answers/s; %d confirm/release errors; %d seats sold, seats sold twice: %s; the plain table made %d, refused %d: %.0f answers/s",
		held.Load(), refused.Load(), float64(held.Load()+refused.Load())/el.Seconds(), relErrs.Load(), check.Sold, verdict,
		base.Holds, base.refused, float64(base.Holds+base.refused)/base.Seconds)
	if check.SoldTwice > 0 {
		return r, fmt.Errorf("seats: %d seats sold twice", check.SoldTwice)
	}
	return r, nil
}

// venue puts v's seats into sku's main pool, up to unitsPerRequest a
// request.
func (b *bench) venue(sku string, v venue) error {
	ids := v.ids()
	for from := 0; from < len(ids); from += unitsPerRequest {
		units := make([]map[string]any, 0, unitsPerRequest)
		for i, id := range ids[from:min(from+unitsPerRequest, len(ids))] {
			n := from + i
			units = append(units, map[string]any{"id": id, "group": fmt.Sprintf("R%03d", n/seatsPerRow+1), "position": n%seatsPerRow + 1})
		}
		body, _ := json.Marshal(map[string]any{"reason": "benchmark venue", "units": units})
		if _, err := b.call("POST", "/v1/skus/"+sku+"/units", b.ops, fmt.Sprintf("venue-%s-%d", sku, from), body, http.StatusOK); err != nil {
			return fmt.Errorf("venue %s: %w", sku, err)
		}
	}
	return nil
}

type bareResult struct {
	result
	refused int64
}

// plainSeats is the seats scenario's baseline: the table a developer would
// write by hand (a seat and who holds it, no counters, no ledger), the
// same requests each one transaction of `UPDATE seats SET holder = $1
// WHERE id = ANY($2) AND holder IS NULL` (rolled back when it took fewer
// seats than asked), and the same releases off the clock. A request for
// seats together names consecutive seats of a random row: a plain table
// has no search.
func (b *bench) plainSeats(ctx context.Context, v venue) (*bareResult, error) {
	table := pgx.Identifier{fmt.Sprintf("plain_seats_%d", v.size)}.Sanitize()
	if _, err := b.pool.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
		return nil, err
	}
	if _, err := b.pool.Exec(ctx, "CREATE TABLE "+table+" (id text PRIMARY KEY, holder uuid)"); err != nil {
		return nil, err
	}
	if _, err := b.pool.Exec(ctx, "INSERT INTO "+table+" (id) SELECT unnest($1::text[])", v.ids()); err != nil {
		return nil, err
	}
	if _, err := b.pool.Exec(ctx, "VACUUM (ANALYZE) "+table); err != nil {
		return nil, err
	}
	hold := "UPDATE " + table + " SET holder = $1 WHERE id = ANY($2) AND holder IS NULL"
	release := "UPDATE " + table + " SET holder = NULL WHERE id = ANY($2) AND holder = $1"

	type made struct {
		id  uuid.UUID
		ids []string
	}
	releases := make(chan made, 4096)
	var rel sync.WaitGroup
	for range b.o.clients {
		rel.Go(func() {
			for m := range releases {
				_, _ = b.pool.Exec(ctx, release, m.id, m.ids)
			}
		})
	}
	var refused atomic.Int64
	t := &tally{}
	el := b.closedLoop(ctx, fmt.Sprintf("seats %d (plain table)", v.size), b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		rng := rand.New(rand.NewPCG(uint64(w), uint64(i)))
		ask := v.ask(rng)
		ids := ask.named
		if ask.together > 0 {
			row, start := rng.IntN(v.rows), rng.IntN(seatsPerRow-ask.together+1)
			for p := start; p < start+ask.together; p++ {
				ids = append(ids, seatID(row, p))
			}
		}
		id := uuid.New()
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, hold, id, ids)
			if err == nil && tag.RowsAffected() < int64(len(ids)) {
				err = errSeatsTaken
			}
			return err
		})
		switch {
		case errors.Is(err, errSeatsTaken):
			refused.Add(1)
			return false, nil
		case err != nil:
			return false, err
		}
		if i%seatsSold != 0 {
			releases <- made{id, ids}
		}
		return true, nil
	})
	close(releases)
	rel.Wait()
	out := &bareResult{refused: refused.Load()}
	t.fill(&out.result, el)
	if out.Errors > 0 {
		return nil, fmt.Errorf("plain table: %d errors, first: %s", out.Errors, out.Note)
	}
	return out, nil
}

var errSeatsTaken = errors.New("seats taken")
