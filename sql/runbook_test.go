// Package runbook_test keeps the DBA runbook in sql/ from rotting: every
// file is run with psql, as a DBA would, against a migrated database holding
// a bit of everything (stock, holds in each status, a stuck hold, a paused
// pool, a rollback request, an alert, failing and discarded jobs), and must
// run without an error or a warning.
package runbook_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/jobs"
)

// fixture is what setup put in the database, for the checks to look for.
type fixture struct {
	pool        *pgxpool.Pool
	rollbacks   *rollbacks.Service
	held        uuid.UUID // A1 x2 + B1 x1, expires in an hour
	confirmed   uuid.UUID
	released    uuid.UUID
	expired     uuid.UUID
	stuck       uuid.UUID // held, five minutes past its expiry
	discarded   int64     // a discarded sweep_expired job
	rollbackJob int64     // the manual_rollback job of carol's request
}

// check inspects what psql printed after a file ran cleanly.
type check func(t *testing.T, f *fixture, p *psql, out string)

// cases has one entry per file in sql/: a file without one fails the test.
var cases = map[string]check{
	"job_health.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, "== 1. Jobs by kind and state ==")
		require.Contains(t, out, "sweep_expired")
		require.Contains(t, out, "reservation gone missing (attempt 3)", "the discarded job's last error")
		require.Contains(t, out, "connection reset (attempt 1)", "the retryable job's last error")
		p.run(t, "job_health.sql", "errors_per_kind=1")
	},
	"stuck_holds.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, f.stuck.String())
		require.Contains(t, out, "A1/main x 4")
		require.NotContains(t, out, f.held.String(), "not past its expiry")
		p.run(t, "stuck_holds.sql", "limit=1")
	},
	"stock_health.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, "B1")
		require.Contains(t, out, "paused")
		require.Contains(t, out, "counted twice, checking", "the paused reason")

		out = p.run(t, "stock_health.sql", "sku=A1", "limit=10")
		require.Contains(t, out, "A1")
		require.NotContains(t, out, "B1")
	},
	"rollback_requests.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, "carol")
		require.Contains(t, out, "customer asked twice")
		require.Contains(t, out, "pending")
		require.Contains(t, out, "manual rollback refused: operator is required", "a refused SQL job")

		out = p.run(t, "rollback_requests.sql", fmt.Sprintf("job_id=%d", f.rollbackJob), "limit=5")
		require.Contains(t, out, "carol")
		require.NotContains(t, out, "no operator", "another job")
	},
	"open_alerts.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, "sku:B1/main")
		require.Contains(t, out, "counters disagree")
		require.NotContains(t, out, "long gone", "a resolved alert is not open")
		p.run(t, "open_alerts.sql", "limit=1")
	},
	"webhooks.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, "== 1. The feed horizon")
		require.Contains(t, out, "https://hooks.example/stock")
		require.Contains(t, out, "the receiver answered 503")
		require.Contains(t, out, "scheduled (job ", "its delivery job, waiting to retry")
		require.Contains(t, out, "hold.confirmed,stock.low")
	},
	"units_against_ledger.sql": func(t *testing.T, f *fixture, p *psql, out string) {
		require.Contains(t, out, "== 2. Units not where the ledger last put them ==")
		require.Contains(t, out, "(0 rows)", "without -v sku, no pool")
		out = p.run(t, "units_against_ledger.sql", "sku=SEATS")
		require.Contains(t, out, "(0 rows)", "every seat is where the ledger put it")
		// A seat retired behind the triggers, as a DBA fixing data might.
		conn, err := f.pool.Acquire(context.Background())
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(context.Background(), `SET session_replication_role = replica;
			UPDATE units SET status = 'retired' WHERE sku = 'SEATS' AND id = 'A-2'; RESET session_replication_role`)
		require.NoError(t, err)
		out = p.run(t, "units_against_ledger.sql", "sku=SEATS", "pool=main")
		require.Regexp(t, `A-2\s*\|\s*retired\s*\|\s*main\s*\|\s*\|\s*available\s*\|\s*stock_in`, out)
		require.Contains(t, out, "(1 row)")
		_, err = conn.Exec(context.Background(), `SET session_replication_role = replica;
			UPDATE units SET status = 'available' WHERE sku = 'SEATS' AND id = 'A-2'; RESET session_replication_role`)
		require.NoError(t, err)
	},
	"manual_rollback.sql": checkManualRollback,
	"ledger_for_hold.sql": checkLedgerForHold,
}

func TestRunbook(t *testing.T) {
	t.Parallel()
	p := findPSQL(t)
	f := setup(t)
	p.pool = f.pool

	files, err := filepath.Glob("*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for name := range cases {
		require.Contains(t, files, name, "a test case for a file that does not exist")
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			check, ok := cases[name]
			require.True(t, ok, "sql/%s has no test case: add it to cases in runbook_test.go", name)
			src, err := os.ReadFile(name)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(src), "-- "+name+": "),
				"sql/%s must start with a header comment: -- %s: <what it answers>", name, name)
			out := p.run(t, name)
			if testing.Verbose() {
				t.Logf("psql -f %s:\n%s", name, out)
			}
			check(t, f, p, out)
		})
	}
}

// checkManualRollback asserts that the file, unedited, enqueues a dry run
// that the manual_rollback worker accepts and that changes nothing; then
// that the values given with -v (every scope, a real run) make jobs the
// worker accepts too, and that bad values enqueue nothing.
func checkManualRollback(t *testing.T, f *fixture, p *psql, out string) {
	ctx := context.Background()
	job := lastManualRollback(t, f.pool)
	require.Contains(t, out, fmt.Sprintf("WHERE job_id = %d", job.id), "prints the follow-up query")
	require.Equal(t, "manual_rollback", job.kind)
	require.Equal(t, "default", job.queue)
	require.Equal(t, "available", job.state)
	require.EqualValues(t, 3, job.maxAttempts)
	args := job.strictArgs(t)
	require.Equal(t, p.user(), args.Operator, "the database user by default")
	require.NotEmpty(t, args.Reason)
	require.True(t, args.DryRun, "unedited, a dry run")
	require.Equal(t, []uuid.UUID{uuid.Nil}, args.ReservationIDs, "unedited, a scope no hold has")
	require.Zero(t, args.RollbackID, "a plain SQL job has no request yet")

	before := stockCounters(t, f.pool)
	r := accept(t, f, job)
	require.Equal(t, rollbacks.StatusSucceeded, r.Status)
	require.Equal(t, rollbacks.SourceSQL, r.Source)
	require.True(t, r.DryRun)
	require.EqualValues(t, 0, *r.MatchedCount)
	require.Equal(t, before, stockCounters(t, f.pool), "a dry run changes no stock")

	// A dry run by SKU, with every field of that scope.
	p.run(t, "manual_rollback.sql", "operator=dave", "reason=what if: A1's old holds", "sku=A1", "pool=main",
		"held_before="+time.Now().UTC().Format(time.RFC3339Nano))
	job = lastManualRollback(t, f.pool)
	args = job.strictArgs(t)
	require.Equal(t, "dave", args.Operator)
	require.Equal(t, "what if: A1's old holds", args.Reason)
	require.True(t, args.DryRun)
	require.Equal(t, []string{"A1", "main"}, []string{args.SKU, args.Pool})
	require.NotNil(t, args.HeldBefore)
	require.Empty(t, args.ReservationIDs)
	r = accept(t, f, job)
	require.Equal(t, rollbacks.StatusSucceeded, r.Status)
	require.EqualValues(t, 2, *r.MatchedCount, "the held and the stuck hold")
	require.EqualValues(t, 6, *r.MatchedUnits, "2 + 4: A1's lines only, not the held hold's B1 line")

	// A dry run of a location's lines, and of a SKU's lines there.
	for _, vars := range [][]string{{"location=default"}, {"sku=A1", "location=default"}} {
		p.run(t, "manual_rollback.sql", append([]string{"operator=dave", "reason=what if: the default location",
			"held_before=" + time.Now().UTC().Format(time.RFC3339Nano)}, vars...)...)
		job = lastManualRollback(t, f.pool)
		args = job.strictArgs(t)
		require.Equal(t, "default", args.Location, "%v", vars)
		require.Empty(t, args.ReservationIDs, "%v", vars)
		r = accept(t, f, job)
		require.Equal(t, rollbacks.StatusSucceeded, r.Status, "%v", vars)
		require.EqualValues(t, 2, *r.MatchedCount, "%v", vars)
		if args.SKU == "" {
			require.EqualValues(t, 7, *r.MatchedUnits, "every line at default: 2 + 1 (B1 line) + 4")
		} else {
			require.EqualValues(t, 6, *r.MatchedUnits, "A1's lines at default")
		}
	}

	// A dry run by campaign.
	p.run(t, "manual_rollback.sql", "operator=dave", "reason=flash sale over", "campaign=c1")
	job = lastManualRollback(t, f.pool)
	require.Equal(t, "c1", job.strictArgs(t).Campaign)
	require.Equal(t, rollbacks.StatusSucceeded, accept(t, f, job).Status)

	// By campaign with a cut-off of its own (a dry run's requested_at).
	cut := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	p.run(t, "manual_rollback.sql", "operator=dave", "reason=flash sale over", "campaign=c1", "cutoff="+cut.Format(time.RFC3339))
	job = lastManualRollback(t, f.pool)
	args = job.strictArgs(t)
	require.NotNil(t, args.Cutoff)
	require.True(t, cut.Equal(*args.Cutoff))
	r = accept(t, f, job)
	require.True(t, cut.Equal(r.Cutoff()), "the request's cut-off is the job's")

	// For real, by ids: the worker accepts it and starts the batches.
	p.run(t, "manual_rollback.sql", "operator=erin", "reason=order cancelled by phone", "dry_run=false",
		"reservation_ids="+f.stuck.String()+", "+f.released.String())
	job = lastManualRollback(t, f.pool)
	args = job.strictArgs(t)
	require.False(t, args.DryRun)
	require.Equal(t, []uuid.UUID{f.stuck, f.released}, args.ReservationIDs)
	r = accept(t, f, job)
	require.Equal(t, rollbacks.StatusRunning, r.Status)
	require.Equal(t, "erin", r.Operator)
	var batches int
	require.NoError(t, f.pool.QueryRow(ctx,
		`SELECT count(*) FROM river_job WHERE kind = 'rollback_batch' AND (args->>'rollback_id')::bigint = $1`, r.ID).Scan(&batches))
	require.Equal(t, 1, batches, "the first batch is enqueued")

	// Inside one psql session: \set then \i, and again; the second run
	// starts from the defaults, and rollback_requests.sql right after shows
	// only the job just enqueued (no worker has made it a request yet).
	dir := t.TempDir()
	abs := func(name string) string {
		a, err := filepath.Abs(name)
		require.NoError(t, err)
		return a
	}
	session := filepath.Join(dir, "session.sql")
	require.NoError(t, os.WriteFile(session, []byte(fmt.Sprintf(
		"\\set operator frank\n\\set reason 'in a session'\n\\set campaign c2\n\\i %[1]s\n\\i %[1]s\n\\i %[2]s\n",
		abs("manual_rollback.sql"), abs("rollback_requests.sql"))), 0o600))
	mark := lastManualRollback(t, f.pool).id
	out = p.run(t, session)
	var sessionArgs []string
	rows, err := f.pool.Query(ctx, `SELECT args->>'operator' || ':' || coalesce(args->>'campaign', '-') FROM river_job
		WHERE kind = 'manual_rollback' AND id > $1 ORDER BY id`, mark)
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		sessionArgs = append(sessionArgs, a)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"frank:c2", p.user() + ":-"}, sessionArgs)
	waiting := out[strings.LastIndex(out, "== 2. manual_rollback jobs without a request"):]
	require.Contains(t, waiting, "dry run from sql/manual_rollback.sql", "the job just enqueued")
	require.NotContains(t, waiting, "in a session", "only the job just enqueued")

	// Bad values enqueue nothing and say why.
	for _, vars := range [][]string{
		{"sku=A1", "campaign=c1"},
		{"location=default", "campaign=c1"},
		{"location=default", "pool=main"},
		{"campaign=c1", "held_before=2020-01-01T00:00:00Z"},
		{"operator="},
		{"reason="},
		{"pool=main"},
		{"sku=A1", "held_before=2100-01-01T00:00:00Z"},
		{"campaign=c1", "cutoff=2100-01-01T00:00:00Z"},
	} {
		before := lastManualRollback(t, f.pool).id
		stdout, stderr, err := p.exec(t, "manual_rollback.sql", vars...)
		require.NoError(t, err, "stdout: %s\nstderr: %s", stdout, stderr)
		require.Contains(t, stderr, "nothing enqueued", "%v", vars)
		require.Equal(t, before, lastManualRollback(t, f.pool).id, "%v", vars)
	}
}

// checkLedgerForHold asserts that, for a hold in every status, the file
// finds its ledger rows and says they explain every unit.
func checkLedgerForHold(t *testing.T, f *fixture, p *psql, out string) {
	require.Contains(t, out, "== 3. Does the ledger explain every unit? ==")
	for _, id := range []uuid.UUID{f.held, f.confirmed, f.released, f.expired, f.stuck} {
		out := p.run(t, "ledger_for_hold.sql", "id="+id.String())
		require.Contains(t, out, id.String())
		require.Contains(t, out, "reserve")
		// The last column of section 3 is explained: t for every line.
		section := out[strings.Index(out, "== 3."):]
		lines := 0
		for _, l := range strings.Split(section, "\n") {
			cols := strings.Split(l, "|")
			if len(cols) < 10 || strings.TrimSpace(cols[0]) == "sku" || strings.HasPrefix(strings.TrimSpace(cols[0]), "-") {
				continue
			}
			lines++
			require.Equal(t, "t", strings.TrimSpace(cols[len(cols)-1]), "hold %s: %s", id, l)
		}
		require.Positive(t, lines, "hold %s: no lines in\n%s", id, section)
	}
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	inv := inventory.New(pool, nil, inventory.Config{})
	f := &fixture{pool: pool, rollbacks: rollbacks.New(pool, inserter, inv, 0)}

	for sku, n := range map[string]int64{"A1": 100, "B1": 50} {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: n, Reason: "restock", Actor: "test"})
		require.NoError(t, err)
	}
	hold := func(key string, items ...inventory.Item) uuid.UUID {
		r, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: key, OrderRef: "o-" + key, Items: items})
		require.NoError(t, err)
		return r.ID
	}
	a1 := func(n int64) inventory.Item { return inventory.Item{SKU: "A1", Quantity: n} }
	f.held = hold("held", a1(2), inventory.Item{SKU: "B1", Quantity: 1})
	f.confirmed = hold("confirmed", a1(3))
	f.released = hold("released", a1(1))
	f.expired = hold("expired", a1(5))
	f.stuck = hold("stuck", a1(4))
	ops := inventory.Caller{Name: "test", Ops: true}
	_, err = inv.Confirm(ctx, f.confirmed, ops)
	require.NoError(t, err)
	_, err = inv.Release(ctx, f.released, ops, "changed my mind")
	require.NoError(t, err)
	// Two holds past their expiry; one is expired, one is stuck.
	_, err = pool.Exec(ctx, `UPDATE reservations SET expires_at = now() - interval '5 minutes' WHERE id = ANY($1)`,
		[]uuid.UUID{f.expired, f.stuck})
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ended, err := inv.ReleaseTx(ctx, tx, []uuid.UUID{f.expired}, inventory.Outcome{
			Status: inventory.StatusExpired, Kind: "expire", Actor: "test", Reason: "hold expired", DueOnly: true})
		if err == nil && len(ended) != 1 {
			err = fmt.Errorf("expired %d holds", len(ended))
		}
		return err
	}))

	_, _, err = inv.AddUnitsOnce(ctx, idempotency.NewKey("test", "seats"), stock.UnitsChange{SKU: "SEATS", Reason: "plan", Actor: "test",
		Units: []stock.UnitSpec{{ID: "A-1"}, {ID: "A-2"}, {ID: "A-3"}}})
	require.NoError(t, err)

	_, err = inv.Pause(ctx, stock.SwitchRequest{SKU: "B1", Pool: stock.MainPool, Reason: "counted twice, checking", Actor: "test"})
	require.NoError(t, err)

	alertSvc := alerts.New(pool, inserter, false)
	_, err = alertSvc.Raise(ctx, alerts.Raise{
		Level: alerts.Critical, Kind: "reconcile_high_risk", Subject: "sku:B1/main", SKU: "B1", Pool: "main",
		Details: map[string]any{"reserved": 1}, Action: "counters disagree with lines: check the ledger",
	})
	require.NoError(t, err)
	gone, err := alertSvc.Raise(ctx, alerts.Raise{Level: alerts.Warning, Kind: "old", Subject: "sku:Z9/main", Action: "long gone"})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE alerts SET status = 'resolved', resolved_at = now() WHERE id = $1`, gone.ID)
	require.NoError(t, err)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		c, err := f.rollbacks.CreateTx(ctx, tx, rollbacks.Request{
			Operator: "carol", Reason: "customer asked twice", DryRun: true, Source: rollbacks.SourceHTTP,
			Scope: rollbacks.Scope{ReservationIDs: []uuid.UUID{f.held}},
		})
		f.rollbackJob = c.JobID
		return err
	}))

	// A webhook whose receiver fails, its delivery job waiting to retry.
	var webhook int64
	require.NoError(t, pool.QueryRow(ctx, `
		INSERT INTO webhooks (url, events, secret, created_by, cursor_xid, cursor_id, cursor_n, failures, failing_since, last_error)
		VALUES ('https://hooks.example/stock', '{hold.confirmed,stock.low}', 'whsec_test', 'test', '1', 0, 0, 3, now(),
		        'post 12 events: the receiver answered 503 Service Unavailable')
		RETURNING id`).Scan(&webhook))
	_, err = pool.Exec(ctx, `INSERT INTO river_job (kind, queue, args, max_attempts, state, scheduled_at)
		VALUES ('webhook_deliver', 'webhooks', jsonb_build_object('webhook_id', $1::bigint), 3, 'scheduled', now() + interval '80 seconds')`, webhook)
	require.NoError(t, err)

	// Jobs that failed: one out of attempts, one to be retried.
	require.NoError(t, pool.QueryRow(ctx, `
		INSERT INTO river_job (kind, args, max_attempts, attempt, state, attempted_at, finalized_at, errors)
		VALUES ('sweep_expired', '{}', 3, 3, 'discarded', now(), now(),
		        ARRAY[jsonb_build_object('at', now(), 'attempt', 3, 'error', 'reservation gone missing (attempt 3)', 'trace', '')])
		RETURNING id`).Scan(&f.discarded))
	_, err = pool.Exec(ctx, `
		INSERT INTO river_job (kind, args, max_attempts, attempt, state, attempted_at, scheduled_at, errors)
		VALUES ('deliver_alert', '{"alert_id": 1}', 3, 1, 'retryable', now(), now() - interval '1 minute',
		        ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'connection reset (attempt 1)', 'trace', '')])`)
	require.NoError(t, err)
	// A plain SQL rollback the worker refused: no request row, an error.
	_, err = pool.Exec(ctx, `
		INSERT INTO river_job (kind, args, max_attempts, attempt, state, attempted_at, finalized_at, errors)
		VALUES ('manual_rollback', '{"reason": "no operator", "sku": "A1"}', 3, 1, 'cancelled', now(), now(),
		        ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'manual rollback refused: operator is required', 'trace', '')])`)
	require.NoError(t, err)
	return f
}

// manualJob is a manual_rollback row of river_job.
type manualJob struct {
	id          int64
	kind        string
	queue       string
	state       string
	maxAttempts int16
	args        []byte
	createdAt   time.Time
}

// strictArgs decodes the job's args as the worker does (jobs.DecodeArgs),
// refusing fields that ManualRollbackArgs does not have.
func (j manualJob) strictArgs(t *testing.T) rollbacks.ManualRollbackArgs {
	t.Helper()
	a, err := jobs.DecodeArgs[rollbacks.ManualRollbackArgs](j.args)
	require.NoError(t, err, "args: %s", j.args)
	return a
}

func lastManualRollback(t *testing.T, pool *pgxpool.Pool) manualJob {
	t.Helper()
	var j manualJob
	err := pool.QueryRow(context.Background(), `
		SELECT id, kind, queue, state::text, max_attempts, args, created_at FROM river_job
		WHERE kind = 'manual_rollback' ORDER BY id DESC LIMIT 1`).
		Scan(&j.id, &j.kind, &j.queue, &j.state, &j.maxAttempts, &j.args, &j.createdAt)
	require.NoError(t, err)
	return j
}

// accept runs the manual_rollback worker's step on the job: what a running
// worker would do with it, minus River.
func accept(t *testing.T, f *fixture, j manualJob) rollbacks.Rollback {
	t.Helper()
	ctx := context.Background()
	var r rollbacks.Rollback
	require.NoError(t, pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) (err error) {
		r, err = f.rollbacks.AcceptTx(ctx, tx, j.id, j.createdAt, j.strictArgs(t))
		return err
	}))
	return r
}

func stockCounters(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT string_agg(format('%s/%s %s %s %s %s', sku, pool, total, available, reserved, sold), '; ' ORDER BY sku, pool)
		FROM stock`).Scan(&s))
	return s
}

// psql runs runbook files with the psql binary against the test database.
type psql struct {
	bin  string
	pool *pgxpool.Pool
}

// findPSQL finds psql on PATH or in Debian's versioned directories, and
// skips the test only when there is none.
func findPSQL(t *testing.T) *psql {
	t.Helper()
	if bin, err := exec.LookPath("psql"); err == nil {
		return &psql{bin: bin}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	version := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return n
	}
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	if len(found) == 0 {
		t.Skip("psql not found on PATH nor in /usr/lib/postgresql/*/bin: the runbook files in sql/ were NOT checked (install postgresql-client)")
	}
	return &psql{bin: found[0]}
}

func (p *psql) user() string { return p.pool.Config().ConnConfig.User }

// run runs file as a DBA would (psql -X -q -v ON_ERROR_STOP=1 -f file,
// with -v name=value for each of vars) and requires it to finish without an
// error or anything on stderr. It returns what psql printed.
func (p *psql) run(t *testing.T, file string, vars ...string) string {
	t.Helper()
	stdout, stderr, err := p.exec(t, file, vars...)
	require.NoError(t, err, "psql -f %s %v failed\nstderr: %s\nstdout: %s", file, vars, stderr, stdout)
	require.Empty(t, stderr, "psql -f %s %v wrote to stderr\nstdout: %s", file, vars, stdout)
	return stdout
}

func (p *psql) exec(t *testing.T, file string, vars ...string) (stdout, stderr string, err error) {
	t.Helper()
	cc := p.pool.Config().ConnConfig
	args := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", cc.Host, "-p", strconv.Itoa(int(cc.Port)), "-U", cc.User, "-d", cc.Database}
	for _, v := range vars {
		args = append(args, "-v", v)
	}
	args = append(args, "-f", file)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=30", "PGAPPNAME=stockhold-runbook-test")
	if cc.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+cc.Password)
	}
	if cc.TLSConfig == nil {
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}
