package drill

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// catchUp is how long the drill waits, after the load, for expiry, the
// rollback and the webhook feed to finish what the load left them.
const catchUp = 3 * time.Minute

// check waits for the background work to catch up, then checks the final
// primary against what the clients saw acknowledged.
func (d *drill) check(ctx context.Context, l *load, rbHolds []uuid.UUID, rollbackID int64, killAt, stopAt time.Time) {
	d.checkExpiry(ctx, stopAt)
	d.checkRollback(ctx, rollbackID, len(rbHolds), killAt)
	d.checkWebhook(ctx)
	d.checkAcknowledged(ctx, l)
	d.checkBooks(ctx)
	d.checkLeadership(ctx, stopAt)
	for _, in := range d.instances {
		if status, body, err := in.get(ctx, "/readyz", ""); err != nil || status != http.StatusOK {
			d.problem("%s's /readyz after the drill: %d %s %v", in.name, status, body, err)
		}
	}
}

// checkExpiry waits until no hold is held more than 2 s past its expiry,
// and reports how late the holds that expired did.
func (d *drill) checkExpiry(ctx context.Context, stopAt time.Time) {
	deadline := time.Now().Add(catchUp)
	var overdue int
	for {
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM reservations
			WHERE status = 'held' AND expires_at < now() - interval '2 seconds'`).Scan(&overdue); err != nil {
			d.problem("count overdue holds: %v", err)
			return
		}
		if overdue == 0 || time.Now().After(deadline) || !sleep(ctx, 500*time.Millisecond) {
			break
		}
	}
	if overdue > 0 {
		d.problem("expiry did not catch up: %d holds still held more than 2 s past expiry, %s after the load", overdue, time.Since(stopAt).Round(time.Second))
	}
	var n int
	var p99, worst float64
	if err := d.pool.QueryRow(ctx, `SELECT count(*),
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM released_at - expires_at)), 0),
			coalesce(max(extract(epoch FROM released_at - expires_at)), 0)
		FROM reservations WHERE status = 'expired'`).Scan(&n, &p99, &worst); err != nil {
		d.problem("read expiry lag: %v", err)
		return
	}
	d.note("expiry caught up: %d holds expired, p99 %.2f s and at most %.1f s after expires_at", n, p99, worst)
}

// checkRollback waits for the rollback started before the kill to succeed,
// having released every one of its holds, and reports when it finished.
func (d *drill) checkRollback(ctx context.Context, id int64, holds int, killAt time.Time) {
	var rb struct {
		Status        string     `json:"status"`
		ReleasedCount int        `json:"released_count"`
		Batches       int        `json:"batches"`
		FinishedAt    *time.Time `json:"finished_at"`
	}
	deadline := time.Now().Add(catchUp)
	for {
		if err := d.instances[1].must(ctx, http.MethodGet, fmt.Sprintf("/v1/rollbacks/%d", id), d.ops, "", nil, http.StatusOK, &rb); err != nil {
			d.problem("read rollback %d: %v", id, err)
			return
		}
		if rb.Status == "succeeded" || rb.Status == "failed" || time.Now().After(deadline) || !sleep(ctx, 500*time.Millisecond) {
			break
		}
	}
	var held int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
		WHERE l.sku = 'RB-0' AND r.status = 'held'`).Scan(&held); err != nil {
		d.problem("count rollback holds: %v", err)
	}
	switch {
	case rb.Status != "succeeded":
		d.problem("rollback %d is %s, not succeeded", id, rb.Status)
	case rb.ReleasedCount != holds || held != 0:
		d.problem("rollback %d released %d of %d holds; %d still held", id, rb.ReleasedCount, holds, held)
	case rb.FinishedAt == nil || !rb.FinishedAt.After(killAt):
		d.problem("rollback %d finished before the kill: it was not in progress", id)
	default:
		d.note("rollback resumed: %d holds in %d batches, finished %.1f s after the kill", rb.ReleasedCount, rb.Batches, rb.FinishedAt.Sub(killAt).Seconds())
	}
}

// checkWebhook reads the event feed from the webhook's start on the final
// primary and waits until the receiver has every event of it; an event
// the receiver got that the feed does not have would be one the old
// primary told of and the new one lost.
func (d *drill) checkWebhook(ctx context.Context) {
	deadline := time.Now().Add(catchUp)
	var feed []string
	var missing []string
	for {
		var err error
		if feed, err = d.readFeed(ctx); err != nil {
			d.problem("read the event feed: %v", err)
			return
		}
		got := d.recv.got()
		missing = missing[:0]
		for _, id := range feed {
			if !got[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) || !sleep(ctx, time.Second) {
			break
		}
	}
	got := d.recv.got()
	inFeed := make(map[string]bool, len(feed))
	for _, id := range feed {
		inFeed[id] = true
	}
	var phantom []string
	for id := range got {
		if !inFeed[id] {
			phantom = append(phantom, id)
		}
	}
	sort.Strings(phantom)
	d.recv.mu.Lock()
	bad, dups, posts := d.recv.badSigs, d.recv.duplicates, d.recv.posts
	d.recv.mu.Unlock()
	if len(missing) > 0 {
		d.problem("webhook feed did not resume: %d of %d events never delivered (first %s)", len(missing), len(feed), missing[0])
	}
	if len(phantom) > 0 {
		d.problem("%d events delivered that the final primary does not have (first %s)", len(phantom), phantom[0])
	}
	if bad > 0 {
		d.problem("%d webhook POSTs with a bad signature", bad)
	}
	d.note("webhook feed resumed: %d events delivered in %d POSTs, every signature valid, %d delivered twice (at least once)", len(feed), posts, dups)
}

func (d *drill) readFeed(ctx context.Context) ([]string, error) {
	var ids []string
	after := d.hookStart
	for {
		var page struct {
			Events []struct {
				ID string `json:"id"`
			} `json:"events"`
			Next string `json:"next"`
		}
		path := "/v1/events?limit=1000&after=" + url.QueryEscape(after)
		if err := d.instances[0].must(ctx, http.MethodGet, path, d.ops, "", nil, http.StatusOK, &page); err != nil {
			return nil, err
		}
		if len(page.Events) == 0 {
			return ids, nil
		}
		for _, e := range page.Events {
			ids = append(ids, e.ID)
		}
		after = page.Next
	}
}

// checkAcknowledged looks up every acknowledged operation on the final
// primary: a hold's reservation and its reserve ledger rows, a confirm's
// status, a release's status, a partial release's ledger row.
func (d *drill) checkAcknowledged(ctx context.Context, l *load) {
	ids := map[uuid.UUID]bool{}
	for _, o := range l.acked {
		ids[o.hold] = true
	}
	list := make([]uuid.UUID, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	type found struct {
		status string
		kinds  map[string]bool // "reserve A1", "release_partial A1", ...
	}
	byID := make(map[uuid.UUID]*found, len(list))
	rows, err := d.pool.Query(ctx, `SELECT r.id, r.status, coalesce(g.kind || ' ' || g.sku, '')
		FROM reservations r LEFT JOIN ledger g ON g.reservation_id = r.id
		WHERE r.id = ANY($1)`, list)
	if err != nil {
		d.problem("read the acknowledged holds: %v", err)
		return
	}
	var id uuid.UUID
	var status, kind string
	if _, err := pgx.ForEachRow(rows, []any{&id, &status, &kind}, func() error {
		f := byID[id]
		if f == nil {
			f = &found{status: status, kinds: map[string]bool{}}
			byID[id] = f
		}
		f.kinds[kind] = true
		return nil
	}); err != nil {
		d.problem("read the acknowledged holds: %v", err)
		return
	}
	lost := map[string]int{}
	var first string
	for _, o := range l.acked {
		f := byID[o.hold]
		ok := f != nil
		if ok {
			switch o.kind {
			case opHold:
				for _, it := range o.items {
					ok = ok && f.kinds["reserve "+it.SKU]
				}
			case opConfirm:
				ok = f.status == "confirmed"
			case opRelease:
				ok = f.status == "released" || f.status == "expired"
			case opPartial:
				ok = f.kinds["release_partial "+o.sku]
			}
		}
		if !ok {
			lost[o.kind]++
			if first == "" {
				first = fmt.Sprintf("%s of %s at %s", o.kind, o.hold, o.at.Format("15:04:05.000"))
			}
		}
	}
	for _, n := range lost {
		d.res.Lost += n
	}
	if d.res.Lost > 0 {
		d.problem("%d acknowledged operations missing from the final primary %v (first: %s)", d.res.Lost, lost, first)
	}
	byKind := map[string]int{}
	for _, o := range l.acked {
		byKind[o.kind]++
	}
	d.note("acknowledged: %v; %d holds left to expire", byKind, l.expiring)
}

// checkBooks runs the invariants query (docs/internals/ARCHITECTURE.md's
// invariants: counters, lines, ledger, idempotency keys, no hold handed
// back twice).
func (d *drill) checkBooks(ctx context.Context) {
	v, err := db.New(d.pool).InvariantViolations(ctx)
	if err != nil {
		d.problem("run the invariants query: %v", err)
		return
	}
	for i, x := range v {
		if i == 10 {
			d.problem("... and %d more violations", len(v)-10)
			break
		}
		d.problem("invariant violated: %s: %s", x.Subject, x.Problem)
	}
	if len(v) == 0 {
		d.note("books balance: the invariants query (queries/health.sql) found nothing")
	}
}

// checkLeadership checks that River has a leader on the final primary and
// that the expiry loop and the webhook dispatcher (app/leader) ran there
// after the last change of primary.
func (d *drill) checkLeadership(ctx context.Context, since time.Time) {
	var leader string
	var elected time.Time
	if err := d.pool.QueryRow(ctx, `SELECT leader_id, elected_at FROM river_leader WHERE expires_at > now()`).Scan(&leader, &elected); err != nil {
		d.problem("River has no leader on the final primary: %v", err)
	}
	var expiry, dispatch int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'expire_holds'), count(*) FILTER (WHERE kind = 'webhook_dispatch')
		FROM river_job WHERE state IN ('running', 'completed') AND attempted_at > $1`, since.Add(-10*time.Second)).Scan(&expiry, &dispatch); err != nil {
		d.problem("count leader loop runs: %v", err)
		return
	}
	if expiry == 0 || dispatch == 0 {
		d.problem("leader loops not running on the final primary: %d expire_holds and %d webhook_dispatch runs", expiry, dispatch)
		return
	}
	d.note("River leader %s elected %s; expire_holds and webhook_dispatch ran %d and %d times at the end", leader, elected.Format("15:04:05"), expiry, dispatch)
}
