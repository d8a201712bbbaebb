package torture_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// breakerPrefix starts the SKUs whose books the breaker breaks on
// purpose: the checkpoints leave them out while it works on them; the
// checks after the run do not (it leaves every one repaired).
const breakerPrefix = "BRK-"

// breaker breaks the books of pools of its own behind the service's back,
// as a DBA fixing data by hand might, while everything else goes on: a
// seat retired with the triggers off (session_replication_role = replica)
// in a pool of seats, and, in a plain pool whose name sorts after it, the
// counters raised by hand or a ledger row inserted at the stock version
// reconciliation already checkpointed. Then it checks what a person relies
// on: a reconciliation over every pool does not fail, and pauses, alerts
// and records both pools (the seat pool's finding naming the seat); the
// repair of the seat pool to its ledger is refused (409) while its units
// disagree, and, the seat put back, the pool resumes; the plain pool's
// repair applies exactly what its preview showed, or, when the books move
// between the preview and the apply, nothing (409 preview_stale); and the
// pools resume. A cycle the run's end interrupts is finished.
func (tr *torture) breaker(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 1500*time.Millisecond) {
		tr.breakAndRepair(context.WithoutCancel(ctx), r)
	}
}

func (tr *torture) breakAndRepair(ctx context.Context, r *rand.Rand) {
	n := tr.name("BRK")
	seats, plain := n+"-A", n+"-B" // the seat pool first in a run's order
	var plan []map[string]any
	for p := 1; p <= 4; p++ {
		plan = append(plan, map[string]any{"id": fmt.Sprintf("A-%d", p), "group": "A", "position": p})
	}
	if st, b := tr.doAgain("breaker setup", "POST", "/v1/skus/"+seats+"/units", tr.ops,
		map[string]any{"reason": "breaker venue", "units": plan}, "Idempotency-Key", seats); st != 200 {
		tr.t.Errorf("breaker: add the units of %s: %d %s", seats, st, b)
		return
	}
	if st, b := tr.doAgain("breaker setup", "POST", "/v1/skus/"+plain+"/adjustments", tr.ops,
		map[string]any{"delta": 20, "reason": "breaker stock"}, "Idempotency-Key", plain); st != 200 {
		tr.t.Errorf("breaker: stock %s: %d %s", plain, st, b)
		return
	}
	// A clean run first, so that the plain pool's checkpoint is at its
	// version now: the ledger row below names that version.
	if _, ok := tr.reconcileNow(ctx, "breaker"); !ok {
		return
	}

	if err := tr.behindTriggers(ctx, `UPDATE units SET status = 'retired', updated_at = now() WHERE sku = $1 AND id = 'A-2'`, seats); err != nil {
		tr.t.Errorf("breaker: retire a seat behind the triggers: %v", err)
		return
	}
	byLedgerRow := r.IntN(2) == 0
	var err error
	if byLedgerRow {
		_, err = tr.plain.Exec(ctx, `
			INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor, reason)
			SELECT sku, pool, 'adjust', 5, 5, 0, 0, version, 'breaker', 'a row by hand at a checkpointed version'
			FROM stock WHERE sku = $1 AND pool = 'main'`, plain)
	} else {
		_, err = tr.pool.Exec(ctx, `UPDATE stock SET total = total + 3, available = available + 3 WHERE sku = $1 AND pool = 'main'`, plain)
	}
	if err != nil {
		tr.t.Errorf("breaker: break %s: %v", plain, err)
		return
	}

	// One run over every pool finds both (this run: each that sees broken
	// books records them, paused already or not), pauses both, alerts
	// both, and does not fail.
	run, ok := tr.reconcileNow(ctx, "breaker")
	if !ok {
		return
	}
	for _, f := range []struct{ sku, kind, named string }{
		{seats, "counters_vs_units", `{"against_ledger": [{"id": "A-2", "status": "retired", "ledger_says": "available"}]}`},
		{plain, "counters_vs_ledger", `{}`},
	} {
		if tr.count(ctx, `SELECT count(*) FROM reconcile_findings WHERE run_id = $1 AND sku = $2 AND kind = $3 AND details @> $4::jsonb`,
			run, f.sku, f.kind, f.named) == 0 {
			tr.t.Errorf("breaker: reconciliation run %d has no %s finding for %s (broken by a ledger row: %t)", run, f.kind, f.sku, byLedgerRow)
		}
		if tr.count(ctx, `SELECT count(*) FROM stock WHERE sku = $1 AND status = 'paused'`, f.sku) == 0 {
			tr.t.Errorf("breaker: %s is not paused", f.sku)
		}
		if tr.count(ctx, `SELECT count(*) FROM alerts WHERE kind = 'books_out_of_balance' AND subject = $1`, "sku:"+f.sku+"/main") == 0 {
			tr.t.Errorf("breaker: %s is not alerted", f.sku)
		}
	}

	// The seat pool: a repair to its ledger cannot give it its units.
	for _, dry := range []bool{true, false} {
		if st, b := tr.doAgain("breaker repair seats", "POST", "/v1/skus/"+seats+"/repair", tr.ops,
			map[string]any{"to": "ledger", "reason": "breaker", "dry_run": dry}); st != 409 || !strings.Contains(string(b), "serialized_pool") {
			tr.t.Errorf("breaker: repair of %s to the ledger (dry run %t): %d %s", seats, dry, st, b)
		}
	}
	if err := tr.behindTriggers(ctx, `UPDATE units SET status = 'available', updated_at = now() WHERE sku = $1 AND id = 'A-2'`, seats); err != nil {
		tr.t.Errorf("breaker: put the seat back: %v", err)
		return
	}

	// The plain pool: preview, then apply exactly the preview.
	to, want := "ledger", int64(-3)
	if byLedgerRow {
		to, want = "counters", -5
	}
	preview := func() map[string]int64 {
		st, b := tr.doAgain("breaker repair preview", "POST", "/v1/skus/"+plain+"/repair", tr.ops, map[string]any{"to": to, "reason": "breaker", "dry_run": true})
		var got struct {
			Difference map[string]int64 `json:"difference"`
		}
		if st != 200 || json.Unmarshal(b, &got) != nil {
			tr.t.Errorf("breaker: preview the repair of %s: %d %s", plain, st, b)
			return nil
		}
		return got.Difference
	}
	diff := preview()
	if diff == nil {
		return
	}
	if diff["total"] != want {
		tr.t.Errorf("breaker: the repair of %s to the %s would write %v, not %d", plain, to, diff, want)
	}
	if r.IntN(2) == 0 {
		// The books move between the preview and the apply: the apply
		// writes nothing, and says what it would write now.
		if _, err := tr.pool.Exec(ctx, `UPDATE stock SET total = total + 1, available = available + 1 WHERE sku = $1 AND pool = 'main'`, plain); err != nil {
			tr.t.Errorf("breaker: move %s: %v", plain, err)
			return
		}
		st, b := tr.doAgain("breaker repair stale", "POST", "/v1/skus/"+plain+"/repair", tr.ops,
			map[string]any{"to": to, "reason": "breaker", "expected_difference": diff})
		if st != 409 || !strings.Contains(string(b), "preview_stale") {
			tr.t.Errorf("breaker: a repair of %s after its books moved: %d %s", plain, st, b)
		}
		if diff = preview(); diff == nil {
			return
		}
	}
	st, b := tr.doAgain("breaker repair apply", "POST", "/v1/skus/"+plain+"/repair", tr.ops,
		map[string]any{"to": to, "reason": "breaker", "expected_difference": diff})
	if st != 200 || !strings.Contains(string(b), `"applied":true`) {
		tr.t.Errorf("breaker: apply the repair of %s: %d %s", plain, st, b)
		return
	}

	// Both resume, gated by their books. A run that read the books before
	// the repair may pause a pool again after it resumed: it resumes again
	// after a run that began since.
	for range 5 {
		for _, sku := range []string{seats, plain} {
			if tr.count(ctx, `SELECT count(*) FROM stock WHERE sku = $1 AND status = 'paused'`, sku) > 0 {
				if st, b := tr.do("breaker resume", "POST", "/v1/skus/"+sku+"/resume", tr.ops,
					map[string]any{"reason": "repaired"}); st != 200 && st != 503 {
					tr.t.Errorf("breaker: resume %s: %d %s", sku, st, b)
				}
			}
		}
		if _, ok := tr.reconcileNow(ctx, "breaker"); !ok {
			return
		}
		if tr.count(ctx, `SELECT count(*) FROM stock WHERE sku IN ($1, $2) AND status = 'paused'`, seats, plain) == 0 {
			tr.mu.Lock()
			tr.outcomes["breaker cycle repaired"]++
			tr.mu.Unlock()
			return
		}
	}
	tr.t.Errorf("breaker: %s and %s stay paused after their repair", seats, plain)
}

// reconcileNow asks for a run over every pool and waits for it, and
// returns its id; a run that fails is an error of the test.
func (tr *torture) reconcileNow(ctx context.Context, op string) (int64, bool) {
	st, b := tr.doAgain(op+" reconcile", "POST", "/v1/reconciliations", tr.ops, nil, "Idempotency-Key", tr.name(op+"-rec"))
	var created struct {
		RunID int64 `json:"run_id"`
	}
	if st != 202 || json.Unmarshal(b, &created) != nil {
		tr.t.Errorf("%s: ask for a reconciliation: %d %s", op, st, b)
		return 0, false
	}
	status, msg, err := tr.runEnd(ctx, created.RunID, 2*time.Minute)
	switch {
	case err != nil:
		tr.t.Errorf("%s: read reconciliation run %d: %v", op, created.RunID, err)
		return created.RunID, false
	case status == "succeeded":
		return created.RunID, true
	case status == "failed":
		tr.t.Errorf("%s: reconciliation run %d failed: %s", op, created.RunID, msg)
		return created.RunID, false
	}
	tr.t.Errorf("%s: reconciliation run %d did not finish in 2 minutes: %s", op, created.RunID, tr.stuck(ctx, created.RunID))
	return created.RunID, false
}

// runEnd waits up to within for reconciliation run id to end, and returns
// its status (succeeded or failed, with its error; still running when
// within passed first).
func (tr *torture) runEnd(ctx context.Context, id int64, within time.Duration) (status, msg string, err error) {
	deadline := time.Now().Add(within)
	for {
		var m *string
		if err := tr.pool.QueryRow(ctx, `SELECT status, error FROM reconcile_runs WHERE id = $1`, id).Scan(&status, &m); err != nil {
			return "", "", err
		}
		if status == "succeeded" || status == "failed" || !time.Now().Before(deadline) {
			return status, deref(m), nil
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stuck says where a reconciliation run stands that did not finish: the
// run, its job, and what the database's busy backends are doing.
func (tr *torture) stuck(ctx context.Context, run int64) string {
	ctx = context.WithoutCancel(ctx)
	var out []string
	rows, err := tr.pool.Query(ctx, `SELECT format('run %s: %s, started %s', id, status, started_at) FROM reconcile_runs WHERE id = $1
		UNION ALL SELECT format('job %s %s: %s, attempt %s, attempted %s, errors %s', id, kind, state, attempt, attempted_at, errors)
		FROM river_job WHERE args->>'run_id' = $1::text
		UNION ALL SELECT format('backend %s: %s %s:%s for %s: %s', pid, state, wait_event_type, wait_event, now() - query_start, left(query, 120))
		FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()`, run)
	if err != nil {
		return err.Error()
	}
	for rows.Next() {
		var line string
		if rows.Scan(&line) == nil {
			out = append(out, line)
		}
	}
	rows.Close()
	return strings.Join(out, "; ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// behindTriggers runs sql with the triggers off, in a session of its own.
func (tr *torture) behindTriggers(ctx context.Context, sql string, args ...any) error {
	conn, err := tr.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, sql, args...)
	if _, rerr := conn.Exec(ctx, `RESET session_replication_role`); err == nil {
		err = rerr
	}
	return err
}

func (tr *torture) count(ctx context.Context, query string, args ...any) int {
	var n int
	if err := tr.pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		tr.t.Errorf("count %q: %v", query, err)
	}
	return n
}

// seatLater reinstates ended holds of seats (a late payment): the new hold
// has the same seats as the one it reinstates, never others, or it is
// refused naming seats of that hold taken since.
func (tr *torture) seatLater(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 300*time.Millisecond) {
		// Until one is reinstated, an ended hold whose seats are all free
		// now: most ended holds have front-row seats taken since.
		owes, offset := tr.owed("seat reinstate 200"), r.IntN(10)
		if owes {
			offset = 0
		}
		var id uuid.UUID
		err := tr.pool.QueryRow(ctx, `
			SELECT r.id FROM reservations r
			WHERE r.status IN ('released', 'expired') AND r.campaign IS NULL AND r.client = 'torture-shop'
			  AND EXISTS (SELECT 1 FROM reservation_lines l WHERE l.reservation_id = r.id AND cardinality(l.units) > 0)
			  AND NOT EXISTS (SELECT 1 FROM reservations x WHERE x.client = r.client AND x.idempotency_key = '↻' || r.id::text)
			  AND (NOT $2 OR NOT EXISTS (SELECT 1 FROM reservation_lines l CROSS JOIN unnest(l.units) AS u(id)
			                             JOIN units x ON x.sku = l.sku AND x.id = u.id
			                             WHERE l.reservation_id = r.id AND (x.status <> 'available' OR x.pool <> 'main')))
			ORDER BY r.created_at DESC OFFSET $1 LIMIT 1`, offset, owes).Scan(&id)
		if err != nil {
			continue
		}
		path := "/v1/reservations/" + id.String()
		_, b := tr.do("seat reinstate read", "GET", path, tr.shop, nil)
		var orig reservation
		if err := json.Unmarshal(b, &orig); err != nil {
			tr.t.Errorf("read %s: %v: %s", id, err, b)
			continue
		}
		st, b := tr.do("seat reinstate", "POST", path+"/reinstate", tr.shop, nil)
		switch st {
		case 200:
			tr.done("seat reinstate 200")
			var got reservation
			if err := json.Unmarshal(b, &got); err != nil {
				tr.t.Errorf("seat reinstate answer: %v: %s", err, b)
				continue
			}
			tr.mu.Lock()
			tr.holds[got.ID] = true
			tr.mu.Unlock()
			if !sameLines(orig, got) {
				tr.t.Errorf("hold %s of seats %v reinstated as %s with seats %v", id, orig.Items, got.ID, got.Items)
			}
			if r.IntN(2) == 0 {
				if st, _ := tr.do("seat confirm", "POST", "/v1/reservations/"+got.ID.String()+"/confirm", tr.shop, nil); st == 200 {
					tr.mu.Lock()
					tr.confirmed[got.ID] = true
					tr.mu.Unlock()
				}
			}
		case 409:
			var p struct {
				Code  string   `json:"code"`
				Units []string `json:"units"`
			}
			_ = json.Unmarshal(b, &p)
			if p.Code == "unit_unavailable" {
				var had []string
				for _, it := range orig.Items {
					had = append(had, it.Units...)
				}
				for _, u := range p.Units {
					if !slices.Contains(had, u) {
						tr.t.Errorf("reinstate of %s (seats %v) refused naming seat %s, not one of them", id, had, u)
					}
				}
			}
		}
	}
}

// sameLines reports whether two holds have the same units per SKU.
func sameLines(a, b reservation) bool {
	units := func(h reservation) map[string][]string {
		m := map[string][]string{}
		for _, it := range h.Items {
			m[it.SKU] = append(m[it.SKU], it.Units...)
		}
		return m
	}
	ua, ub := units(a), units(b)
	if len(ua) != len(ub) {
		return false
	}
	for sku, x := range ua {
		if !sameSet(x, ub[sku]) {
			return false
		}
	}
	return true
}

// unitRacer adds a unit of one id to main and to a campaign's pool of
// seats at once (each request locks its own pool's row): one is added,
// the other refused 409, never both and never a 500. Now and then it
// retires a seat of the campaign's pool.
func (tr *torture) unitRacer(ctx context.Context, r *rand.Rand) {
	for pace(ctx, r, 500*time.Millisecond) {
		c, ok := tr.someCampaign(r)
		if !ok || !slices.Contains(c.skus, seatSKU) {
			continue
		}
		if r.IntN(3) == 0 && !tr.owed("unit race 409") {
			var seat string
			if tr.pool.QueryRow(ctx, `SELECT id FROM units WHERE sku = $1 AND pool = $2 AND status = 'available' ORDER BY random() LIMIT 1`,
				seatSKU, c.id).Scan(&seat) == nil {
				tr.do("campaign seat retire", "POST", "/v1/skus/"+seatSKU+"/units/retire", tr.ops,
					map[string]any{"pool": c.id, "reason": "broken seat", "units": []string{seat}}, "Idempotency-Key", tr.name("cretire"))
			}
			continue
		}
		id := tr.name("U")
		var (
			wg     sync.WaitGroup
			status [2]int
		)
		for i, pool := range []string{"main", c.id} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status[i], _ = tr.do("unit race", "POST", "/v1/skus/"+seatSKU+"/units", tr.ops,
					map[string]any{"pool": pool, "reason": "race", "units": []map[string]any{{"id": id}}}, "Idempotency-Key", id+"-"+strconv.Itoa(i))
			}()
		}
		wg.Wait()
		if status[0] == 200 && status[1] == 200 {
			tr.t.Errorf("unit %s added to main and to %s", id, c.id)
		}
		if status[0] == 409 || status[1] == 409 {
			tr.done("unit race 409")
		}
	}
}

// seatAllotment is a campaign's allotment of seats: a number of them, or
// seats named (available ones, from the back: the seaters hold the front).
func (tr *torture) seatAllotment(ctx context.Context, r *rand.Rand) map[string]any {
	n := 2 + r.IntN(3)
	if r.IntN(2) == 0 {
		return map[string]any{"sku": seatSKU, "quantity": n}
	}
	rows, err := tr.pool.Query(ctx, `SELECT id FROM units WHERE sku = $1 AND pool = 'main' AND status = 'available'
		ORDER BY group_name DESC, position DESC LIMIT $2`, seatSKU, n)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return map[string]any{"sku": seatSKU, "quantity": len(ids), "units": ids}
}
