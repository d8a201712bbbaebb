package torture_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// A forced count below what is held, racing the holds. The shorter stocks
// a SKU of its own (at default, in main) and, for a few seconds, lets
// holders hold it on either instance and end their holds every way
// (confirm, release, release in part, expiry, made overdue) while a
// counter counts the shelf: below what is held (forced: the held units it
// does not find are the row's short, which the holds pay as they end,
// never back on sale, and a confirm that sells them is sold_short), at
// what the shelf has, or above it (finding missing units again), and
// resumes the row the forced count paused; a restocker adds a unit now
// and then. Then every hold is made overdue and the run waits for them to
// expire. Checked as it goes: a resume is never refused for books out of
// balance, a forced count is never refused, a count answers forced as its
// record says (checkCountAnswer). Checked at every checkpoint (check):
// short stays within 0..reserved on every row, beside the invariants
// (counters, ledger, lines; short is in them) and a clean reconciliation;
// and checkSeamsNow's check that a forced count's shortfall does not come
// back on the shelf. Checked at the end of each round: once no hold is
// held, nothing is short. reportShortfall fails a run in which no unit
// left the books as short or was sold short.

// shorter runs rounds of a forced count racing the holds of a SKU of its
// own.
func (tr *torture) shorter(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 300*time.Millisecond) {
		tr.shortRound(ctx, r)
	}
}

func (tr *torture) shortRound(ctx context.Context, r *rand.Rand) {
	sku := tr.name("SHORT")
	if st, b := tr.doAgain("short stock", "POST", "/v1/skus/"+sku+"/adjustments", tr.ops,
		map[string]any{"delta": 10, "reason": "short stock", "ref": sku}, "Idempotency-Key", sku); st != 200 {
		tr.t.Errorf("shorter: stock %s: %d %s", sku, st, b)
		return
	}
	tr.mu.Lock()
	tr.refs = append(tr.refs, sku)
	tr.mu.Unlock()
	phase, stop := context.WithTimeout(ctx, time.Duration(2000+r.IntN(2000))*time.Millisecond)
	defer stop()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		held []uuid.UUID
	)
	workers := []func(*rand.Rand){
		func(r *rand.Rand) { tr.shortHolder(phase, r, sku, &mu, &held) },
		func(r *rand.Rand) { tr.shortHolder(phase, r, sku, &mu, &held) },
		func(r *rand.Rand) { tr.shortHolder(phase, r, sku, &mu, &held) },
		func(r *rand.Rand) { tr.shortCounter(phase, r, sku) },
		func(r *rand.Rand) {
			for pace(phase, r, 700*time.Millisecond) {
				ref := tr.name("short-restock")
				if st, _ := tr.doOn(r.IntN(2), "short restock", "POST", "/v1/skus/"+sku+"/adjustments", tr.ops,
					map[string]any{"delta": 1 + r.IntN(2), "reason": "short restock", "ref": ref}, "Idempotency-Key", ref); st == 200 {
					tr.mu.Lock()
					tr.refs = append(tr.refs, ref)
					tr.mu.Unlock()
				}
			}
		},
	}
	for i, w := range workers {
		rr := rand.New(rand.NewPCG(r.Uint64(), uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			w(rr)
		}()
	}
	wg.Wait()
	// Every hold still held expires now; the row resumes; then nothing is
	// short.
	bg := context.WithoutCancel(ctx)
	if _, err := tr.pool.Exec(bg, `UPDATE reservations SET expires_at = now() - interval '1 second'
		WHERE status = 'held' AND id IN (SELECT reservation_id FROM reservation_lines WHERE sku = $1)`, sku); err != nil {
		tr.t.Errorf("shorter: make %s's holds overdue: %v", sku, err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for tr.count(bg, `SELECT count(*) FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
		WHERE l.sku = $1 AND r.status = 'held'`, sku) > 0 {
		if time.Now().After(deadline) {
			tr.t.Errorf("shorter: holds of %s still held a minute after they were made overdue", sku)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tr.shortResume(r, sku)
	var short, reserved int64
	if err := tr.pool.QueryRow(bg, `SELECT short, reserved FROM stock WHERE sku = $1 AND location = 'default' AND pool = 'main'`, sku).
		Scan(&short, &reserved); err != nil {
		tr.t.Errorf("shorter: read %s: %v", sku, err)
		return
	}
	if short != 0 || reserved != 0 {
		tr.t.Errorf("shorter: once every hold of %s ended, %d reserved and %d short remain", sku, reserved, short)
	}
	tr.mu.Lock()
	tr.outcomes["short round"]++
	tr.mu.Unlock()
}

// shortHolder holds one or two units of sku on either instance, and ends
// the hold one way or another: every way while some way is owed.
func (tr *torture) shortHolder(ctx context.Context, r *rand.Rand, sku string, mu *sync.Mutex, held *[]uuid.UUID) {
	for pace(ctx, r, 80*time.Millisecond) {
		body := map[string]any{"order_ref": tr.name("short"), "ttl_seconds": 1 + r.IntN(3),
			"items": []any{map[string]any{"sku": sku, "quantity": 1 + r.IntN(2)}}}
		st, b := tr.doOn(r.IntN(2), "short hold", "POST", "/v1/reservations", tr.shop, body, "Idempotency-Key", tr.name("short-hold"))
		if st != 201 {
			continue
		}
		var h reservation
		if err := json.Unmarshal(b, &h); err != nil {
			tr.t.Errorf("short hold answer: %v: %s", err, b)
			continue
		}
		tr.mu.Lock()
		tr.holds[h.ID] = true
		tr.mu.Unlock()
		tr.recordWhere(h.ID, b)
		mu.Lock()
		*held = append(*held, h.ID)
		mu.Unlock()
		if !pace(ctx, r, 300*time.Millisecond) {
			return
		}
		path := "/v1/reservations/" + h.ID.String()
		what := []string{"confirm", "release", "partial release", "expire", "overdue"}[r.IntN(5)]
		// Until one of each ran: a confirm sells units counted missing,
		// a release pays them.
		what = tr.firstOwed(what, nil, "sold_short", "shortfall")
		i := r.IntN(2)
		switch what {
		case "confirm", "sold_short":
			if st, _ := tr.doOn(i, "short confirm", "POST", path+"/confirm", tr.shop, nil); st == 200 {
				tr.mu.Lock()
				tr.confirmed[h.ID] = true
				tr.mu.Unlock()
			}
		case "release", "shortfall":
			tr.shortRelease(i, h.ID, nil)
		case "partial release":
			if unitsHeld(h) > 1 {
				tr.shortRelease(i, h.ID, []any{map[string]any{"sku": sku, "quantity": 1}})
			} else {
				tr.shortRelease(i, h.ID, nil)
			}
		case "overdue":
			_, _ = tr.pool.Exec(context.WithoutCancel(ctx), `UPDATE reservations SET expires_at = now() - interval '1 second'
				WHERE id = $1 AND status = 'held'`, h.ID)
		}
	}
}

// shortRelease releases a hold (whole when items is nil) on instance i and
// records the answer.
func (tr *torture) shortRelease(i int, id uuid.UUID, items []any) {
	body := map[string]any{"reason": "short"}
	headers := []string(nil)
	op := "short release"
	if items != nil {
		body["items"], headers, op = items, []string{"Idempotency-Key", tr.name("short-part")}, "short partial release"
	}
	st, b := tr.doOn(i, op, "POST", "/v1/reservations/"+id.String()+"/release", tr.shop, body, headers...)
	if st != 200 {
		return
	}
	var h reservation
	if err := json.Unmarshal(b, &h); err != nil {
		tr.t.Errorf("%s answer: %v: %s", op, err, b)
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if h.Status == "held" {
		tr.partials[id]++
	} else {
		tr.ended[id] = h.Status
	}
}

// shortCounter counts sku's shelf while it is held: below what is held
// (forced; the first counts find nothing of it while sold_short or
// shortfall is owed, so that the holds owe every held unit), at what the
// shelf has, or above it; then resumes the row a forced count paused.
func (tr *torture) shortCounter(ctx context.Context, r *rand.Rand, sku string) {
	for pace(ctx, r, 400*time.Millisecond) {
		p, ok := tr.shortRow(sku)
		if !ok {
			continue
		}
		held := p.Reserved - p.Short
		shelf := p.onShelf()
		body := map[string]any{"counted": shelf, "reason": "short count"}
		switch k := r.IntN(4); {
		case held > 0 && (k < 2 || tr.owed("sold_short") || tr.owed("shortfall")):
			counted := r.Int64N(held)
			if tr.owed("sold_short") || tr.owed("shortfall") {
				counted = 0
			}
			body["counted"], body["force"] = counted, true
		case k == 2:
			body["counted"] = shelf + 1 + r.Int64N(2) // finds some again
		}
		var st int
		var b []byte
		for range 20 {
			if st, b = tr.doOn(r.IntN(2), "short count", "POST", "/v1/skus/"+sku+"/counts", tr.ops, body,
				"Idempotency-Key", tr.name("short-count")); st != 503 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		switch {
		case st == 200:
			tr.checkCountAnswer(b)
		case body["force"] == true:
			tr.t.Errorf("shorter: a forced count of %s (%v) answered %d %s", sku, body, st, b)
		}
		pace(ctx, r, 200*time.Millisecond)
		tr.shortResume(r, sku)
	}
}

// shortRow is sku's row at default in main, as the API shows it.
func (tr *torture) shortRow(sku string) (pooled, bool) {
	view, ok := tr.stockView(sku)
	if !ok {
		return pooled{}, false
	}
	for _, p := range view {
		if p.Location == "default" && p.Pool == "main" {
			return p, true
		}
	}
	return pooled{}, false
}

// shortResume resumes sku's row if it is paused: its books balance, so
// it is never refused books_unbalanced.
func (tr *torture) shortResume(r *rand.Rand, sku string) {
	if tr.count(context.Background(), `SELECT count(*) FROM stock WHERE sku = $1 AND status = 'paused'`, sku) == 0 {
		return
	}
	for range 20 {
		st, b := tr.doOn(r.IntN(2), "short resume", "POST", "/v1/skus/"+sku+"/resume", tr.ops,
			map[string]any{"location": "default", "pool": "main", "reason": "counted"})
		if st == 409 && strings.Contains(string(b), "books_unbalanced") {
			tr.t.Errorf("shorter: resume of %s refused though its books balance: %s", sku, b)
		}
		if st != 503 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkShort: on every row, short is within 0..reserved.
func (tr *torture) checkShort(t *testing.T, when string) {
	t.Helper()
	rows, err := tr.pool.Query(context.Background(), `SELECT format('%s/%s/%s: short %s, reserved %s', sku, location, pool, short, reserved)
		FROM stock WHERE short < 0 OR short > reserved`)
	if err != nil {
		t.Errorf("%s: read short: %v", when, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Errorf("%s: read short: %v", when, err)
			return
		}
		t.Errorf("%s: short outside 0..reserved: %s", when, line)
	}
	if err := rows.Err(); err != nil {
		t.Errorf("%s: read short: %v", when, err)
	}
}

// settleShortfall, with no traffic, takes the shortfall's paths a short
// run missed (on a loaded machine a round's confirms can all land before
// its forced count), as a shop and an operator would: two holds of one
// unit of a fresh SKU, a forced count that finds none of it, a confirm
// that sells one unit short and a release that pays the other, then the
// row resumed. The checks that follow prove those rows like any other.
func (tr *torture) settleShortfall(t *testing.T) {
	t.Helper()
	if !tr.owed("sold_short") && !tr.owed("shortfall") {
		return
	}
	sku := tr.name("SHORT")
	tr.mustStatus(200, "POST", "/v1/skus/"+sku+"/adjustments", tr.ops,
		map[string]any{"delta": 10, "reason": "short stock", "ref": sku}, "Idempotency-Key", sku)
	tr.mu.Lock()
	tr.refs = append(tr.refs, sku)
	tr.mu.Unlock()
	var ids [2]string
	for i := range ids {
		b := tr.mustStatus(201, "POST", "/v1/reservations", tr.shop,
			map[string]any{"items": []any{map[string]any{"sku": sku, "quantity": 1}}}, "Idempotency-Key", tr.name("settle-short"))
		var h reservation
		require.NoError(t, json.Unmarshal(b, &h))
		ids[i] = h.ID.String()
	}
	b := tr.mustStatus(200, "POST", "/v1/skus/"+sku+"/counts", tr.ops,
		map[string]any{"counted": 0, "force": true, "reason": "short count"}, "Idempotency-Key", tr.name("settle-short-count"))
	tr.checkCountAnswer(b)
	tr.mustStatus(200, "POST", "/v1/reservations/"+ids[0]+"/confirm", tr.shop, nil)
	tr.mustStatus(200, "POST", "/v1/reservations/"+ids[1]+"/release", tr.shop, map[string]any{"reason": "short"})
	tr.mustStatus(200, "POST", "/v1/skus/"+sku+"/resume", tr.ops,
		map[string]any{"location": "default", "pool": "main", "reason": "counted"})
	t.Logf("torture: settle sold one unit of %s short and paid one as shortfall, the run had not", sku)
}

// reportShortfall logs what the shorter did, and fails a run in which no
// round finished, no unit counted missing left the books with its hold,
// or none was sold short (with its alert).
func (tr *torture) reportShortfall(t *testing.T) {
	t.Helper()
	for what, query := range map[string]string{
		"ledger rows of kind shortfall":  `SELECT count(*) FROM ledger WHERE kind = 'shortfall'`,
		"ledger rows of kind sold_short": `SELECT count(*) FROM ledger WHERE kind = 'sold_short'`,
		"sold_short alerts":              `SELECT count(*) FROM alerts WHERE kind = 'sold_short'`,
		"forced counts of the shorter":   `SELECT count(*) FROM stock_counts WHERE forced AND sku LIKE 'SHORT-%'`,
	} {
		n := dbtest.Count(t, tr.pool, query)
		t.Logf("torture: %s: %d", what, n)
		if n == 0 {
			t.Errorf("torture: no %s: that path never ran", what)
		}
	}
	if tr.outcomes["short round"] == 0 {
		t.Errorf("torture: no round of the shorter finished")
	}
}
