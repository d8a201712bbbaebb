package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// env is the whole service, workers and all, on its own database, with an
// ops key (named alice) and a shop key.
type env struct {
	t    *testing.T
	base string
	pool *pgxpool.Pool
	app  *app.App
	ops  string
	shop string
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.NewWithConfig(t, app.Instrument) // its statements timed, as a served instance's are
	cfg, err := config.Load(func(k string) string {
		return map[string]string{
			"DATABASE_URL": "postgres://unused", "STOCKHOLD_WORKERS": "4", "STOCKHOLD_ROLLBACK_PAUSE": "10ms",
			"STOCKHOLD_RETRY_BASE": "10ms", "STOCKHOLD_WATCH_INTERVAL": "200ms",
		}[k]
	})
	require.NoError(t, err)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
		dbtest.RequireInvariants(t, pool)
	})
	ops, err := auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err := auth.Create(ctx, pool, "shop-a", auth.RoleShop)
	require.NoError(t, err)
	return &env{t: t, base: "http://" + ln.Addr().String(), pool: pool, app: a, ops: ops, shop: shop}
}

func (e *env) hold(key, orderRef, sku string, q int64) uuid.UUID {
	e.t.Helper()
	r, _, err := e.app.Inventory.Hold(context.Background(), inventory.HoldRequest{
		Client: "shop-a", IdempotencyKey: key, OrderRef: orderRef, Items: []inventory.Item{{SKU: sku, Quantity: q}},
	})
	require.NoError(e.t, err)
	return r.ID
}

func (e *env) scalar(sql string, args ...any) string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&s))
	return s
}

// scalarFor is scalar for an Eventually condition: it reports an error to
// c, the condition's CollectT.
func (e *env) scalarFor(c assert.TestingT, sql string, args ...any) string {
	var s string
	assert.NoError(c, e.pool.QueryRow(context.Background(), sql, args...).Scan(&s))
	return s
}

// browser is a cookie-keeping HTTP client that does not follow redirects,
// so each answer can be checked.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, client: &http.Client{
		Jar:           jar,
		Transport:     apitest.Transport(t, nil),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, set func(*http.Request)) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if set != nil {
		set(req)
	}
	res, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return answer{status: res.StatusCode, header: res.Header, body: string(raw)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the first form on page.
func (b *browser) csrf(page string) string {
	b.t.Helper()
	a := b.do("GET", page, nil, nil)
	require.Equal(b.t, http.StatusOK, a.status, a.body)
	m := csrfField.FindStringSubmatch(a.body)
	require.NotNil(b.t, m, "no CSRF token on %s", page)
	return m[1]
}

// signIn signs in with key the way the sign-in form does.
func (b *browser) signIn(key string) {
	b.t.Helper()
	token := b.csrf("/ops/signin")
	a := b.do("POST", "/ops/signin", url.Values{"csrf": {token}, "key": {key}, "next": {"/ops/"}}, b.sameSite)
	require.Equal(b.t, http.StatusSeeOther, a.status, a.body)
	require.Equal(b.t, "/ops/", a.header.Get("Location"))
}

// sameSite marks a request as a browser marks a post from this site.
func (b *browser) sameSite(r *http.Request) { r.Header.Set("Origin", b.base) }

func TestSignInAndSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := newBrowser(t, e.base)

	a := b.do("GET", "/ops/", nil, nil)
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/ops/signin?next=%2Fops%2F", a.header.Get("Location"))

	// A shop key cannot sign in; a wrong key neither.
	for key, want := range map[string]int{e.shop: http.StatusForbidden, "sh_nope": http.StatusUnauthorized} {
		token := b.csrf("/ops/signin")
		a = b.do("POST", "/ops/signin", url.Values{"csrf": {token}, "key": {key}}, b.sameSite)
		require.Equal(t, want, a.status)
	}
	b.signIn(e.ops)
	var cookie *http.Cookie
	for _, c := range b.client.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(e.base, "http://"), Path: "/ops/"}) {
		if c.Name == "stockhold_session" {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "signing in sets the session cookie")
	require.Equal(t, "1", e.scalar(`SELECT count(*)::text FROM ops_sessions`))

	// Every page forbids framing and sets a CSP, signed in or not.
	for _, path := range []string{"/ops/", "/ops/skus", "/ops/holds", "/ops/campaigns", "/ops/rollbacks", "/ops/alerts",
		"/ops/reconciliations", "/ops/archives", "/ops/signin", "/ops/nowhere"} {
		a := b.do("GET", path, nil, nil)
		require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, a.status, path)
		require.Equal(t, "DENY", a.header.Get("X-Frame-Options"), path)
		require.Contains(t, a.header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.NotEmpty(t, a.header.Get("X-Request-Id"), path)
	}

	// The session opens River's dashboard; without it, Basic auth does.
	require.Equal(t, http.StatusOK, b.do("GET", "/ops/jobs/", nil, nil).status)
	require.Equal(t, http.StatusOK, b.do("GET", "/ops/jobs/api/jobs?state=available", nil, nil).status, "River UI's own API too")
	anon := newBrowser(t, e.base)
	require.Equal(t, http.StatusUnauthorized, anon.do("GET", "/ops/jobs/", nil, nil).status)
	require.Equal(t, http.StatusOK, anon.do("GET", "/ops/jobs/", nil, func(r *http.Request) { r.SetBasicAuth("x", e.ops) }).status)
	// The bearer token works on console pages too (scripts).
	require.Equal(t, http.StatusOK, anon.do("GET", "/ops/", nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+e.ops) }).status)

	// Signing out ends the session on every instance: the row is gone.
	token := b.csrf("/ops/")
	a = b.do("POST", "/ops/signout", url.Values{"csrf": {token}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "0", e.scalar(`SELECT count(*)::text FROM ops_sessions`))
	replay := newBrowser(t, e.base)
	a = replay.do("GET", "/ops/", nil, func(r *http.Request) { r.AddCookie(cookie) })
	require.Equal(t, http.StatusSeeOther, a.status, "a signed-out session cookie opens nothing")
}

func TestSessionSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	// A second instance on the same database (as after a restart, or behind
	// a load balancer) takes the same cookie.
	cfg, err := config.Load(func(k string) string { return map[string]string{"DATABASE_URL": "postgres://unused"}[k] })
	require.NoError(t, err)
	other, err := app.New(cfg, e.pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	for _, c := range b.client.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(e.base, "http://"), Path: "/ops/"}) {
		if c.Name != "stockhold_session" {
			continue
		}
		req, err := http.NewRequest("GET", "/ops/", nil)
		require.NoError(t, err)
		req.AddCookie(c)
		rec := &recorder{header: http.Header{}}
		other.HTTP.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.status)
		return
	}
	t.Fatal("no session cookie")
}

type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(s int)           { r.status = s }

// TestCrossSiteFormPostsAreRefused sends the pause form the ways a hostile
// page could (no token, a wrong one, from another origin) and checks each
// is a 403 that changes nothing, then sends it properly to show the same
// request does work.
func TestCrossSiteFormPostsAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dbtest.StockIn(e.t, e.pool, "A1", 10)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	token := b.csrf("/ops/skus/A1")
	ledgerRows := func() string { return e.scalar(`SELECT count(*)::text FROM ledger WHERE sku = 'A1'`) }
	before := ledgerRows()

	form := func(csrf string) url.Values {
		v := url.Values{"pool": {"main"}, "reason": {"hostile"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	foreign := func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }
	foreignReferer := func(r *http.Request) { r.Header.Set("Referer", "https://evil.example/page") }
	for name, c := range map[string]struct {
		form url.Values
		set  func(*http.Request)
	}{
		"missing token":          {form(""), b.sameSite},
		"wrong token":            {form("not-the-token"), b.sameSite},
		"foreign origin":         {form(token), foreign},
		"foreign referer":        {form(token), foreignReferer},
		"null origin":            {form(token), func(r *http.Request) { r.Header.Set("Origin", "null") }},
		"missing token, no hdrs": {form(""), nil},
	} {
		a := b.do("POST", "/ops/skus/A1/pause", c.form, c.set)
		require.Equal(t, http.StatusForbidden, a.status, name)
		require.Equal(t, "on_sale", e.scalar(`SELECT status FROM stock WHERE sku = 'A1'`), name)
		require.Equal(t, before, ledgerRows(), name)
	}

	// Basic auth is sent by browsers on their own: without the session's
	// token it cannot post either.
	basic := newBrowser(t, e.base)
	a := basic.do("POST", "/ops/skus/A1/pause", form("whatever"), func(r *http.Request) { r.SetBasicAuth("x", e.ops) })
	require.Equal(t, http.StatusForbidden, a.status)
	// A state-changing request to River's dashboard from another site is
	// not authenticated by the session cookie.
	a = b.do("POST", "/ops/jobs/api/jobs/cancel", nil, foreign)
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Equal(t, "on_sale", e.scalar(`SELECT status FROM stock WHERE sku = 'A1'`))

	// The same form, from this site with the token: paused, by alice.
	a = b.do("POST", "/ops/skus/A1/pause", form(token), b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "paused", e.scalar(`SELECT status FROM stock WHERE sku = 'A1'`))
	require.Equal(t, "alice alice", e.scalar(`SELECT actor || ' ' || actor_key FROM ledger WHERE sku = 'A1' AND kind = 'pause'`),
		"the actor and the key that signed in")
}

// TestEveryPageRendersWithData fills the database with a bit of everything
// (a campaign ended from the console, a dry run, a reconciliation with a
// finding, alerts) and checks every page renders whole, since a template
// that fails halfway would still answer 200.
func TestEveryPageRendersWithData(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dbtest.StockIn(e.t, e.pool, "A1", 50)
	dbtest.StockIn(e.t, e.pool, "B_2%", 5) // LIKE's wildcards are matched literally
	held := e.hold("k1", "order-1", "A1", 2)
	other := e.hold("k2", "order-2", "A1", 1)

	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	// A restock with a reference, which the SKU's ledger shows.
	_, err := e.app.Inventory.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 1, Reason: "restock", Ref: "PO-7", Actor: "alice"})
	require.NoError(t, err)
	api := func(path, key, body string) int {
		return b.do("POST", path, nil, func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+e.ops)
			r.Header.Set("Idempotency-Key", key)
			r.Header.Set("Content-Type", "application/json")
			r.Body = io.NopCloser(strings.NewReader(body))
			r.ContentLength = int64(len(body))
		}).status
	}
	start, end := time.Now().Add(-time.Second).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	require.Equal(t, http.StatusCreated, api("/v1/campaigns", "c1",
		`{"id": "flash", "starts_at": "`+start+`", "ends_at": "`+end+`", "hold_ttl_seconds": 60, "allotments": [{"sku": "A1", "quantity": 10}]}`))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "active", e.scalarFor(c, `SELECT status FROM campaigns WHERE id = 'flash'`))
	}, 20*time.Second, 50*time.Millisecond)
	_, _, err = e.app.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: "k3", Campaign: "flash",
		Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.NoError(t, err)

	// Pause every pool of the campaign from its page, then resume them.
	token := b.csrf("/ops/campaigns/flash")
	a := b.do("POST", "/ops/campaigns/flash/pause", url.Values{"csrf": {token}, "reason": {"price error"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "paused alice price error", e.scalar(`SELECT s.status || ' ' || l.actor || ' ' || l.reason FROM stock s
		JOIN ledger l ON l.sku = s.sku AND l.pool = s.pool AND l.kind = 'pause' WHERE s.pool = 'flash'`))
	a = b.do("POST", "/ops/campaigns/flash/resume", url.Values{"csrf": {token}, "reason": {"price fixed"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "on_sale", e.scalar(`SELECT status FROM stock WHERE pool = 'flash'`))

	// Repair a pool's books from its page: the preview changes nothing and
	// offers the repair, which applies it.
	_, err = e.pool.Exec(ctx, `UPDATE stock SET total = total + 2, available = available + 2 WHERE sku = 'B_2%' AND pool = 'main'`)
	require.NoError(t, err)
	token = b.csrf("/ops/skus/B_2%25")
	a = b.do("POST", "/ops/skus/B_2%25/repair", url.Values{"csrf": {token}, "pool": {"main"}, "to": {"ledger"}, "reason": {"hand edit"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "7", e.scalar(`SELECT total::text FROM stock WHERE sku = 'B_2%'`), "a preview changes nothing")
	preview := b.do("GET", a.header.Get("Location"), nil, nil).body
	require.Contains(t, preview, "would write total -2, available -2")
	require.Contains(t, preview, `name="apply" value="true"`)
	expected := regexp.MustCompile(`name="expected" value="([^"]+)"`).FindStringSubmatch(preview)
	require.Len(t, expected, 2, "the apply form carries the previewed difference")
	require.Equal(t, "-2,-2,0,0,0,0,0,0,0,0", expected[1])
	apply := url.Values{"csrf": {token}, "pool": {"main"}, "to": {"ledger"}, "reason": {"hand edit"}, "apply": {"true"}, "expected": {expected[1]}}
	// The counters move again after the preview: the apply writes nothing
	// rather than more than the preview showed.
	_, err = e.pool.Exec(ctx, `UPDATE stock SET total = total + 500, available = available + 500 WHERE sku = 'B_2%' AND pool = 'main'`)
	require.NoError(t, err)
	a = b.do("POST", "/ops/skus/B_2%25/repair", apply, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Contains(t, b.do("GET", a.header.Get("Location"), nil, nil).body, "moved since the preview")
	require.Equal(t, "507", e.scalar(`SELECT total::text FROM stock WHERE sku = 'B_2%'`), "nothing applied")
	_, err = e.pool.Exec(ctx, `UPDATE stock SET total = total - 500, available = available - 500 WHERE sku = 'B_2%' AND pool = 'main'`)
	require.NoError(t, err)
	delete(apply, "expected")
	a = b.do("POST", "/ops/skus/B_2%25/repair", apply, b.sameSite)
	require.Equal(t, "7", e.scalar(`SELECT total::text FROM stock WHERE sku = 'B_2%'`), "an apply without its preview's difference is refused")
	apply.Set("expected", expected[1])
	a = b.do("POST", "/ops/skus/B_2%25/repair", apply, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "5", e.scalar(`SELECT total::text FROM stock WHERE sku = 'B_2%'`))
	require.Contains(t, b.do("GET", a.header.Get("Location"), nil, nil).body, "0 high-risk findings")

	// A released hold offers reinstating it (a late payment).
	late := e.hold("late", "order-late", "A1", 1)
	_, err = e.app.Inventory.Release(ctx, late, inventory.Caller{Name: "shop-a"}, "")
	require.NoError(t, err)
	require.Contains(t, b.do("GET", "/ops/holds/"+late.String(), nil, nil).body, "/reinstate")
	a = b.do("POST", "/ops/holds/"+late.String()+"/reinstate", url.Values{"csrf": {token}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "held order-late", e.scalar(`SELECT status || ' ' || order_ref FROM reservations WHERE idempotency_key = $1`, "↻"+late.String()))

	// End the campaign from its page.
	token = b.csrf("/ops/campaigns/flash")
	a = b.do("POST", "/ops/campaigns/flash/end", url.Values{"csrf": {token}, "reason": {"sold out early"}}, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "alice alice sold out early", e.scalar(`SELECT ended_by || ' ' || ended_key || ' ' || end_reason FROM campaigns WHERE id = 'flash'`))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "rolled_back", e.scalarFor(c, `SELECT status FROM campaigns WHERE id = 'flash'`))
	}, 20*time.Second, 50*time.Millisecond)
	// The ended campaign's empty, paused pool is history: on its page,
	// and nowhere else (not the SKU's pools with a Resume button, not the
	// stock left or the switches in force); its scheduled end left the job
	// backlog when it ended early.
	require.Contains(t, b.do("GET", "/ops/campaigns/flash", nil, nil).body, `data-label="SKU">A1`)
	require.NotContains(t, b.do("GET", "/ops/skus/A1", nil, nil).body, `value="flash"`)
	ended := b.do("GET", "/ops/", nil, nil).body
	require.NotContains(t, section(t, ended, "stock"), "flash")
	require.NotContains(t, section(t, ended, "switches"), "flash")
	require.NotContains(t, section(t, ended, "backlog"), "campaign_end")

	// Reconcile now, from the console.
	page := b.do("GET", "/ops/reconciliations", nil, nil)
	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(page.body)[1]
	form := url.Values{"csrf": {csrfField.FindStringSubmatch(page.body)[1]}, "nonce": {nonce}}
	a = b.do("POST", "/ops/reconciliations", form, b.sameSite)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	runPage := a.header.Get("Location")
	again := b.do("POST", "/ops/reconciliations", form, b.sameSite)
	require.Equal(t, runPage, again.header.Get("Location"), "the same form sent twice requests one run")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "succeeded", e.scalar(`SELECT coalesce(max(status), '') FROM reconcile_runs WHERE trigger = 'http'`))
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, "1", e.scalar(`SELECT count(*)::text FROM reconcile_runs WHERE trigger = 'http'`))
	// A run that found books out of balance says so where its status is
	// shown, never "succeeded" (which reads as all is well).
	var risky int64
	require.NoError(t, e.pool.QueryRow(ctx, `INSERT INTO reconcile_runs (trigger, status, started_at, finished_at, rows_checked, high_risk)
		VALUES ('periodic', 'succeeded', now(), now(), 2, 1) RETURNING id`).Scan(&risky))
	for _, path := range []string{"/ops/reconciliations", fmt.Sprintf("/ops/reconciliations/%d", risky), "/ops/"} {
		body := b.do("GET", path, nil, nil).body
		require.Contains(t, body, "found books out of balance (1 high-risk finding)", path)
	}
	require.NotContains(t, section(t, b.do("GET", "/ops/", nil, nil).body, "reconciliation"), "succeeded")
	// A finding of each class, as the run's page lists them (reconciliation
	// makes them in its own tests; here only their rendering matters).
	_, err = e.pool.Exec(ctx, `
		INSERT INTO reconcile_findings (run_id, class, kind, sku, pool, reservation_id, job_id, details, action)
		SELECT id, c.class, c.kind, 'A1', 'main', $1, 7, '{"held": 1}', 'looked at'
		FROM reconcile_runs, (VALUES ('auto_fix', 'stuck_hold'), ('retry', 'job_retried'), ('high_risk', 'counters_vs_ledger')) c(class, kind)
		WHERE trigger = 'http'`, other)
	require.NoError(t, err)

	// A webhook (its cursor past every event, so nothing is sent to it).
	_, err = e.pool.Exec(ctx, `INSERT INTO webhooks (url, events, secret, created_by, cursor_xid, cursor_id, cursor_n, failures, last_error)
		VALUES ('https://hooks.example/stockhold', '{stock.low}', 'whsec_x', 'alice', '9223372036854775807', 0, 0, 2, 'answered 503')`)
	require.NoError(t, err)
	overview := b.do("GET", "/ops/", nil, nil).body
	require.Contains(t, overview, "https://hooks.example/stockhold")
	require.Contains(t, overview, `title="answered 503"`)
	// This instance's hot SKUs (A1 was asked for) and its statements,
	// each named by its query, slowest mean first.
	hot := section(t, overview, "hot")
	require.Contains(t, hot, `<a href="/ops/skus/A1">A1</a>`)
	slowest := section(t, overview, "slowest")
	require.Regexp(t, `<code>[A-Z][A-Za-z]+</code></td><td data-label="calls">[1-9][0-9]*</td><td data-label="mean">[0-9.]+ ms</td>`, slowest)

	for _, path := range []string{
		"/ops/", "/ops/skus?q=A", "/ops/skus?q=B_2%25", "/ops/skus/A1", "/ops/skus/A1?before=3", "/ops/skus/B_2%25",
		"/ops/holds", "/ops/holds?order_ref=order-1", "/ops/holds/" + held.String(), "/ops/holds/" + other.String(),
		"/ops/campaigns", "/ops/campaigns/flash", "/ops/rollbacks", "/ops/rollbacks/1",
		"/ops/alerts", "/ops/alerts?status=all", "/ops/reconciliations", runPage,
	} {
		a := b.do("GET", path, nil, nil)
		require.Equal(t, http.StatusOK, a.status, path)
		require.True(t, strings.HasSuffix(strings.TrimSpace(a.body), "</html>"), "%s is cut short:\n%s", path, a.body)
	}
	// Counts read "1 hold", "2 holds": the campaign's rollback released
	// one hold in one batch, a run checked rows.
	one := regexp.MustCompile(`\b1 (holds|units|batches|rows|alerts|rollbacks|pools|findings)\b`)
	tag := regexp.MustCompile(`<[^>]+>`)
	for _, path := range []string{"/ops/", "/ops/campaigns/flash", "/ops/rollbacks/1", "/ops/skus/A1", "/ops/reconciliations"} {
		text := tag.ReplaceAllString(b.do("GET", path, nil, nil).body, "")
		require.Empty(t, one.FindAllString(text, -1), "%s", path)
	}
	require.Contains(t, b.do("GET", "/ops/campaigns/flash", nil, nil).body, "released in 1 batch;")
	require.Contains(t, b.do("GET", "/ops/skus/A1", nil, nil).body, `<td data-label="ref">PO-7</td>`, "the ledger shows each movement's ref")
	require.Contains(t, b.do("GET", "/ops/skus?q=B_2%25", nil, nil).body, `href="/ops/skus/B_2%25"`)
	require.NotContains(t, b.do("GET", "/ops/skus?q=B_", nil, nil).body, `href="/ops/skus/A1"`)
	for _, kind := range []string{"stuck_hold", "job_retried", "counters_vs_ledger"} {
		require.Contains(t, b.do("GET", runPage, nil, nil).body, kind)
	}
	for path, want := range map[string]int{
		"/ops/holds/not-a-uuid": http.StatusNotFound, "/ops/holds/" + uuid.NewString(): http.StatusNotFound,
		"/ops/skus/NOPE": http.StatusNotFound, "/ops/campaigns/nope": http.StatusNotFound, "/ops/rollbacks/999": http.StatusNotFound,
		"/ops/skus/A1?before=x": http.StatusBadRequest,
	} {
		require.Equal(t, want, b.do("GET", path, nil, nil).status, path)
	}
}

// TestBadQueryParametersAreRefused: query parameters and path values that
// are not UTF-8 or hold control characters got to PostgreSQL, which refused
// them (22021), and the console answered 500. Each must be a 4xx page.
func TestBadQueryParametersAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dbtest.StockIn(e.t, e.pool, "A1", 10)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	for _, path := range []string{
		"/ops/skus?q=%00", "/ops/skus?q=%FF", "/ops/skus?q=A%FF", "/ops/skus?q=" + strings.Repeat("S", 65),
		"/ops/holds?order_ref=%FF%FE", "/ops/holds?order_ref=o%00", "/ops/holds?order_ref=o-1%E2%80%8B", "/ops/holds?id=%FF",
		"/ops/alerts?status=%FF", "/ops/skus/A1?before=%FF", "/ops/skus/%FF", "/ops/skus/A%00", "/ops/campaigns/%FF",
		"/ops/holds/%FF", "/ops/rollbacks/%FF", "/ops/reconciliations/%00", "/ops/skus?%FF=1",
		"/ops/archives/%FF", "/ops/archives/ledger_2026_01?sku=%FF", "/ops/archives/ledger_2026_01?after=0",
	} {
		a := b.do("GET", path, nil, nil)
		require.True(t, a.status >= 400 && a.status < 500, "%s answered %d:\n%s", path, a.status, a.body)
		require.True(t, strings.HasSuffix(strings.TrimSpace(a.body), "</html>"), "%s is a page", path)
	}
	a := b.do("GET", "/ops/signin?next=%FF", nil, nil)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Equal(t, http.StatusOK, b.do("GET", "/ops/skus?q=A", nil, nil).status, "a good search still works")
}

// section returns the <section id="id"> of page.
func section(t *testing.T, page, id string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<section id="`+id+`">`)
	require.True(t, ok, "no section %s", id)
	body, _, ok := strings.Cut(rest, "</section>")
	require.True(t, ok)
	return body
}

// TestSKUPageShowsShort: after a forced count below what holds hold, the
// SKU's page says how many held units are missing, in the pool's counters,
// the by-location table and the count's ledger row; once their holds end
// and the units have left the books, it says nothing more.
func TestSKUPageShowsShort(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dbtest.StockIn(e.t, e.pool, "S1", 5)
	id := e.hold("k1", "order-1", "S1", 4)
	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	count := b.do("POST", "/v1/skus/S1/counts", nil, func(r *http.Request) {
		body := `{"counted": 2, "force": true, "reason": "stocktake"}`
		r.Header.Set("Authorization", "Bearer "+e.ops)
		r.Header.Set("Idempotency-Key", "count-1")
		r.Header.Set("Content-Type", "application/json")
		r.Body = io.NopCloser(strings.NewReader(body))
		r.ContentLength = int64(len(body))
	})
	require.Equal(t, http.StatusOK, count.status, count.body)

	page := b.do("GET", "/ops/skus/S1", nil, nil)
	require.Equal(t, http.StatusOK, page.status)
	require.Regexp(t, `short \(of reserved\)</dt><dd>2</dd>`, page.body)
	require.Contains(t, page.body, "short &#43;2", "the count's ledger row")

	_, err := e.app.Inventory.Release(context.Background(), id, inventory.Caller{Name: "shop-a"}, "cancelled")
	require.NoError(t, err)
	page = b.do("GET", "/ops/skus/S1", nil, nil)
	require.NotContains(t, page.body, "short (of reserved)")
	require.Contains(t, page.body, "short -2", "the shortfall's ledger row")
}

// TestLocationsPageShowsWhatIsDue: the locations page lists the open
// supplier notices by the day they are expected, a late one first and
// marked late, each line with what is still expected of what was ordered;
// a received one is gone from it.
func TestLocationsPageShowsWhatIsDue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	expect := func(name string, days int, lines ...stock.NewInboundLine) stock.Inbound {
		i, _, err := e.app.Inventory.CreateInboundOnce(ctx, idempotency.NewKey("alice", name), stock.NewInbound{SupplierRef: name,
			ExpectedOn: time.Now().UTC().AddDate(0, 0, days).Format(time.DateOnly), Lines: lines, Actor: "alice"})
		require.NoError(t, err)
		return i
	}
	expect("PO-soon", 3, stock.NewInboundLine{SKU: "TEA", Quantity: 10})
	late := expect("PO-late", 1, stock.NewInboundLine{SKU: "CUP", Quantity: 4})
	_, err := e.pool.Exec(ctx, `UPDATE inbound SET expected_on = current_date - 2 WHERE id = $1`, late.ID)
	require.NoError(t, err)
	done := expect("PO-done", 1, stock.NewInboundLine{SKU: "POT", Quantity: 1})
	_, err = e.app.Inventory.ReceiveInbound(ctx, stock.InboundStep{ID: done.ID, SKU: "POT", Quantity: 1, Actor: "alice"})
	require.NoError(t, err)
	_, err = e.app.Inventory.ReceiveInbound(ctx, stock.InboundStep{ID: late.ID, SKU: "CUP", Quantity: 1, Actor: "alice"})
	require.NoError(t, err)

	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	page := b.do("GET", "/ops/locations", nil, nil)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, "Due from suppliers")
	lateAt, soonAt := strings.Index(page.body, "PO-late"), strings.Index(page.body, "PO-soon")
	require.Positive(t, lateAt)
	require.Greater(t, soonAt, lateAt, "the late one first")
	require.Contains(t, page.body[lateAt:soonAt], `<span class="badge critical">late</span>`)
	require.NotContains(t, page.body[soonAt:], `badge critical">late`)
	require.Contains(t, page.body, `CUP</a> 3 of 4`)
	require.Contains(t, page.body, `TEA</a> 10 of 10`)
	require.NotContains(t, page.body, "PO-done", "received: nothing is due")
}
