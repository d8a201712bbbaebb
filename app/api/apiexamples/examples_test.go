package apiexamples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// updateExamples, set, makes TestOpenAPIExamples write the examples it
// records into openapi.json, when any changed beyond ids and times,
// instead of failing: `make examples`.
const updateExamples = "UPDATE_EXAMPLES"

// TestOpenAPIExamples drives a real server (app.New: the API, its job
// workers, River's dashboard) through every operation openapi.json
// documents, in the order a reader meets them, and holds each operation's
// example to the exchange it recorded: the request as a curl command
// (x-codeSamples), its body (the request body's example) and the answer
// (the example of the answer's status). Ids, times, dates, cursors and
// secrets may differ between runs; anything else that differs fails the
// test, so the examples cannot drift from what the server does. With
// UPDATE_EXAMPLES=1 (`make examples`) it writes the recorded examples into
// openapi.json instead.
//
// An operation the scenario does not send fails the test: add a step to
// exampleScenario that sends it with x.example.
func TestOpenAPIExamples(t *testing.T) {
	x := newRecorder(t)
	exampleScenario(x)
	x.finish()
}

// exampleScenario is the story the examples are taken from: stock, holds,
// locations, events, campaigns, rollbacks, alerts, reconciliation, stats,
// health and the operator pages. x.example sends an exchange and keeps it
// as its operation's example; x.send sends one that is only a step.
func exampleScenario(x *recorder) {
	t := x.t

	// Stock.
	x.example("ops", "POST", "/v1/skus/A1/adjustments", `{"delta": 20, "reason": "restock", "ref": "PO-1"}`,
		"Idempotency-Key", "restock-A1")
	x.example("ops", "POST", "/v1/stock/adjustments",
		`{"reason": "stock take", "ref": "ST-7", "lines": [{"sku": "B2", "delta": 12}, {"sku": "C3", "delta": 5}]}`,
		"Idempotency-Key", "stock-take-7")
	x.example("shop", "GET", "/v1/skus?limit=2", nil)
	x.example("ops", "PUT", "/v1/skus/B2/threshold", `{"threshold": 3}`)
	x.example("ops", "PUT", "/v1/skus/C3/limits", `{"max_per_order": 4, "max_per_customer": 2, "customer_window_seconds": 86400}`)
	x.example("shop", "GET", "/v1/skus/C3/limits", nil)
	x.example("ops", "DELETE", "/v1/skus/C3/limits", nil)
	x.example("ops", "PUT", "/v1/bundles/GIFT-BOX",
		`{"components": [{"sku": "B2", "quantity": 1}, {"sku": "C3", "quantity": 2}], "reason": "gift box: a mug and two coasters"}`)
	x.example("shop", "GET", "/v1/bundles/GIFT-BOX", nil)
	x.example("ops", "DELETE", "/v1/bundles/GIFT-BOX", nil)
	x.example("ops", "PUT", "/v1/skus/B2/backorders", `{"below_zero": 5, "horizon_days": 14}`)
	x.example("shop", "GET", "/v1/skus/B2/backorders", nil)
	x.example("ops", "DELETE", "/v1/skus/B2/backorders", nil)
	x.example("ops", "POST", "/v1/skus/C3/pause", `{"reason": "supplier recall"}`)
	x.example("ops", "POST", "/v1/skus/C3/resume", `{"reason": "recall cleared"}`)
	x.example("ops", "POST", "/v1/skus/A1/repair", `{"to": "ledger", "reason": "check the counters", "dry_run": true}`)
	x.example("ops", "POST", "/v1/skus/GALA-0612/units",
		`{"reason": "seating plan", "units": [{"id": "A-1", "group": "A", "position": 1}, {"id": "A-2", "group": "A", "position": 2}, `+
			`{"id": "A-3", "group": "A", "position": 3}]}`,
		"Idempotency-Key", "plan-1")
	x.example("ops", "POST", "/v1/skus/GALA-0612/units/retire", `{"reason": "broken seat", "units": ["A-3"]}`,
		"Idempotency-Key", "retire-A-3")
	x.example("shop", "GET", "/v1/skus/GALA-0612/units?limit=2", nil)
	x.example("ops", "GET", "/v1/stop-sale", nil)
	x.example("ops", "PUT", "/v1/stop-sale", `{"active": true, "reason": "payment provider down"}`)
	x.send("ops", "PUT", "/v1/stop-sale", `{"active": false, "reason": "payments back"}`).want(200)

	// Locations, states, transfers and counts.
	x.example("ops", "POST", "/v1/locations", `{"id": "east", "name": "East warehouse", "priority": 10, "latitude": 53.80, "longitude": -1.55, "pickup": true}`,
		"Idempotency-Key", "location-east")
	x.example("ops", "GET", "/v1/locations/east", nil)
	x.example("ops", "PATCH", "/v1/locations/east", `{"name": "East warehouse (Leeds)"}`)
	x.example("ops", "GET", "/v1/locations", nil)
	x.example("ops", "POST", "/v1/skus/A1/moves", `{"from": "available", "to": "damaged", "quantity": 1, "reason": "dropped"}`,
		"Idempotency-Key", "move-1")
	x.example("ops", "POST", "/v1/skus/A1/counts", `{"counted": 20, "reason": "cycle count"}`, "Idempotency-Key", "count-A1")
	tr := x.example("ops", "POST", "/v1/transfers",
		`{"sku": "A1", "from": "default", "to": "east", "quantity": 4, "reason": "rebalance"}`,
		"Idempotency-Key", "transfer-1").field("id")
	x.example("ops", "GET", "/v1/transfers/"+tr, nil)
	x.example("ops", "POST", "/v1/transfers/"+tr+"/receive", `{"quantity": 3, "reason": "pallet 1"}`,
		"Idempotency-Key", "receive-1")
	x.example("ops", "POST", "/v1/transfers/"+tr+"/close", `{"reason": "one broke on the way"}`)
	tr2 := x.send("ops", "POST", "/v1/transfers", `{"sku": "B2", "from": "default", "to": "east", "quantity": 2, "reason": "rebalance"}`,
		"Idempotency-Key", "transfer-2").want(201).field("id")
	x.example("ops", "POST", "/v1/transfers/"+tr2+"/cancel", `{"reason": "the truck is full"}`)
	x.example("ops", "GET", "/v1/transfers?limit=2", nil)
	in := x.example("ops", "POST", "/v1/inbound",
		`{"supplier_ref": "PO-1042", "location": "east", "expected_on": "2030-01-15", "lines": [{"sku": "A1", "quantity": 10}, {"sku": "B2", "quantity": 4}]}`,
		"Idempotency-Key", "inbound-1").field("id")
	x.example("ops", "GET", "/v1/inbound/"+in, nil)
	x.example("ops", "POST", "/v1/inbound/"+in+"/receive", `{"sku": "A1", "quantity": 6, "reason": "pallet 1 of 2"}`,
		"Idempotency-Key", "inbound-receive-1")
	x.example("ops", "POST", "/v1/inbound/"+in+"/close", `{"reason": "supplier out of B2"}`)
	in2 := x.send("ops", "POST", "/v1/inbound", `{"supplier_ref": "PO-1043", "location": "east", "expected_on": "2030-02-01", "lines": [{"sku": "C3", "quantity": 5}]}`,
		"Idempotency-Key", "inbound-2").want(201).field("id")
	x.example("ops", "POST", "/v1/inbound/"+in2+"/cancel", `{"reason": "order withdrawn"}`)
	x.send("ops", "POST", "/v1/inbound", `{"supplier_ref": "PO-1044", "location": "east", "expected_on": "2030-03-01", "lines": [{"sku": "A1", "quantity": 8}]}`,
		"Idempotency-Key", "inbound-3").want(201)
	x.example("ops", "GET", "/v1/inbound?status=open&limit=2", nil)
	x.example("shop", "GET", "/v1/skus/A1/pickup", nil)

	// Holds.
	hold := x.example("shop", "POST", "/v1/reservations",
		`{"order_ref": "1001", "items": [{"sku": "A1", "quantity": 2}, {"sku": "B2", "quantity": 1}], "ttl_seconds": 900}`,
		"Idempotency-Key", "order-1001").field("id")
	x.example("shop", "GET", "/v1/reservations/"+hold, nil)
	x.example("shop", "POST", "/v1/reservations/"+hold+"/extend", `{"ttl_seconds": 1800}`)
	x.example("shop", "POST", "/v1/reservations/"+hold+"/release", `{"reason": "removed from the cart", "items": [{"sku": "A1", "quantity": 1}]}`,
		"Idempotency-Key", "release-1001-1")
	x.example("shop", "POST", "/v1/reservations/"+hold+"/confirm", nil)
	x.example("shop", "GET", "/v1/reservations?order_ref=1001", nil)
	x.example("shop", "GET", "/v1/skus/A1", nil)
	// A hold past what is on hand, and the receipt that fills it: the
	// ledger shows the promise moving.
	x.send("ops", "POST", "/v1/skus/D4/adjustments", `{"delta": 1, "reason": "first lamp"}`, "Idempotency-Key", "restock-D4").want(200)
	x.send("ops", "PUT", "/v1/skus/D4/backorders", `{"below_zero": 0, "horizon_days": 14}`).want(200)
	due := time.Now().UTC().AddDate(0, 0, 5).Format(time.DateOnly)
	lamps := x.send("ops", "POST", "/v1/inbound", `{"supplier_ref": "PO-1045", "expected_on": "`+due+`", "lines": [{"sku": "D4", "quantity": 5}]}`,
		"Idempotency-Key", "inbound-4").want(201).field("id")
	x.send("shop", "POST", "/v1/reservations", `{"order_ref": "1005", "items": [{"sku": "D4", "quantity": 3}]}`,
		"Idempotency-Key", "order-1005").want(201)
	x.send("ops", "POST", "/v1/inbound/"+lamps+"/receive", `{"sku": "D4", "quantity": 2}`, "Idempotency-Key", "inbound-receive-4").want(200)
	x.example("ops", "GET", "/v1/skus/D4/ledger?limit=3", nil)
	// A payment that comes after its hold expired: the confirm is refused
	// and raises a late_confirmation alert; reinstating holds the lines
	// again.
	late := x.send("shop", "POST", "/v1/reservations", `{"order_ref": "1002", "items": [{"sku": "B2", "quantity": 1}]}`,
		"Idempotency-Key", "order-1002").want(201).field("id")
	x.sql(`UPDATE reservations SET created_at = created_at - interval '901 seconds', expires_at = expires_at - interval '901 seconds'
		WHERE id = $1`, late) // fifteen minutes pass
	// The expiry loop expires it (a confirm that came first would expire
	// it itself, with another release reason, and the example would
	// depend on which came first).
	x.eventually("the expiry loop expires the hold", func() bool {
		return x.send("shop", "GET", "/v1/reservations/"+late, nil).want(200).json()["status"] == "expired"
	})
	x.send("shop", "POST", "/v1/reservations/"+late+"/confirm", nil).want(409)
	x.example("shop", "POST", "/v1/reservations/"+late+"/reinstate", nil)

	// Events and webhooks.
	hook := x.example("ops", "POST", "/v1/webhooks", `{"url": "`+x.receiver+`", "events": ["hold.confirmed", "stock.low"]}`,
		"Idempotency-Key", "webhook-1").field("id")
	x.example("ops", "GET", "/v1/webhooks/"+hook, nil)
	x.example("ops", "GET", "/v1/webhooks", nil)
	x.example("ops", "DELETE", "/v1/webhooks/"+hook, nil)
	x.eventually("the event feed serves the changes", func() bool {
		return len(x.send("ops", "GET", "/v1/events?limit=2", nil).want(200).json()["events"].([]any)) == 2
	})
	x.example("ops", "GET", "/v1/events?limit=2", nil)

	// Campaigns: one that starts now.
	now := time.Now().UTC().Truncate(time.Second)
	x.example("ops", "POST", "/v1/campaigns", fmt.Sprintf(`{"id": "spring", "starts_at": %q, "ends_at": %q, "hold_ttl_seconds": 600, `+
		`"max_per_order": 2, "allotments": [{"sku": "A1", "quantity": 5}]}`, now.Format(time.RFC3339), now.Add(2*time.Hour).Format(time.RFC3339)),
		"Idempotency-Key", "campaign-spring")
	x.eventually("the campaign starts", func() bool {
		return x.send("ops", "GET", "/v1/campaigns/spring", nil).want(200).json()["status"] == "active"
	})
	x.send("shop", "POST", "/v1/reservations", `{"order_ref": "1003", "campaign": "spring", "items": [{"sku": "A1", "quantity": 1}]}`,
		"Idempotency-Key", "order-1003").want(201)
	x.example("ops", "GET", "/v1/campaigns/spring", nil)
	x.example("ops", "POST", "/v1/campaigns/spring/pause", `{"reason": "wrong price"}`)
	x.example("ops", "POST", "/v1/campaigns/spring/resume", `{"reason": "price fixed"}`)
	x.example("ops", "POST", "/v1/campaigns/spring/end", `{"operator": "alice", "reason": "sold out early"}`)
	x.eventually("the campaign is rolled back", func() bool {
		return x.send("ops", "GET", "/v1/campaigns/spring", nil).want(200).json()["status"] == "rolled_back"
	})

	// Rollbacks.
	fraud := x.send("shop", "POST", "/v1/reservations", `{"order_ref": "1004", "items": [{"sku": "B2", "quantity": 2}]}`,
		"Idempotency-Key", "order-1004").want(201).field("id")
	rb := x.example("ops", "POST", "/v1/rollbacks", `{"operator": "alice", "reason": "fraudulent order", "reservation_ids": ["`+fraud+`"]}`,
		"Idempotency-Key", "rollback-1004").field("rollback_id")
	x.eventually("the rollback finishes", func() bool {
		return x.send("ops", "GET", "/v1/rollbacks/"+rb, nil).want(200).json()["status"] == "succeeded"
	})
	x.example("ops", "GET", "/v1/rollbacks/"+rb, nil)
	x.example("ops", "POST", "/v1/rollbacks/"+rb+"/resume", `{"operator": "alice"}`)

	// Alerts: the late payment's.
	alerts := x.example("ops", "GET", "/v1/alerts?status=open", nil).json()["alerts"].([]any)
	require.Len(t, alerts, 1, "the late confirmation's alert, alone")
	alert := fmt.Sprint(alerts[0].(map[string]any)["id"])
	x.example("ops", "POST", "/v1/alerts/"+alert+"/take", `{"operator": "alice"}`)
	x.example("ops", "POST", "/v1/alerts/"+alert+"/ack", `{"operator": "alice"}`)

	// Reconciliation, once those the campaign's end and the rollback
	// asked for have run.
	x.eventually("no other reconciliation is waiting or running", func() bool {
		var n int
		require.NoError(t, x.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM river_job WHERE kind = 'reconcile' AND finalized_at IS NULL)
			+ (SELECT count(*) FROM reconcile_runs WHERE finished_at IS NULL)`).Scan(&n))
		return n == 0
	})
	run := x.example("ops", "POST", "/v1/reconciliations", `{"skus": ["A1", "B2"]}`, "Idempotency-Key", "reconcile-1").field("run_id")
	x.eventually("the reconciliation finishes", func() bool {
		return x.send("ops", "GET", "/v1/reconciliations/"+run, nil).want(200).json()["finished_at"] != nil
	})
	x.example("ops", "GET", "/v1/reconciliations/"+run, nil)
	x.example("ops", "GET", "/v1/reconciliations/latest", nil)

	// Statistics and the daily report.
	x.example("ops", "GET", "/v1/stats?window=1h", nil)
	x.example("ops", "GET", "/v1/reports/daily?date="+time.Now().UTC().Format(time.DateOnly)+"&limit=1", nil)

	// Health, this document and the problem pages.
	x.example("", "GET", "/healthz", nil)
	x.example("", "GET", "/readyz", nil)
	x.example("", "GET", "/metrics", nil).cut(metricsExcerpt)
	x.example("", "GET", "/openapi.json", nil).cut(openapiExcerpt)
	x.example("", "GET", "/docs", nil).cut(htmlHead)
	x.example("", "GET", "/docs/holds", nil).cut(htmlHead)
	x.example("", "GET", "/problems", nil).cut(htmlHead)
	x.example("", "GET", "/problems/out_of_stock", nil).cut(htmlHead)

	// The operator pages: River's job dashboard.
	x.example("ops", "GET", "/ops/jobs/", nil).cut(htmlHead)
}

// recorder runs the server the scenario talks to and keeps its examples.
type recorder struct {
	t    *testing.T
	base string
	pool *pgxpool.Pool
	// keys are the API keys by who sends: "shop", "ops".
	keys   map[string]string
	client *http.Client
	router routers.Router
	// receiver is the URL of a webhook receiver on this machine; examples
	// show it as https://shop.example/hooks/stockhold.
	receiver string
	// shown maps what only this run has (the server's address, the keys,
	// the receiver's URL) to what the examples show instead.
	shown *strings.Replacer
	// examples are the recorded exchanges by operation ("POST /v1/holds").
	examples map[string]*exchange
}

// exchange is one request and its answer.
type exchange struct {
	x           *recorder
	op          string // "METHOD /path/{template}"
	method      string
	curl        string
	requestBody []byte // as sent, JSON; nil without a body
	status      int
	contentType string // the answer's media type, without parameters
	answer      []byte
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(receiver.Close)
	env := map[string]string{"DATABASE_URL": "postgres://unused", "STOCKHOLD_DRAIN_DELAY": "0s",
		"STOCKHOLD_SHUTDOWN_TIMEOUT": "5s", "STOCKHOLD_JOB_STOP_TIMEOUT": "5s", "STOCKHOLD_WEBHOOK_ALLOW_PRIVATE": "true",
		"STOCKHOLD_ROLLBACK_PAUSE": "0s"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	require.NoError(t, err)
	pool := dbtest.New(t)
	a, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, a.Close())
		dbtest.RequireInvariants(t, pool)
	})
	// The keys `make run` makes, so the examples name the same.
	shop, err := auth.Create(ctx, pool, "dev-shop", auth.RoleShop)
	require.NoError(t, err)
	ops, err := auth.Create(ctx, pool, "dev-ops", auth.RoleOps)
	require.NoError(t, err)

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	require.NoError(t, err)
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)

	base := "http://" + ln.Addr().String()
	hook := receiver.URL + "/hooks/stockhold"
	return &recorder{t: t, base: base, pool: pool, keys: map[string]string{"shop": shop, "ops": ops},
		client:   &http.Client{Transport: apitest.Transport(t, nil), Timeout: 30 * time.Second},
		router:   router,
		receiver: hook,
		shown: strings.NewReplacer(hook, "https://shop.example/hooks/stockhold", base, "$BASE",
			shop, "$SHOP", ops, "$OPS"),
		examples: map[string]*exchange{}}
}

// send sends one request: who is "shop", "ops" or "" (no key); body is a
// JSON text or nil; headers are name, value pairs.
func (x *recorder) send(who, method, path string, body any, headers ...string) *exchange {
	x.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		x.t.Fatalf("%s %s: give the body as JSON text", method, path)
	}
	req, err := http.NewRequest(method, x.base+path, bytes.NewReader(raw))
	require.NoError(x.t, err)
	if raw == nil {
		req.Body, req.ContentLength = nil, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+x.keys[who])
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	route, _, err := x.router.FindRoute(req)
	require.NoError(x.t, err, "%s %s is no operation of openapi.json", method, path)
	res, err := x.client.Do(req)
	require.NoError(x.t, err)
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	require.NoError(x.t, err)
	ct, _, _ := strings.Cut(res.Header.Get("Content-Type"), ";")
	return &exchange{x: x, op: method + " " + route.Path, method: method, curl: curl(who, method, path, raw, headers),
		requestBody: raw, status: res.StatusCode, contentType: strings.TrimSpace(ct), answer: answer}
}

// example sends one request, which must succeed, and keeps the exchange as
// its operation's example (one per operation).
func (x *recorder) example(who, method, path string, body any, headers ...string) *exchange {
	x.t.Helper()
	e := x.send(who, method, path, body, headers...)
	require.Less(x.t, e.status, 300, "%s %s: an example is a success: %s", method, path, e.answer)
	_, dup := x.examples[e.op]
	require.False(x.t, dup, "%s has two examples in the scenario", e.op)
	x.examples[e.op] = e
	return e
}

// want requires the answer's status.
func (e *exchange) want(status int) *exchange {
	e.x.t.Helper()
	require.Equal(e.x.t, status, e.status, "%s: %s", e.op, e.answer)
	return e
}

// json is the answer, an object.
func (e *exchange) json() map[string]any {
	e.x.t.Helper()
	var m map[string]any
	require.NoError(e.x.t, json.Unmarshal(e.answer, &m), "%s: %s", e.op, e.answer)
	return m
}

// field is a member of the answer, as text (an id for the next path).
func (e *exchange) field(name string) string {
	e.x.t.Helper()
	v, ok := e.json()[name]
	require.True(e.x.t, ok, "%s: no %s in %s", e.op, name, e.answer)
	return fmt.Sprint(v)
}

// cut keeps, of a long answer, the part the example shows.
func (e *exchange) cut(excerpt func(t *testing.T, answer []byte) []byte) *exchange {
	e.answer = excerpt(e.x.t, e.answer)
	return e
}

// sql changes the database behind the server's back: time passing.
func (x *recorder) sql(query string, args ...any) {
	x.t.Helper()
	_, err := x.pool.Exec(context.Background(), query, args...)
	require.NoError(x.t, err)
}

// eventually waits for what the job workers do.
func (x *recorder) eventually(what string, done func() bool) {
	x.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !done() {
		require.True(x.t, time.Now().Before(deadline), "waited a minute for this: %s", what)
		time.Sleep(50 * time.Millisecond)
	}
}

// curl is the request as the README's commands write it: on one line,
// or when longer than 80 characters with the headers and the body each on
// a line of their own.
func curl(who, method, path string, body []byte, headers []string) string {
	first := "curl -s"
	switch {
	case method == "POST" && body != nil, method == "GET":
	default:
		first += " -X " + method
	}
	url := "$BASE" + path
	if strings.ContainsAny(path, "?&") {
		url = `"` + url + `"`
	}
	parts := []string{first + " " + url}
	var hs []string
	if who != "" {
		hs = append(hs, fmt.Sprintf(`-H "Authorization: Bearer $%s"`, strings.ToUpper(who)))
	}
	for i := 0; i+1 < len(headers); i += 2 {
		hs = append(hs, "-H "+shellQuote(headers[i]+": "+headers[i+1]))
	}
	if len(hs) > 0 {
		parts = append(parts, strings.Join(hs, " "))
	}
	if body != nil {
		parts = append(parts, "--json "+shellQuote(string(body)))
	}
	if line := strings.Join(parts, " "); len(line) <= 80 {
		return line
	}
	return strings.Join(parts, " \\\n  ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The excerpts of answers too long to show whole.

// htmlHead keeps a page's first line and its title.
func htmlHead(t *testing.T, page []byte) []byte {
	lines := strings.Split(string(page), "\n")
	for _, line := range lines {
		if start := strings.Index(line, "<title>"); start >= 0 {
			end := strings.Index(line, "</title>")
			require.Greater(t, end, start, "a title on one line: %s", line)
			return []byte(lines[0] + "\n…\n" + strings.TrimSpace(line[start:end+len("</title>")]) + "\n…")
		}
	}
	t.Fatalf("a page with a title: %.300s", page)
	return nil
}

// metricsExcerpt keeps one family of stockhold's own metrics.
func metricsExcerpt(t *testing.T, text []byte) []byte {
	var kept []string
	for line := range strings.SplitSeq(string(text), "\n") {
		if strings.Contains(line, "stockhold_holds_total") {
			kept = append(kept, line)
		}
	}
	require.NotEmpty(t, kept, "stockhold_holds_total in /metrics")
	return []byte(strings.Join(kept, "\n") + "\n…")
}

// openapiExcerpt keeps the document's version and info, minus the long
// description.
func openapiExcerpt(t *testing.T, doc []byte) []byte {
	n, err := parseNode(doc)
	require.NoError(t, err)
	info := n.get("info")
	require.NotNil(t, info)
	info.del("description")
	out := &node{kind: '{'}
	out.set("openapi", n.get("openapi"))
	out.set("info", info)
	return []byte(out.compact())
}

// finish holds openapi.json's examples to the recorded ones, or writes
// them in (UPDATE_EXAMPLES).
func (x *recorder) finish() {
	t := x.t
	const file = "../openapi.json"
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	doc, err := parseNode(raw)
	require.NoError(t, err)
	update := os.Getenv(updateExamples) != ""
	paths := doc.get("paths")
	var changed []string
	type documented struct {
		op *node
		e  *exchange
	}
	var all []documented
	for i, path := range paths.keys {
		item := paths.items[i]
		for j, method := range item.keys {
			if method == "parameters" || strings.HasPrefix(method, "x-") {
				continue
			}
			op := item.items[j]
			key := strings.ToUpper(method) + " " + path
			e := x.examples[key]
			if e == nil {
				t.Errorf("%s (%s) has no example: add a step that sends it to exampleScenario in app/api/apiexamples/examples_test.go "+
					"(x.example(...)), then write it into openapi.json with `make examples`", key, op.get("operationId").value())
				continue
			}
			all = append(all, documented{op, e})
			diffs := e.compare(op)
			if len(diffs) == 0 {
				continue
			}
			changed = append(changed, key)
			if !update {
				t.Errorf("%s: openapi.json's example is not what the server answers now (ids, times, ages and cursors aside); "+
					"`make examples` writes the new one in (after a merge conflict in the examples, take either side and run it again):\n%s",
					key, strings.Join(diffs, "\n"))
			}
		}
	}
	// One run writes every example, so that they tell one story: the hold
	// the confirm names is the one the hold made.
	if update && len(changed) > 0 {
		for _, d := range all {
			d.e.write(d.op)
		}
		require.NoError(t, os.WriteFile(file, []byte(doc.indented()+"\n"), 0o644))
		t.Logf("%s changed: wrote the examples of all %d operations into %s; run `make generate`", strings.Join(changed, ", "), len(all), file)
	}
	t.Logf("%d operations have their example", len(x.examples))
}

// shownText is what an example shows of s.
func (e *exchange) shownText(s string) string { return e.x.shown.Replace(s) }

// shownJSON is what an example shows of a JSON text, as a node.
func (e *exchange) shownJSON(raw []byte) *node {
	e.x.t.Helper()
	n, err := parseNode([]byte(e.shownText(string(raw))))
	require.NoError(e.x.t, err, "%s: %s", e.op, raw)
	return n
}

// answerNode is the answer as its example holds it: JSON as it is, any
// other answer as a string.
func (e *exchange) answerNode() *node {
	if e.contentType == "application/json" || strings.HasSuffix(e.contentType, "+json") {
		return e.shownJSON(e.answer)
	}
	return &node{kind: '"', str: e.shownText(string(e.answer))}
}

// compare says how op's examples differ from the exchange, if they do.
func (e *exchange) compare(op *node) []string {
	var diffs []string
	differ := func(what string, stored, got any) {
		if s, g := normalized(stored), normalized(got); !reflect.DeepEqual(s, g) {
			sj, _ := json.Marshal(s)
			gj, _ := json.Marshal(g)
			diffs = append(diffs, fmt.Sprintf("  %s\n    openapi.json: %s\n    the server:   %s", what, sj, gj))
		}
	}
	var source any
	if samples := op.get("x-codeSamples"); samples != nil && len(samples.items) > 0 {
		source = samples.items[0].get("source").value()
	}
	differ("request (x-codeSamples)", source, e.shownText(e.curl))
	var stored, got any
	if e.requestBody != nil {
		got = e.shownJSON(e.requestBody).value()
	}
	if body := op.get("requestBody"); body != nil {
		stored = body.get("content").get("application/json").get("example").value()
	}
	differ("request body", stored, got)
	status := fmt.Sprint(e.status)
	responses := op.get("responses")
	for i, code := range responses.keys {
		for j, ct := range responses.items[i].get("content").keysOrNil() {
			media := responses.items[i].get("content").items[j]
			if ex := media.get("example"); ex != nil && (code != status || ct != e.contentType) {
				diffs = append(diffs, fmt.Sprintf("  an example of %s %s, but the example answered %s %s", code, ct, status, e.contentType))
			}
		}
	}
	if len(e.answer) > 0 {
		media := responses.get(status).get("content").get(e.contentType)
		if media == nil {
			diffs = append(diffs, fmt.Sprintf("  the answer is %s %s, which openapi.json does not document", status, e.contentType))
		} else {
			differ("answer "+status, media.get("example").value(), e.answerNode().value())
		}
	}
	return diffs
}

// keysOrNil is an object's keys (nil for nil).
func (n *node) keysOrNil() []string {
	if n == nil {
		return nil
	}
	return n.keys
}

// write sets op's examples to the exchange.
func (e *exchange) write(op *node) {
	sample := &node{kind: '{'}
	sample.set("lang", &node{kind: '"', str: "Shell"})
	sample.set("label", &node{kind: '"', str: "curl"})
	sample.set("source", &node{kind: '"', str: e.shownText(e.curl)})
	op.set("x-codeSamples", &node{kind: '[', items: []*node{sample}})
	if body := op.get("requestBody"); body != nil {
		media := body.get("content").get("application/json")
		if e.requestBody != nil && media != nil {
			media.set("example", e.shownJSON(e.requestBody))
		} else if media != nil {
			media.del("example")
		}
	}
	status := fmt.Sprint(e.status)
	responses := op.get("responses")
	for i, code := range responses.keys {
		content := responses.items[i].get("content")
		for j, ct := range content.keysOrNil() {
			if code != status || ct != e.contentType || len(e.answer) == 0 {
				content.items[j].del("example")
			}
		}
	}
	if len(e.answer) > 0 {
		responses.get(status).get("content").get(e.contentType).set("example", e.answerNode())
	}
}

// What may differ between two runs of the scenario, and how it is written
// when compared.
var (
	uuidRE   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE   = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	dateRE   = regexp.MustCompile(`\b\d{4}-\d\d-\d\d\b`)
	secretRE = regexp.MustCompile(`\bwhsec_[0-9a-f]+`)
	// A path's numeric segment (/v1/rollbacks/12), a JSON id ("id": 12).
	pathIDRE = regexp.MustCompile(`/\d+\b`)
	jsonIDRE = regexp.MustCompile(`"(id|[a-z_]+_id)": ?\d+`)
	// Numbers in words: "job 12", "run 3".
	textIDRE = regexp.MustCompile(`\b(id|job|run|rollback|webhook|alert|transfer|count)( |:|/)\d+\b`)
)

// idKeys name the members whose numbers or strings are ids, positions
// in the event feed or cursors, which differ between runs.
func idKey(key string) bool {
	return key == "id" || strings.HasSuffix(key, "_id") || strings.HasSuffix(key, "_ids") ||
		key == "cursor" || key == "next_cursor" || key == "next" || key == "after"
}

// clockKey names the members whose numbers are read off the clock (how
// long something has been on its way, a lag, a duration in milliseconds),
// which differ between runs with how fast the machine is: a transfer
// cancelled a second later on a loaded machine is a second older. Numbers
// a request or a setting fixes (ttl_seconds, a window's seconds,
// stuck_after_seconds) are not read off the clock, and are compared.
func clockKey(key string) bool {
	return key == "age_seconds" || strings.HasSuffix(key, "_age_seconds") || strings.HasSuffix(key, "_ms") ||
		key == "lag" || strings.HasPrefix(key, "lag_") || strings.Contains(key, "_lag") ||
		key == "elapsed" || strings.HasPrefix(key, "elapsed_") || key == "waited" || key == "uptime_seconds"
}

// normalized is v with what differs between runs written as placeholders.
func normalized(v any) any { return normalize(v, "") }

func normalize(v any, key string) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = normalize(x, k)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = normalize(x, key)
		}
		return s
	case json.Number:
		if idKey(key) {
			return "<id>"
		}
		if clockKey(key) {
			return "<seconds>"
		}
		return v
	case string:
		if idKey(key) && !uuidRE.MatchString(v) {
			return "<id>"
		}
		if clockKey(key) {
			if _, err := time.ParseDuration(v); err == nil {
				return "<duration>"
			}
		}
		return normalizeText(v)
	}
	return v
}

func normalizeText(s string) string {
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	s = timeRE.ReplaceAllString(s, "<time>")
	s = dateRE.ReplaceAllString(s, "<date>")
	s = secretRE.ReplaceAllString(s, "<secret>")
	s = pathIDRE.ReplaceAllString(s, "/<n>")
	s = jsonIDRE.ReplaceAllString(s, `"$1": <n>`)
	s = textIDRE.ReplaceAllString(s, "$1$2<n>")
	return s
}

// TestNormalized: what may differ between runs is written as placeholders,
// and nothing else is.
func TestNormalized(t *testing.T) {
	a := map[string]any{"id": json.Number("12"), "rollback_id": json.Number("3"), "next_cursor": "eyJ4Ijo1fQ",
		"at": "2026-12-01T15:19:41.627108Z", "hold": "0b6f5c1e-7a8e-4d0c-9a51-3f6a2c1d9e10", "quantity": json.Number("2"),
		"text": "run 4 of job 17 on 2026-12-01", "curl": `curl -s $BASE/v1/rollbacks/12 --json '{"run_id": 5}'`}
	b := map[string]any{"id": json.Number("13"), "rollback_id": json.Number("4"), "next_cursor": "eyJ4Ijo2fQ",
		"at": "2026-12-02T09:00:00Z", "hold": "1c7f5c1e-7a8e-4d0c-9a51-3f6a2c1d9e11", "quantity": json.Number("2"),
		"text": "run 5 of job 18 on 2026-12-02", "curl": `curl -s $BASE/v1/rollbacks/13 --json '{"run_id": 6}'`}
	require.Equal(t, normalized(a), normalized(b))
	b["quantity"] = json.Number("3")
	require.NotEqual(t, normalized(a), normalized(b), "a quantity is no id")
}

// TestNormalizedClock: numbers read off the clock are written as
// placeholders, so a transfer cancelled seconds later on a loaded machine
// shows the same example; numbers a request or a setting fixes are not.
func TestNormalizedClock(t *testing.T) {
	a := map[string]any{"age_seconds": json.Number("0"), "expiry_lag_max_ms": json.Number("12.5"), "waited": "1.2s",
		"ttl_seconds": json.Number("900"), "seconds": json.Number("3600"), "stuck_after_seconds": json.Number("60")}
	b := map[string]any{"age_seconds": json.Number("4"), "expiry_lag_max_ms": json.Number("830"), "waited": "3m2s",
		"ttl_seconds": json.Number("900"), "seconds": json.Number("3600"), "stuck_after_seconds": json.Number("60")}
	require.Equal(t, normalized(a), normalized(b))
	for _, k := range []string{"ttl_seconds", "seconds", "stuck_after_seconds"} {
		c := maps.Clone(b)
		c[k] = json.Number("1800")
		require.NotEqual(t, normalized(a), normalized(c), "%s is set, not read off the clock", k)
	}
	b["age_seconds"] = "4"
	require.NotEqual(t, normalized(a), normalized(b), "an age that is no number is no age")
}
