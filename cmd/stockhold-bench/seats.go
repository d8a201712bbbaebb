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
	"github.com/jackc/pgx/v5/pgxpool"

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

// seatMap is a venue as its buyers see it: the seats one side of the
// scenario (the service, or its plain table) holds for them or has sold.
// A seat is shown taken once its hold is answered, and free again once
// its release is: what a buyer picks can only have been taken by a
// request still in flight.
type seatMap []atomic.Bool

func (m seatMap) mark(ids []string, taken bool) {
	for _, id := range ids {
		if n, ok := seatIndex(id); ok && n < len(m) {
			m[n].Store(taken)
		}
	}
}

// seatPicks is how many rows a buyer looks at for free seats before
// asking for seats the map shows taken.
const seatPicks = 4

// ask draws a request: one in five asks for 2-4 seats together, the
// others name 1-4 seats of one row anywhere in the venue that the map
// shows free (so that what is measured is what a hold costs, not how
// often buyers want the same seats: TestNamedSeatsRace and the torture
// test race for them).
func (v venue) ask(r *rand.Rand, m seatMap) seatAsk {
	n := 1 + r.IntN(4)
	if r.IntN(5) == 0 {
		return seatAsk{together: max(n, 2)}
	}
	var ids []string
	for look := range seatPicks {
		row := r.IntN(v.rows)
		ids = ids[:0]
		for _, p := range r.Perm(seatsPerRow) {
			if len(ids) == n {
				break
			}
			if look == seatPicks-1 || !m[row*seatsPerRow+p].Load() {
				ids = append(ids, seatID(row, p))
			}
		}
		if len(ids) == n {
			break
		}
	}
	return seatAsk{named: ids}
}

// together is n seats side by side in a row that the map shows free (a
// plain table's buyer picks them: it has no search).
func (v venue) together(r *rand.Rand, m seatMap, n int) []string {
	var ids []string
	for look := range seatPicks {
		row, start := r.IntN(v.rows), r.IntN(seatsPerRow-n+1)
		ids = ids[:0]
		for at := start; at < start+n; at++ {
			if look < seatPicks-1 && m[row*seatsPerRow+at].Load() {
				break
			}
			ids = append(ids, seatID(row, at))
		}
		if len(ids) == n {
			break
		}
	}
	return ids
}

func seatID(row, pos int) string { return fmt.Sprintf("R%03d-%d", row+1, pos+1) }

// seatIndex is the place of a seatID in the venue, from 0.
func seatIndex(id string) (int, bool) {
	row, pos, ok := strings.Cut(strings.TrimPrefix(id, "R"), "-")
	r, err1 := strconv.Atoi(row)
	p, err2 := strconv.Atoi(pos)
	if !ok || err1 != nil || err2 != nil || r < 1 || p < 1 || p > seatsPerRow {
		return 0, false
	}
	return (r-1)*seatsPerRow + p - 1, true
}

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
// by hand for the same venue, and quantity holds on one hot SKU for
// scale, all run in turns after one to warm up (alternate): every ratio
// the note gives is between figures measured over the same stretch of
// the run. Each client asks for 1-4 named seats of a row that the seat
// map shows free, or for 2-4 seats together; a hold made is released
// (one in seatsSold confirmed) off the clock by as many other workers as
// there are clients (fewer made releases what limits the holds made), so
// seats keep coming back and the venue stays mostly free: what differs
// between two venues is their size.
// A turn ends once its releases are done, on its clock. At the end no
// seat may have been sold twice.
func (b *bench) seats(ctx context.Context) ([]*result, error) {
	hotSKU := "hot-seats-" + b.run
	if err := b.stockIn(ctx, []string{hotSKU}, bigStock); err != nil {
		return nil, err
	}
	body := holdBody(0, "", hotSKU)
	hot := &leg{name: "hot (reference)", t: &tally{}, do: func(w, i int) (bool, error) {
		return b.hold(fmt.Sprintf("%s-%d-%d", hotSKU, w, i), body)
	}}
	legs := []*leg{hot}
	var rushes []*seatRush
	for _, n := range b.o.seats {
		r, err := b.newSeatRush(ctx, n)
		if err != nil {
			return nil, err
		}
		defer r.stop()
		rushes = append(rushes, r)
		legs = append(legs, r.leg, r.plain.leg)
	}
	// A venue goes on sale some time after it is loaded, by when
	// autovacuum has analyzed the new units (within a minute of a load):
	// the planner then knows the table's size, as it would.
	if _, err := b.pool.Exec(ctx, "ANALYZE units"); err != nil {
		return nil, err
	}
	b.alternate(ctx, b.o.clients, b.o.duration, legs...)
	rss := b.rss.reset()

	hr := &result{Scenario: hot.name, Clients: b.o.clients, RSS: rss}
	hot.t.fill(hr, hot.el)
	out := []*result{hr}
	var sum []string
	for _, rush := range rushes {
		r, err := rush.result(ctx)
		if err != nil {
			return nil, err
		}
		r.RSS = rss
		out = append(out, r)
		sum = append(sum, fmt.Sprintf("%s: %.0f holds/s, %.2fx hot quantity holds (goal 0.3x), %.2fx the plain table (goal 1x), p99 %.1f ms (goal 100 ms)",
			r.Scenario, r.Rate, r.Rate/hr.Rate, r.Ratio, r.P99))
	}
	if first, last := out[1], out[len(out)-1]; first != last {
		sum = append(sum, fmt.Sprintf("%s over %s: %.2fx (goal 0.8x)", last.Scenario, first.Scenario, last.Rate/first.Rate))
	}
	hr.Note = fmt.Sprintf("the reference for the seats rows (single-unit holds on one SKU, none released), in %d turns with them after one to warm up: ", b.o.turns) + strings.Join(sum, "; ")
	return out, nil
}

// seatRush is the seats scenario on one venue: its leg, and its
// plain-table baseline's.
type seatRush struct {
	b     *bench
	v     venue
	sku   string
	leg   *leg
	plain *plainSeats
	seats seatMap
	// releases are the holds to release (or confirm); queued counts
	// those not done yet.
	releases chan seatHold
	queued   sync.WaitGroup
	workers  sync.WaitGroup
	relErrs  atomic.Int64
}

// newSeatRush loads a venue of n seats and its plain table, and starts
// the workers that release its holds.
func (b *bench) newSeatRush(ctx context.Context, n int) (*seatRush, error) {
	r := &seatRush{b: b, v: newVenue(n), sku: fmt.Sprintf("seats-%d-%s", n, b.run), seats: make(seatMap, n),
		releases: make(chan seatHold, 4096)}
	if err := b.venue(r.sku, r.v); err != nil {
		return nil, err
	}
	plain, err := b.newPlainSeats(ctx, r.v)
	if err != nil {
		return nil, err
	}
	r.plain = plain
	for range b.o.clients {
		r.workers.Go(func() {
			for h := range r.releases {
				if _, err := b.call("POST", h.path, b.shop, "", nil, http.StatusOK, http.StatusConflict); err != nil {
					r.relErrs.Add(1)
				} else if !h.sold {
					r.seats.mark(h.seats, false)
				}
				r.queued.Done()
			}
		})
	}
	r.leg = &leg{name: fmt.Sprintf("seats %d", n), t: &tally{}, do: r.ask, settle: r.queued.Wait}
	return r, nil
}

// ask is one client's request of the rush: a hold made, or refused (seats
// taken).
func (r *seatRush) ask(w, i int) (bool, error) {
	ask := r.v.ask(rand.New(rand.NewPCG(uint64(w), uint64(i))), r.seats)
	item := map[string]any{"sku": r.sku}
	if ask.together > 0 {
		item["quantity"], item["adjacent"] = ask.together, true
	} else {
		item["units"] = ask.named
	}
	body, _ := json.Marshal(map[string]any{"items": []any{item}})
	a, err := r.b.call("POST", "/v1/reservations", r.b.shop, fmt.Sprintf("%s-%d-%d", r.sku, w, i), body,
		http.StatusCreated, http.StatusConflict)
	if err != nil {
		return false, err
	}
	if a.status == http.StatusConflict {
		if !strings.Contains(string(a.body), `"unit_unavailable"`) && !strings.Contains(string(a.body), `"out_of_stock"`) {
			return false, fmt.Errorf("HTTP 409: %s", a.body)
		}
		return false, nil
	}
	var h struct {
		ID    string `json:"id"`
		Items []struct {
			Units []string `json:"units"`
		} `json:"items"`
	}
	if err := a.json(&h); err != nil {
		return false, err
	}
	held := seatHold{path: "/v1/reservations/" + h.ID + "/release", sold: i%seatsSold == 0}
	if held.sold {
		held.path = "/v1/reservations/" + h.ID + "/confirm"
	}
	for _, it := range h.Items {
		held.seats = append(held.seats, it.Units...)
	}
	r.seats.mark(held.seats, true)
	r.queued.Add(1)
	r.releases <- held
	return true, nil
}

// seatHold is a hold made to release, or to confirm (sold): its path,
// and the seats it took.
type seatHold struct {
	path  string
	seats []string
	sold  bool
}

// stop stops the rush's release workers and its plain table's.
func (r *seatRush) stop() {
	close(r.releases)
	r.workers.Wait()
	r.plain.stop()
}

// result is the rush's row: its figures over every turn, against its
// plain table's, and whether any seat was sold twice. Every request that
// was neither a hold made nor an error was refused (seats taken), on
// either side.
func (r *seatRush) result(ctx context.Context) (*result, error) {
	out := &result{Scenario: r.leg.name, Clients: r.b.o.clients}
	r.leg.t.fill(out, r.leg.el)
	refused := r.leg.t.answers() - out.Holds
	base := &result{}
	r.plain.leg.t.fill(base, r.plain.leg.el)
	baseRefused := r.plain.leg.t.answers() - base.Holds
	if base.Errors > 0 {
		return nil, fmt.Errorf("%s: %d errors, first: %s", r.plain.leg.name, base.Errors, base.Note)
	}
	out.Baseline, out.BaselineP99 = base.Rate, base.P99
	out.Ratio = out.Rate / base.Rate

	check, err := db.New(r.b.pool).UnitsSoldTwice(ctx, r.sku)
	if err != nil {
		return nil, err
	}
	verdict := "none"
	if check.SoldTwice > 0 {
		verdict = fmt.Sprintf("%d: BROKEN", check.SoldTwice)
	}
	out.Note = fmt.Sprintf("holds/s counts holds made; %d made, %d refused (seats taken): %.0f answers/s; %d confirm/release errors; %d seats sold, seats sold twice: %s; the plain table made %d, refused %d: %.0f answers/s; releases left at a turn's end took %.0f ms of %.1f s (the plain table's %.0f ms)",
		out.Holds, refused, float64(out.Holds+refused)/out.Seconds, r.relErrs.Load(), check.Sold, verdict,
		base.Holds, baseRefused, float64(base.Holds+baseRefused)/base.Seconds,
		float64(r.leg.settled.Microseconds())/1000, r.leg.el.Seconds(), float64(r.plain.leg.settled.Microseconds())/1000)
	if check.SoldTwice > 0 {
		return out, fmt.Errorf("seats: %d seats sold twice", check.SoldTwice)
	}
	return out, nil
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

// plainSeats is the seats scenario's baseline: the table a developer would
// write by hand (a seat and who holds it, no counters, no ledger), the
// same requests each one transaction of `UPDATE seats SET holder = $1
// WHERE id = ANY($2) AND holder IS NULL` (rolled back when it took fewer
// seats than asked), and the same releases off the clock. A request for
// seats together names consecutive seats of a row that its own seat map
// shows free: a plain table has no search.
type plainSeats struct {
	v             venue
	hold, release string
	leg           *leg
	seats         seatMap
	releases      chan plainHold
	queued        sync.WaitGroup
	workers       sync.WaitGroup
}

type plainHold struct {
	id  uuid.UUID
	ids []string
}

// newPlainSeats makes v's plain table and starts the workers that release
// its holds.
func (b *bench) newPlainSeats(ctx context.Context, v venue) (*plainSeats, error) {
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
	p := &plainSeats{
		v:        v,
		hold:     "UPDATE " + table + " SET holder = $1 WHERE id = ANY($2) AND holder IS NULL",
		release:  "UPDATE " + table + " SET holder = NULL WHERE id = ANY($2) AND holder = $1",
		seats:    make(seatMap, v.size),
		releases: make(chan plainHold, 4096),
	}
	for range b.o.clients {
		p.workers.Go(func() {
			for m := range p.releases {
				if _, err := b.pool.Exec(ctx, p.release, m.id, m.ids); err == nil {
					p.seats.mark(m.ids, false)
				}
				p.queued.Done()
			}
		})
	}
	p.leg = &leg{name: fmt.Sprintf("seats %d (plain table)", v.size), t: &tally{}, settle: p.queued.Wait,
		do: func(w, i int) (bool, error) { return p.ask(ctx, b.pool, w, i) }}
	return p, nil
}

// ask is one client's request, in one transaction.
func (p *plainSeats) ask(ctx context.Context, pool *pgxpool.Pool, w, i int) (bool, error) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(i)))
	ask := p.v.ask(rng, p.seats)
	ids := ask.named
	if ask.together > 0 {
		ids = p.v.together(rng, p.seats, ask.together)
	}
	id := uuid.New()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, p.hold, id, ids)
		if err == nil && tag.RowsAffected() < int64(len(ids)) {
			err = errSeatsTaken
		}
		return err
	})
	switch {
	case errors.Is(err, errSeatsTaken):
		return false, nil
	case err != nil:
		return false, err
	}
	p.seats.mark(ids, true)
	if i%seatsSold != 0 {
		p.queued.Add(1)
		p.releases <- plainHold{id, ids}
	}
	return true, nil
}

func (p *plainSeats) stop() {
	close(p.releases)
	p.workers.Wait()
}

var errSeatsTaken = errors.New("seats taken")
