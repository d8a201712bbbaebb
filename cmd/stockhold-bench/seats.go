package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// The seats scenario's venue: rows of seats, "R001-1" ... "R100-100".
const (
	seatRows    = 100
	seatsPerRow = 100
	frontRows   = 5
)

// seatAsk is one request of the seats scenario: named seats, or a number
// of seats together.
type seatAsk struct {
	named    []string
	together int
}

// askSeats draws a request: one in five asks for 2-4 seats together, the
// others name 1-4 seats of one row, three in four from the front rows.
func askSeats(r *rand.Rand) seatAsk {
	n := 1 + r.IntN(4)
	if r.IntN(5) == 0 {
		return seatAsk{together: max(n, 2)}
	}
	row := frontRows + r.IntN(seatRows-frontRows)
	if r.IntN(4) > 0 {
		row = r.IntN(frontRows)
	}
	var ids []string
	for _, p := range r.Perm(seatsPerRow)[:n] {
		ids = append(ids, seatID(row, p))
	}
	return seatAsk{named: ids}
}

func seatID(row, pos int) string { return fmt.Sprintf("R%03d-%d", row+1, pos+1) }

// seats: an on-sale rush for 10,000 seats. Each client asks for 1-4 named
// seats, mostly from the front rows, or for 2-4 seats together; a hold
// made is confirmed one time in ten and released otherwise (off the
// clock, by other workers), so seats keep coming back and the front rows
// stay contended. The bare-SQL baseline runs the same requests against a
// venue of its own at the same concurrency, one transaction per request
// (insert the hold, UPDATE units SET status = 'held' WHERE id = ANY($1)
// AND status = 'available', take the counters), a request for seats
// together naming consecutive seats of a random row, since bare SQL has no
// search. At the end no seat may have been sold twice.
func (b *bench) seats(ctx context.Context) ([]*result, error) {
	sku, bare := "seats-"+b.run, "bare-seats-"+b.run
	for _, s := range []string{sku, bare} {
		if err := b.venue(s); err != nil {
			return nil, err
		}
	}
	releases := make(chan string, 4096)
	var rel sync.WaitGroup
	var relErrs atomic.Int64
	for range 8 {
		rel.Add(1)
		go func() {
			defer rel.Done()
			for path := range releases {
				if _, err := b.call("POST", path, b.shop, "", nil, http.StatusOK, http.StatusConflict); err != nil {
					relErrs.Add(1)
				}
			}
		}()
	}
	var held, refused, sold atomic.Int64
	r := &result{Scenario: "seats", Clients: b.o.clients}
	t := &tally{}
	el := b.closedLoop(ctx, "seats", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		rng := rand.New(rand.NewPCG(uint64(w), uint64(i)))
		ask := askSeats(rng)
		item := map[string]any{"sku": sku}
		if ask.together > 0 {
			item["quantity"], item["adjacent"] = ask.together, true
		} else {
			item["units"] = ask.named
		}
		body, _ := json.Marshal(map[string]any{"items": []any{item}})
		a, err := b.call("POST", "/v1/reservations", b.shop, fmt.Sprintf("seats-%s-%d-%d", b.run, w, i), body,
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
		if i%10 == 0 {
			sold.Add(1)
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

	base, err := b.bareSeats(ctx, bare)
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
	r.Note = fmt.Sprintf("holds/s counts holds made; %d made, %d refused (seats taken), %d confirmed/released errors; %d seats sold, seats sold twice: %s; bare SQL made %d, refused %d",
		held.Load(), refused.Load(), relErrs.Load(), check.Sold, verdict, base.Holds, base.refused)
	if check.SoldTwice > 0 {
		return []*result{r}, fmt.Errorf("seats: %d seats sold twice", check.SoldTwice)
	}
	return []*result{r}, nil
}

// venue puts 10,000 seats into sku's main pool, one request of units.
func (b *bench) venue(sku string) error {
	units := make([]map[string]any, 0, seatRows*seatsPerRow)
	for row := range seatRows {
		for p := range seatsPerRow {
			units = append(units, map[string]any{"id": seatID(row, p), "group": fmt.Sprintf("R%03d", row+1), "position": p + 1})
		}
	}
	body, _ := json.Marshal(map[string]any{"reason": "benchmark venue", "units": units})
	if _, err := b.call("POST", "/v1/skus/"+sku+"/units", b.ops, "venue-"+sku, body, http.StatusOK); err != nil {
		return fmt.Errorf("venue %s: %w", sku, err)
	}
	return nil
}

type bareResult struct {
	result
	refused int64
}

// bareSeats is the seats scenario's baseline: the same requests, each one
// transaction of bare SQL, and the same releases off the clock.
func (b *bench) bareSeats(ctx context.Context, sku string) (*bareResult, error) {
	releases := make(chan uuid.UUID, 4096)
	var rel sync.WaitGroup
	for range 8 {
		rel.Add(1)
		go func() {
			defer rel.Done()
			for id := range releases {
				_ = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
					_, err := db.New(tx).UnitsReleaseBare(ctx, sku, &id)
					return err
				})
			}
		}()
	}
	var refused atomic.Int64
	t := &tally{}
	el := b.closedLoop(ctx, "seats (bare SQL)", b.o.clients, b.o.duration, t, func(w, i int) (bool, error) {
		rng := rand.New(rand.NewPCG(uint64(w), uint64(i)))
		ask := askSeats(rng)
		ids := ask.named
		if ask.together > 0 {
			row, start := rng.IntN(seatRows), rng.IntN(seatsPerRow-ask.together+1)
			for p := start; p < start+ask.together; p++ {
				ids = append(ids, seatID(row, p))
			}
		}
		id := uuid.New()
		made := false
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			q := db.New(tx)
			if _, err := q.ReservationInsert(ctx, db.ReservationInsertParams{
				ID: id, Client: "bare", IdempotencyKey: fmt.Sprintf("bare-seats-%s-%d-%d", b.run, w, i), RequestHash: "bare", TtlSeconds: 900,
			}); err != nil {
				return err
			}
			took, err := q.UnitsHoldBare(ctx, &id, sku, ids)
			if err != nil {
				return err
			}
			if len(took) < len(ids) {
				return errSeatsTaken
			}
			if _, err := q.StockReserve(ctx, int64(len(ids)), sku, "main"); err != nil {
				return fmt.Errorf("reserve %s: %w", sku, err)
			}
			made = true
			return nil
		})
		switch {
		case err == errSeatsTaken:
			refused.Add(1)
			return false, nil
		case err != nil:
			return false, err
		}
		if made && i%10 != 0 {
			releases <- id
		}
		return made, nil
	})
	close(releases)
	rel.Wait()
	out := &bareResult{refused: refused.Load()}
	t.fill(&out.result, el)
	if out.Errors > 0 {
		return nil, fmt.Errorf("bare SQL: %d errors, first: %s", out.Errors, out.Note)
	}
	return out, nil
}

var errSeatsTaken = fmt.Errorf("seats taken")
