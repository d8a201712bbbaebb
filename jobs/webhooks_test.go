package jobs_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/webhooks"
)

// receiver is a webhook endpoint in the test. It verifies each delivery's
// signature itself (as a receiver following the README would), answers
// with fail's status while fail returns one, and records what it
// acknowledged.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret atomic.Value // string, once known
	// fail returns the status to answer the n-th request (from 1) with,
	// or 0 to take it.
	fail func(n int) int

	mu       sync.Mutex
	requests int
	taken    []events.Event
	bad      []string // what failed verification
}

func newReceiver(t *testing.T, fail func(n int) int) *receiver {
	r := &receiver{t: t, fail: fail}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if r.fail != nil {
		if status := r.fail(r.requests); status != 0 {
			w.WriteHeader(status)
			return
		}
	}
	if why := r.verify(req, body); why != "" {
		r.bad = append(r.bad, why)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var d struct {
		Events []events.Event `json:"events"`
	}
	if err := json.Unmarshal(body, &d); err != nil || len(d.Events) == 0 || len(d.Events) > webhooks.BatchSize {
		r.bad = append(r.bad, fmt.Sprintf("body %s: %v", body, err))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.taken = append(r.taken, d.Events...)
	w.WriteHeader(http.StatusNoContent)
}

// verify checks Stockhold-Signature as the README tells receivers to.
func (r *receiver) verify(req *http.Request, body []byte) string {
	secret, _ := r.secret.Load().(string)
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		return "not a JSON POST"
	}
	var ts, v1 string
	for _, part := range strings.Split(req.Header.Get(webhooks.SignatureHeader), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
		return "bad t " + ts
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(v1)) {
		return "signature " + v1 + " does not verify"
	}
	return ""
}

func (r *receiver) got() ([]events.Event, int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Event(nil), r.taken...), r.requests, append([]string(nil), r.bad...)
}

// register makes a webhook for the receiver and gives it the secret.
func (b *bundle) register(t *testing.T, r *receiver, types ...string) webhooks.Created {
	t.Helper()
	var w webhooks.Created
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) (err error) {
		w, err = b.webhooks.CreateTx(context.Background(), tx, webhooks.Register{URL: r.srv.URL + "/hooks", Events: types, Actor: "alice"})
		return err
	}))
	require.True(t, strings.HasPrefix(w.Secret, "whsec_"))
	r.secret.Store(w.Secret)
	return w
}

// traffic makes events of several types on A1 and B2.
func (b *bundle) traffic(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	three := int64(3)
	_, err := b.inv.SetThreshold(ctx, stock.Threshold{SKU: "A1", Threshold: &three, Actor: "alice"})
	require.NoError(t, err)
	for i := range n {
		h, _, err := b.inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprint("t", i),
			Items: []inventory.Item{{SKU: "A1", Quantity: 1}, {SKU: "B2", Quantity: 1}}})
		require.NoError(t, err)
		if i%2 == 0 {
			_, err = b.inv.Confirm(ctx, h.ID, inventory.Caller{Name: "shop"})
		} else {
			_, err = b.inv.Release(ctx, h.ID, inventory.Caller{Name: "shop"}, "")
		}
		require.NoError(t, err)
	}
}

// from is where a webhook's deliveries begin: its cursor when it was made,
// less the events already committed then. Those can sit after the cursor
// (the feed is in transaction order, and the cursor starts at the oldest
// transaction still open anywhere on the server, such as another package's
// test), and a new webhook skips them.
type from struct {
	p      events.Position
	before map[string]bool
}

// startOf reads where w's deliveries begin. Only the test writes to its
// database, so what the feed has after w's cursor right after w was made was
// committed before it.
func startOf(t *testing.T, b *bundle, w webhooks.Created) from {
	t.Helper()
	p, err := events.ParsePosition(w.LastEventID)
	require.NoError(t, err)
	f := from{p: p, before: map[string]bool{}}
	for _, e := range feedSince(t, b, from{p: p}) {
		f.before[e.ID] = true
	}
	return f
}

// feedSince is what the feed has, of types (all: nil), after f.
func feedSince(t *testing.T, b *bundle, f from, types ...string) []events.Event {
	t.Helper()
	eventstest.WaitServed(t, b.pool)
	var out []events.Event
	for _, e := range eventstest.ReadAll(t, b.pool, f.p) {
		if !f.before[e.ID] && (len(types) == 0 || contains(types, e.Type)) {
			out = append(out, e)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func ids(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// TestWebhookDeliversSignedEventsInOrder registers two receivers, one for
// every type and one for two types, makes traffic, and checks that each
// gets exactly the feed's events of its types since it registered, in
// order, in signed POSTs that verify.
func TestWebhookDeliversSignedEventsInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{allowPrivate: true})
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B2", 10)
	all, some := newReceiver(t, nil), newReceiver(t, nil)
	wAll := b.register(t, all, "*")
	wSome := b.register(t, some, events.HoldConfirmed, events.StockLow)
	start := startOf(t, b, wAll)

	b.traffic(t, 12)
	want := feedSince(t, b, start)
	require.GreaterOrEqual(t, len(want), 12*8+1, "12 holds of two lines, confirmed or released, and one crossing")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, _, bad := all.got()
		assert.Empty(c, bad)
		assert.Equal(c, ids(want), ids(got))
	}, 30*time.Second, 20*time.Millisecond)
	wantSome := feedSince(t, b, start, events.HoldConfirmed, events.StockLow)
	require.Len(t, wantSome, 6*2+1)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, _, bad := some.got()
		assert.Empty(c, bad)
		assert.Equal(c, ids(wantSome), ids(got))
	}, 30*time.Second, 20*time.Millisecond)

	// The receivers got the feed's events themselves, not just their ids.
	got, _, _ := all.got()
	for i, e := range want {
		require.Equal(t, e.Type, got[i].Type)
		require.Equal(t, e.SKU, got[i].SKU)
		require.Equal(t, e.ReservationID, got[i].ReservationID)
	}

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		w, err := b.webhooks.Get(context.Background(), wSome.ID)
		assert.NoError(c, err)
		assert.EqualValues(c, len(wantSome), w.DeliveredEvents)
		assert.Zero(c, w.Failures)
		assert.Nil(c, w.OldestPendingAt, "caught up")
		// Its cursor passed the events it did not ask for too.
		assert.Equal(c, want[len(want)-1].ID, w.LastEventID)
	}, 30*time.Second, 20*time.Millisecond)
}

// TestWebhookRetriesAFailedBatch has a receiver fail twice, then take
// deliveries: it gets every event once, in order, and no alert is raised.
func TestWebhookRetriesAFailedBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{allowPrivate: true})
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B2", 10)
	r := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return 0
	})
	w := b.register(t, r, "*")
	start := startOf(t, b, w)
	b.traffic(t, 4)
	want := feedSince(t, b, start)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, _, bad := r.got()
		assert.Empty(c, bad)
		assert.Equal(c, ids(want), ids(got), "every event once, in order")
	}, 30*time.Second, 20*time.Millisecond)
	_, requests, _ := r.got()
	require.GreaterOrEqual(t, requests, 3, "two failures, then the deliveries")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The receiver answered before the acknowledgement was recorded.
		got, err := b.webhooks.Get(context.Background(), w.ID)
		assert.NoError(c, err)
		assert.Zero(c, got.Failures)
		assert.Nil(c, got.LastError)
		assert.Equal(c, want[len(want)-1].ID, got.LastEventID)
	}, 30*time.Second, 20*time.Millisecond)
	open, err := b.alerts.List(context.Background(), alerts.StatusOpen, 100)
	require.NoError(t, err)
	for _, a := range open {
		require.NotEqual(t, webhooks.AlertKind, a.Kind, "two failures raise no alert")
	}
}

// TestWebhookThatAlwaysFailsRaisesTheAlert has a receiver refuse every
// delivery: after three attempts at the batch a critical webhook_failing
// alert is open, and retries go on from the same event. Once the receiver
// takes deliveries again it gets every event from the last acknowledged
// one on, in order, and the alert resolves itself.
func TestWebhookThatAlwaysFailsRaisesTheAlert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &setupOpts{allowPrivate: true})
	dbtest.StockIn(t, b.pool, "A1", 10)
	dbtest.StockIn(t, b.pool, "B2", 10)
	var down atomic.Bool
	down.Store(true)
	r := newReceiver(t, func(int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	w := b.register(t, r, "*")
	start := startOf(t, b, w)
	b.traffic(t, 3)

	var alert alerts.Alert
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		open, err := b.alerts.List(ctx, alerts.StatusOpen, 100)
		assert.NoError(c, err)
		for _, a := range open {
			if a.Kind == webhooks.AlertKind {
				alert = a
			}
		}
		assert.Equal(c, webhooks.AlertKind, alert.Kind)
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, alerts.Critical, alert.Level)
	require.Equal(t, fmt.Sprintf("webhook:%d", w.ID), alert.Subject)
	require.Contains(t, string(alert.Details), "503")
	got, err := b.webhooks.Get(ctx, w.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, got.Failures, int32(webhooks.MaxAttempts))
	require.NotNil(t, got.FailingSince)
	// Nothing acknowledged: the cursor may have passed the events committed
	// before the webhook (skipped), never the first one after it.
	pending := feedSince(t, b, start)
	require.NotEmpty(t, pending)
	cursor, err := events.ParsePosition(got.LastEventID)
	require.NoError(t, err)
	first, err := events.ParsePosition(pending[0].ID)
	require.NoError(t, err)
	require.True(t, first.After(cursor), "nothing acknowledged: the cursor %s is before %s", cursor, first)
	require.NotNil(t, got.OldestPendingAt, "it lags")
	taken, requests, _ := r.got()
	require.Empty(t, taken)
	require.GreaterOrEqual(t, requests, webhooks.MaxAttempts)

	// More events while it is down, then it comes back.
	b.traffic(t, 2)
	down.Store(false)
	want := feedSince(t, b, start)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		taken, _, bad := r.got()
		assert.Empty(c, bad)
		assert.Equal(c, ids(want), ids(taken), "every event from the last acknowledged one, once, in order")
	}, 30*time.Second, 20*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a, err := b.alerts.Get(ctx, alert.ID)
		assert.NoError(c, err)
		assert.Equal(c, alerts.StatusResolved, a.Status)
	}, 30*time.Second, 20*time.Millisecond)
}
