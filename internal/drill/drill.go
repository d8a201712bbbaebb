// Package drill is the failover drill: a pg_auto_failover formation on this
// machine (internal/formation), two stockhold instances on its multi-host
// URL, mixed load from many clients, a webhook receiver and a rollback in
// progress; then kill -9 of the primary's postmaster, the load going on
// through the promotion, and a planned switchover back. Afterwards it
// checks on the final primary that every acknowledged operation is there,
// that the books balance and no hold was released twice, that the
// rollback, the webhook feed and expiry carried on, and measures how long
// writes were unavailable. `make drill-failover` runs it in full
// (cmd/stockhold-drill); a shorter run is a test in `make test`.
package drill

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtypes"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/internal/formation"
)

// Options shape a drill.
type Options struct {
	// Formation says where the formation lives (its Database is set by
	// the drill).
	Formation formation.Options
	// Command returns an unstarted `stockhold serve`; the drill adds
	// DATABASE_URL, STOCKHOLD_ADDR and its settings to its Env (nil Env
	// means the drill's own environment).
	Command func() *exec.Cmd
	// LogDir receives the instances' logs.
	LogDir string
	// Clients is the number of concurrent clients.
	Clients int
	// Warmup is how long the load runs before the kill; AfterFailover how
	// long it runs after the promotion (after the old primary is back as a
	// standby, with Rejoin); AfterSwitchover how long after the switchover.
	Warmup, AfterFailover, AfterSwitchover time.Duration
	// Rejoin waits for the old primary to come back as a standby after
	// the promotion; Switchover then switches back to it (and implies
	// Rejoin).
	Rejoin, Switchover bool
	// RollbackHolds is how many holds the rollback in progress at the
	// kill releases, 100 a batch.
	RollbackHolds int
	// Keep leaves the formation running (for a look with psql).
	Keep bool
	// Log gets progress lines.
	Log io.Writer
}

// Result is what a drill saw.
type Result struct {
	Acknowledged int
	// Lost counts acknowledged operations missing from the final primary.
	Lost int
	// FailoverWindow and SwitchoverWindow are the longest times without
	// an acknowledged write around the kill and the switchover.
	FailoverWindow, SwitchoverWindow time.Duration
	// Promotion is from the kill until the monitor reported the standby
	// primary.
	Promotion time.Duration
	// Answers counts the answers by operation and status.
	Answers map[string]int
	// Problems are the failed checks, one line each; empty means passed.
	Problems []string
	// Notes are facts worth printing that are not failures.
	Notes []string
}

// Line is the drill's last line.
func (r Result) Line() string {
	verdict := "PASS"
	if len(r.Problems) > 0 {
		verdict = fmt.Sprintf("FAIL (%d problems)", len(r.Problems))
	}
	s := fmt.Sprintf("drill-failover %s: acknowledged %d, lost %d; writes unavailable %.1f s at failover",
		verdict, r.Acknowledged, r.Lost, r.FailoverWindow.Seconds())
	if r.SwitchoverWindow > 0 {
		s += fmt.Sprintf(", %.1f s at switchover", r.SwitchoverWindow.Seconds())
	}
	return s
}

const database = "stockhold"

// drill is one run's state.
type drill struct {
	o         Options
	f         *formation.Formation
	pool      *pgxpool.Pool
	shop, ops string
	instances []*instance
	recv      *receiver
	hookID    int64
	hookStart string // the feed position the webhook started at
	res       Result
	start     time.Time
}

func (d *drill) logf(format string, args ...any) {
	fmt.Fprintf(d.o.Log, "%s drill: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (d *drill) problem(format string, args ...any) {
	p := fmt.Sprintf(format, args...)
	d.res.Problems = append(d.res.Problems, p)
	d.logf("PROBLEM: %s", p)
}

func (d *drill) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	d.res.Notes = append(d.res.Notes, n)
	d.logf("%s", n)
}

// Run runs a drill. An error means the drill could not be carried out (the
// formation did not come up, say); a drill that ran returns its Result,
// whose Problems say whether it passed.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Clients == 0 {
		o.Clients = 16
	}
	o.Formation.Database = database
	if o.Formation.Log == nil {
		o.Formation.Log = o.Log
	}
	d := &drill{o: o, start: time.Now()}
	f, err := formation.Up(ctx, o.Formation)
	if err != nil {
		return Result{}, fmt.Errorf("bring up the formation: %w", err)
	}
	d.f = f
	defer func() {
		d.saveFormationLogs()
		if !o.Keep {
			f.Down()
		}
	}()
	d.logf("formation up in %.1f s: %s", time.Since(d.start).Seconds(), f.URL(""))
	defer func() {
		for _, in := range d.instances {
			in.stop()
		}
		if d.recv != nil {
			d.recv.close()
		}
		if d.pool != nil {
			d.pool.Close()
		}
	}()
	if err := d.setUp(ctx); err != nil {
		return Result{}, err
	}
	if err := d.drive(ctx); err != nil {
		return d.res, err
	}
	return d.res, nil
}

// setUp migrates, creates keys, starts the receiver and two instances,
// puts stock on sale and registers the webhook.
func (d *drill) setUp(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(d.f.URL("pool_max_conns=4"))
	if err != nil {
		return err
	}
	cfg.AfterConnect = dbtypes.Register
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	m, err := schema.New(d.pool, nil)
	if err != nil {
		return err
	}
	_, err = m.Up(ctx)
	m.Close()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if d.shop, err = auth.Create(ctx, d.pool, "drill-shop", auth.RoleShop); err != nil {
		return err
	}
	if d.ops, err = auth.Create(ctx, d.pool, "drill-ops", auth.RoleOps); err != nil {
		return err
	}
	if d.recv, err = newReceiver(); err != nil {
		return err
	}
	// Each instance opens at most 10 + (8 + 8) connections: both fit in
	// the data nodes' max_connections (100) with room for pg_autoctl.
	env := []string{
		"STOCKHOLD_LOG_LEVEL=info",
		"STOCKHOLD_HTTP_DB_CONNS=10",
		"STOCKHOLD_WORKERS=8",
		"STOCKHOLD_WEBHOOK_ALLOW_PRIVATE=true",
		"STOCKHOLD_ROLLBACK_PAUSE=250ms",
		"STOCKHOLD_RECONCILE_INTERVAL=1m",
	}
	url := d.f.URL("")
	for i := range 2 {
		in, err := startInstance(ctx, d.o, fmt.Sprintf("stockhold-%d", i+1), url, env)
		if err != nil {
			return err
		}
		d.instances = append(d.instances, in)
	}
	lines := []map[string]any{{"sku": "RB-0", "delta": 1_000_000}}
	for i := range 200 {
		lines = append(lines, map[string]any{"sku": fmt.Sprintf("D-%03d", i), "delta": 1_000_000})
	}
	in := d.instances[0]
	if err := in.must(ctx, http.MethodPost, "/v1/stock/adjustments", d.ops, "drill-stock",
		map[string]any{"reason": "drill", "lines": lines}, http.StatusOK, nil); err != nil {
		return err
	}
	var hook struct {
		ID          int64  `json:"id"`
		Secret      string `json:"secret"`
		LastEventID string `json:"last_event_id"`
	}
	if err := in.must(ctx, http.MethodPost, "/v1/webhooks", d.ops, "drill-hook",
		map[string]any{"url": d.recv.url, "events": []string{"*"}}, http.StatusCreated, &hook); err != nil {
		return err
	}
	d.recv.setSecret(hook.Secret)
	d.hookID, d.hookStart = hook.ID, hook.LastEventID
	d.logf("two instances serving (%s, %s); webhook %d to %s", d.instances[0].base, d.instances[1].base, hook.ID, d.recv.url)
	return nil
}

// drive runs the load through the failover and the switchover, then checks.
func (d *drill) drive(ctx context.Context) error {
	rbHolds, err := d.rollbackHolds(ctx)
	if err != nil {
		return err
	}
	skus := make([]string, 200)
	for i := range skus {
		skus[i] = fmt.Sprintf("D-%03d", i)
	}
	l := &load{shop: d.shop, instances: d.instances, skus: skus, answers: map[string]int{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for c := range d.o.Clients {
		wg.Add(1)
		go func() { defer wg.Done(); l.run(loadCtx, c) }()
	}
	ready := d.watchReady(loadCtx)
	stop := func() {
		stopLoad()
		wg.Wait()
	}
	defer stop()
	d.logf("%d clients of mixed load for %s", d.o.Clients, d.o.Warmup)
	if !sleep(ctx, d.o.Warmup) {
		return ctx.Err()
	}

	var rb struct {
		RollbackID int64 `json:"rollback_id"`
	}
	if err := d.instances[0].must(ctx, http.MethodPost, "/v1/rollbacks", d.ops, "drill-rollback",
		map[string]any{"operator": "drill", "reason": "drill: a rollback in progress at the kill", "sku": "RB-0", "pool": "main"},
		http.StatusAccepted, &rb); err != nil {
		return err
	}
	d.logf("rollback %d of %d holds started", rb.RollbackID, len(rbHolds))
	if err := d.waitRollbackStarted(ctx, rb.RollbackID); err != nil {
		return err
	}

	old, ok, err := d.f.Primary(ctx)
	if err != nil || !ok {
		return fmt.Errorf("no primary before the kill: %v", err)
	}
	killAt := time.Now()
	if err := d.f.KillPostmaster(old); err != nil {
		return err
	}
	if err := d.waitPromotion(ctx, old, killAt); err != nil {
		return err
	}
	if d.o.Rejoin || d.o.Switchover {
		if _, err := d.f.WaitStable(ctx, 3*time.Minute, nil); err != nil {
			return fmt.Errorf("the old primary did not come back as a standby: %w", err)
		}
		d.logf("%s is a standby again, %.1f s after the kill", old.Name, time.Since(killAt).Seconds())
	}
	if !sleep(ctx, d.o.AfterFailover) {
		return ctx.Err()
	}

	var switchAt time.Time
	if d.o.Switchover {
		switchAt = time.Now()
		if err := d.f.Switchover(ctx); err != nil {
			return fmt.Errorf("switchover: %w", err)
		}
		p, err := d.waitSwitchover(ctx, old)
		if err != nil {
			return err
		}
		d.logf("switchover done in %.1f s: %s is primary", time.Since(switchAt).Seconds(), p.Name)
		if !sleep(ctx, d.o.AfterSwitchover) {
			return ctx.Err()
		}
	}
	var conns int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'`).Scan(&conns); err == nil {
		d.note("connections to the primary under load: %d (both instances and the drill's %d)", conns, d.pool.Stat().TotalConns())
	}
	stop()
	stopAt := time.Now()
	d.logf("load stopped")

	acks := l.ackTimes()
	d.res.Acknowledged = len(acks)
	d.res.FailoverWindow = writeGap(acks, killAt, time.Minute)
	if !switchAt.IsZero() {
		d.res.SwitchoverWindow = writeGap(acks, switchAt, time.Minute)
	}
	d.res.Answers = l.answers
	for _, e := range l.serverErrors {
		d.problem("server error: %s", e)
	}
	if l.gaveUp > 0 {
		d.note("%d requests still unanswered (503) after 60 s of retries", l.gaveUp)
	}
	d.checkReady(<-ready, killAt)
	d.check(ctx, l, rbHolds, rb.RollbackID, killAt, stopAt)
	return nil
}

// rollbackHolds places holds on RB-0 for the rollback to release, with a
// TTL long enough that none expires first.
func (d *drill) rollbackHolds(ctx context.Context) ([]uuid.UUID, error) {
	n := d.o.RollbackHolds
	ids := make([]uuid.UUID, n)
	errs := make(chan error, 16)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				var h struct {
					ID uuid.UUID `json:"id"`
				}
				body := map[string]any{"items": []item{{SKU: "RB-0", Quantity: 1}}, "ttl_seconds": 3600}
				if err := d.instances[k%2].must(ctx, http.MethodPost, "/v1/reservations", d.shop, fmt.Sprintf("drill-rb-%d", k), body, http.StatusCreated, &h); err != nil {
					errs <- err
					return
				}
				ids[k] = h.ID
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("holds for the rollback: %w", err)
	}
	return ids, nil
}

// waitRollbackStarted waits until the rollback's first batch is done, so
// that the kill comes while it is in progress.
func (d *drill) waitRollbackStarted(ctx context.Context, id int64) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var rb struct {
			Batches int `json:"batches"`
		}
		if err := d.instances[0].must(ctx, http.MethodGet, fmt.Sprintf("/v1/rollbacks/%d", id), d.ops, "", nil, http.StatusOK, &rb); err != nil {
			return err
		}
		if rb.Batches > 0 {
			return nil
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("rollback %d did not start within a minute", id)
}

// waitPromotion waits until the monitor reports a primary other than old.
func (d *drill) waitPromotion(ctx context.Context, old formation.Node, killAt time.Time) error {
	deadline := killAt.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		p, ok, err := d.f.Primary(ctx)
		if err == nil && ok && p.Name != old.Name {
			d.res.Promotion = time.Since(killAt)
			d.logf("%s promoted %.1f s after the kill", p.Name, d.res.Promotion.Seconds())
			return nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("no standby promoted within 2 minutes of the kill (logs in %s)", d.f.Dir)
}

// waitSwitchover waits until the formation is stable with a primary other
// than the one before the switchover.
func (d *drill) waitSwitchover(ctx context.Context, want formation.Node) (formation.Node, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		p, err := d.f.WaitStable(ctx, 3*time.Minute, nil)
		if err != nil {
			return p, err
		}
		if p.Name == want.Name {
			return p, nil
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return p, ctx.Err()
		}
	}
	return formation.Node{}, fmt.Errorf("the switchover did not make %s primary within 3 minutes", want.Name)
}

// readiness is what /readyz answered, polled on every instance.
type readiness struct {
	at     time.Time
	status int
	body   string
}

// watchReady polls each instance's /readyz every 200 ms until ctx ends.
func (d *drill) watchReady(ctx context.Context) <-chan []readiness {
	out := make(chan []readiness, 1)
	go func() {
		var seen []readiness
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				out <- seen
				return
			case <-t.C:
			}
			for _, in := range d.instances {
				c, cancel := context.WithTimeout(ctx, 3*time.Second)
				status, body, err := in.get(c, "/readyz", "")
				cancel()
				if err != nil {
					status, body = 0, []byte(err.Error())
				}
				seen = append(seen, readiness{at: time.Now(), status: status, body: string(body)})
			}
		}
	}()
	return out
}

// checkReady says how /readyz answered around the kill.
func (d *drill) checkReady(seen []readiness, killAt time.Time) {
	reasons := map[string]int{}
	var first, last time.Time
	for _, r := range seen {
		if r.status == http.StatusOK {
			continue
		}
		if first.IsZero() {
			first = r.at
		}
		last = r.at
		reason := fmt.Sprint(r.status)
		if i := strings.Index(r.body, `"detail":"`); i >= 0 {
			reason += " " + strings.SplitN(r.body[i+10:], `"`, 2)[0]
		}
		reasons[reason]++
	}
	if first.IsZero() {
		d.note("/readyz answered 200 throughout")
		return
	}
	d.note("/readyz not ready from %+.1f s to %+.1f s of the kill: %v", first.Sub(killAt).Seconds(), last.Sub(killAt).Seconds(), reasons)
}

// saveFormationLogs copies the monitor's event log and pg_autoctl's logs
// into LogDir before the formation's directory goes.
func (d *drill) saveFormationLogs() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if events, err := d.f.Events(ctx); err == nil {
		_ = os.WriteFile(filepath.Join(d.o.LogDir, "monitor-events.log"), []byte(strings.Join(events, "\n")+"\n"), 0o644)
	}
	logs, _ := filepath.Glob(filepath.Join(d.f.Dir, "*.log"))
	for _, p := range logs {
		if b, err := os.ReadFile(p); err == nil {
			_ = os.WriteFile(filepath.Join(d.o.LogDir, "pg_autoctl-"+filepath.Base(p)), b, 0o644)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Checkout returns the directory holding go.mod above the working
// directory: the checkout the formation is named after.
func Checkout() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; {
		if _, err := os.Stat(d + "/go.mod"); err == nil {
			return d, nil
		}
		parent := d[:max(strings.LastIndexByte(d, '/'), 1)]
		if parent == d {
			return dir, nil
		}
		d = parent
	}
}
