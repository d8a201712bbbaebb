package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/events/eventstest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/webhooks"
	"github.com/stockhold/stockhold/jobs"
)

func services(t *testing.T, allowPrivate bool) (*pgxpool.Pool, *webhooks.Service, *inventory.Service) {
	t.Helper()
	pool := dbtest.New(t)
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	deps := app.NewServices(config.DefaultsWith(func(c *config.Config) {
		c.WebhookAllowPrivate, c.RetryBase = allowPrivate, 10*time.Millisecond
	}), pool, inserter, nil)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	return pool, deps.Webhooks, deps.Inventory
}

func create(ctx context.Context, pool *pgxpool.Pool, svc *webhooks.Service, url string, types ...string) (webhooks.Created, error) {
	var w webhooks.Created
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		w, err = svc.CreateTx(ctx, tx, webhooks.Register{URL: url, Events: types, Actor: "alice"})
		return err
	})
	return w, err
}

func TestSign(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"events":[]}`)
	mac := hmac.New(sha256.New, []byte("whsec_k"))
	mac.Write([]byte("1700000000." + string(body)))
	require.Equal(t, "t=1700000000,v1="+hex.EncodeToString(mac.Sum(nil)), webhooks.Sign("whsec_k", at, body))
}

// TestRegistrationRefusesWhatItMustNotReach: without
// STOCKHOLD_WEBHOOK_ALLOW_PRIVATE, loopback, private, link-local (cloud
// metadata) and other non-public addresses are refused, by literal address
// or by a name that resolves to one; so are URLs that are not plain
// http(s), and bad event types. Nothing is registered.
func TestRegistrationRefusesWhatItMustNotReach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, svc, _ := services(t, false)
	for _, url := range []string{
		"http://127.0.0.1/hook", "http://127.1.2.3:8080/x", "http://localhost/hook", "http://[::1]/hook",
		"http://10.0.0.5/hook", "https://172.16.3.4/hook", "http://192.168.1.1/hook", "http://169.254.169.254/latest/meta-data",
		"http://[fe80::1%25eth0]/hook", "http://100.64.0.1/hook", "http://0.0.0.0/hook", "http://[::ffff:127.0.0.1]/hook",
		"http://[fd00::1]/hook", "http://[64:ff9b::a00:1]/hook",
		"ftp://93.184.216.34/hook", "93.184.216.34/hook", "https://user:pw@93.184.216.34/hook", "https://93.184.216.34/hook#x",
		"", "https://",
	} {
		_, err := create(ctx, pool, svc, url, "*")
		var de *domain.Error
		require.ErrorAs(t, err, &de, "%q: %v", url, err)
		require.Equal(t, domain.CodeInvalid, de.Code, "%q", url)
	}
	for _, types := range [][]string{nil, {}, {"stock.changd"}, {"*", "stock.low"}, {"stock.low", "stock.low"}} {
		_, err := create(ctx, pool, svc, "https://93.184.216.34/hook", types...)
		var de *domain.Error
		require.ErrorAs(t, err, &de, "%v: %v", types, err)
	}
	list, err := svc.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	// A public address is fine (nothing is sent until there are events).
	w, err := create(ctx, pool, svc, "https://93.184.216.34/hook", "stock.low", "hold.confirmed")
	require.NoError(t, err)
	got, err := svc.Get(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"stock.low", "hold.confirmed"}, got.Events)
	require.NoError(t, svc.Delete(ctx, w.ID))
	_, err = svc.Get(ctx, w.ID)
	require.Error(t, err)
	require.Error(t, svc.Delete(ctx, w.ID), "deleted already")
}

// TestDeliveryRefusesPrivateAddressesWhenItConnects: a webhook whose URL
// names a loopback address (registered while private addresses were
// allowed, or a name that resolved elsewhere then: DNS rebinding) is
// refused when the delivery connects, and the receiver never sees a
// request. Redirects are not followed either: a 3xx is a failure.
func TestDeliveryRefusesPrivateAddressesWhenItConnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "http://93.184.216.34/elsewhere", http.StatusFound)
	}))
	t.Cleanup(srv.Close)

	pool, allowing, inv := services(t, true)
	w, err := create(ctx, pool, allowing, srv.URL, "*")
	require.NoError(t, err)
	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 5, Actor: "test"})
	require.NoError(t, err)
	eventstest.WaitServed(t, pool)

	// The same database, a service that does not allow private addresses.
	inserter, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	strict := app.NewServices(config.DefaultsWith(func(c *config.Config) { c.RetryBase = 10 * time.Millisecond }), pool, inserter, nil).Webhooks
	res, err := strict.Deliver(ctx, w.ID)
	require.NoError(t, err)
	require.Contains(t, res.Failed, "refused")
	require.Positive(t, res.Again)
	require.Zero(t, hits.Load(), "no request reached the loopback receiver")
	got, err := strict.Get(ctx, w.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Failures)
	require.Contains(t, *got.LastError, "loopback or private")

	// Allowed, it connects; the receiver's redirect is a failed delivery.
	res, err = allowing.Deliver(ctx, w.ID)
	require.NoError(t, err)
	require.Contains(t, res.Failed, "302")
	require.EqualValues(t, 1, hits.Load(), "the redirect was not followed")
	got, err = allowing.Get(ctx, w.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Failures)
	require.Equal(t, w.LastEventID, got.LastEventID, "nothing acknowledged")
}

// TestNewWebhookGetsWhatCommitsAfterItOnly: a webhook's cursor starts at
// the feed's horizon, the oldest transaction still running when it is
// created. A change committed just before the webhook, while an older
// transaction was still open, comes after that horizon in the feed, but it
// happened before the webhook and is not sent to it; a change made before
// the webhook in a transaction that commits after it is, and so is one
// made after it. (Before the webhook kept its start snapshot, EARLY's
// stock.changed was delivered: the README walk-through's receiver got
// o-1's hold.confirmed under load.)
func TestNewWebhookGetsWhatCommitsAfterItOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	got := make(chan webhooks.Body, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b webhooks.Body
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- b
	}))
	t.Cleanup(srv.Close)
	pool, svc, inv := services(t, true)

	for _, sku := range []string{"INFLIGHT", "EARLY", "LATE"} {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 5, Actor: "test"})
		require.NoError(t, err)
	}
	held, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h-1", Items: []inventory.Item{{SKU: "INFLIGHT", Quantity: 2}}})
	require.NoError(t, err)

	// An older transaction holds the feed's horizon back.
	old, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = old.Rollback(ctx) }()
	_, err = old.Exec(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	// A release made before the webhook, committed after it.
	inflight, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = inflight.Rollback(ctx) }()
	_, err = inv.ReleaseTx(ctx, inflight, []uuid.UUID{held.ID}, inventory.Outcome{Status: inventory.StatusReleased, Kind: "release", Actor: "test", Reason: "test"})
	require.NoError(t, err)
	// Committed before the webhook, behind the older transaction.
	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "EARLY", Delta: 1, Actor: "test"})
	require.NoError(t, err)

	w, err := create(ctx, pool, svc, srv.URL, "*")
	require.NoError(t, err)
	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "LATE", Delta: 2, Actor: "test"})
	require.NoError(t, err)
	require.NoError(t, inflight.Commit(ctx))
	require.NoError(t, old.Rollback(ctx))
	eventstest.WaitServed(t, pool)

	res, err := svc.Deliver(ctx, w.ID)
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	var seen []string
	for range res.Batches {
		for _, e := range (<-got).Events {
			seen = append(seen, e.SKU+" "+e.Type)
		}
	}
	require.ElementsMatch(t, []string{"INFLIGHT hold.released", "INFLIGHT stock.changed", "LATE stock.changed"}, seen)
	after, err := svc.Get(ctx, w.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, after.DeliveredEvents)
	require.Nil(t, after.OldestPendingAt, "caught up: the cursor moved past EARLY's change too")
}

// TestNewWebhookGetsEveryLaterEventOfAnOlderWriter: a webhook gets every
// event committed after it was created, those of a transaction older than
// it included. Such a transaction began before a younger one changed the
// same stock row and committed, before the webhook; it then writes that
// row after the webhook, and commits: its rows carry the younger
// transaction's feed position, which the webhook's start snapshot saw
// committed. They are its events all the same (a row is judged by its own
// writer, not by its feed position), and the younger transaction's change
// is not.
func TestNewWebhookGetsEveryLaterEventOfAnOlderWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	got := make(chan webhooks.Body, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b webhooks.Body
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- b
	}))
	t.Cleanup(srv.Close)
	pool, svc, inv := services(t, true)
	_, err := inv.Adjust(ctx, stock.Adjustment{SKU: "SHARED", Delta: 5, Actor: "test"})
	require.NoError(t, err)
	held, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h-1", Items: []inventory.Item{{SKU: "SHARED", Quantity: 2}}})
	require.NoError(t, err)

	// The older writer takes its transaction id first.
	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(ctx) }()
	_, err = older.Exec(ctx, "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	// A younger transaction changes the row and commits, before the webhook.
	_, err = inv.Adjust(ctx, stock.Adjustment{SKU: "SHARED", Delta: 1, Actor: "test"})
	require.NoError(t, err)

	w, err := create(ctx, pool, svc, srv.URL, "*")
	require.NoError(t, err)
	// The older writer changes the same row after the webhook, and commits.
	_, err = inv.ReleaseTx(ctx, older, []uuid.UUID{held.ID}, inventory.Outcome{Status: inventory.StatusReleased, Kind: "release", Actor: "test", Reason: "test"})
	require.NoError(t, err)
	require.NoError(t, older.Commit(ctx))
	var below bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT bool_and(l.xmin::text::bigint <> (l.feed_xid::text::numeric % 4294967296)::bigint)
		FROM ledger l WHERE l.reservation_id = $1 AND l.kind = 'release'`, held.ID).Scan(&below))
	require.True(t, below, "the older writer's row carries the younger one's feed position")
	eventstest.WaitServed(t, pool)

	res, err := svc.Deliver(ctx, w.ID)
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	var seen []string
	for range res.Batches {
		for _, e := range (<-got).Events {
			seen = append(seen, e.SKU+" "+e.Type)
		}
	}
	require.ElementsMatch(t, []string{"SHARED hold.released", "SHARED stock.changed"}, seen,
		"the older writer's events, committed after the webhook, and not the younger one's, committed before it")
}

// TestNewWebhookSkipsWhatCommittedBeforeItBehindAYoungerWriter replays what
// a reviewer saw under load (21 of 129 events from before a new webhook
// sent to it): a stock row's feed position is the youngest transaction
// that wrote it, so a change committed before the webhook by a transaction
// older than the row's last writer carries that younger writer's id, not
// its own, and was sent "when in doubt". The webhook skips it now, judged
// by its own writer; and a change by an older transaction that commits
// after the webhook, on a row a younger one wrote before it, still
// reaches it (judged by the younger writer, it would be lost).
func TestNewWebhookSkipsWhatCommittedBeforeItBehindAYoungerWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	got := make(chan webhooks.Body, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b webhooks.Body
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- b
	}))
	t.Cleanup(srv.Close)
	pool, svc, inv := services(t, true)

	holds := map[string]uuid.UUID{}
	for _, sku := range []string{"BEFORE", "AFTER"} {
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 5, Actor: "test"})
		require.NoError(t, err)
		h, _, err := inv.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "h-" + sku, Items: []inventory.Item{{SKU: sku, Quantity: 2}}})
		require.NoError(t, err)
		holds[sku] = h.ID
	}
	begin := func() pgx.Tx {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		_, err = tx.Exec(ctx, "SELECT pg_current_xact_id()") // its id, older than what follows
		require.NoError(t, err)
		return tx
	}
	release := func(tx pgx.Tx, sku string) {
		t.Helper()
		_, err := inv.ReleaseTx(ctx, tx, []uuid.UUID{holds[sku]}, inventory.Outcome{Status: inventory.StatusReleased, Kind: "release", Actor: "test", Reason: sku})
		require.NoError(t, err)
	}
	// younger writes sku's row in a transaction younger than every one
	// opened so far, and commits: the row's feed position is its id.
	younger := func(sku string) {
		t.Helper()
		_, err := inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 1, Actor: "test"})
		require.NoError(t, err)
	}

	old := begin() // holds the feed's horizon back, as under load
	first, second := begin(), begin()
	younger("BEFORE")
	younger("AFTER")
	release(first, "BEFORE") // behind BEFORE's younger writer...
	require.NoError(t, first.Commit(ctx))
	release(second, "AFTER") // behind AFTER's younger writer...

	w, err := create(ctx, pool, svc, srv.URL, "*")
	require.NoError(t, err)
	require.NoError(t, second.Commit(ctx)) // ...committed after the webhook
	require.NoError(t, old.Rollback(ctx))
	eventstest.WaitServed(t, pool)

	res, err := svc.Deliver(ctx, w.ID)
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	var seen []string
	for range res.Batches {
		for _, e := range (<-got).Events {
			seen = append(seen, e.SKU+" "+e.Type)
		}
	}
	require.ElementsMatch(t, []string{"AFTER hold.released", "AFTER stock.changed"}, seen)
	after, err := svc.Get(ctx, w.ID)
	require.NoError(t, err)
	require.Nil(t, after.OldestPendingAt, "caught up")
}

// TestNewWebhookUnderConcurrentWriters creates a webhook while writers
// release holds on two rows, each in a transaction that takes its id
// first and waits on the row's lock behind younger ones (so rows carry
// younger writers' feed positions), and checks what it receives against
// each writer's own transaction id: exactly the releases whose writer the
// webhook's start snapshot does not show committed, none from before and
// none missed.
func TestNewWebhookUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		received = map[uuid.UUID]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b webhooks.Body
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range b.Events {
			if e.ReservationID != nil {
				received[*e.ReservationID]++
			}
		}
	}))
	t.Cleanup(srv.Close)
	pool, svc, inv := services(t, true)

	const writers, each = 8, 40
	skus := []string{"HOT1", "HOT2"}
	for _, sku := range skus {
		dbtest.StockIn(t, pool, sku, writers*each)
	}
	holds := make([][]uuid.UUID, writers)
	for w := range holds {
		for i := range each {
			holds[w] = append(holds[w], dbtest.Hold(t, pool, skus[(w+i)%2], nil))
		}
	}

	type released struct {
		xid  uint64
		hold uuid.UUID
	}
	var (
		wg      sync.WaitGroup
		done    = make(chan released, writers*each)
		errs    = make(chan error, writers)
		halfway = make(chan struct{})
		count   atomic.Int32
	)
	for w := range writers {
		wg.Go(func() {
			for _, id := range holds[w] {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var xid uint64
					if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid); err != nil {
						return err
					}
					if _, err := inv.ReleaseTx(ctx, tx, []uuid.UUID{id}, inventory.Outcome{
						Status: inventory.StatusReleased, Kind: "release", Actor: "test", Reason: "load"}); err != nil {
						return err
					}
					done <- released{xid, id}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				if count.Add(1) == writers*each/2 {
					close(halfway)
				}
			}
		})
	}
	<-halfway
	hook, err := create(ctx, pool, svc, srv.URL, "hold.released")
	require.NoError(t, err)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	close(done)
	eventstest.WaitServed(t, pool)

	// What it must get: each release whose own transaction the webhook's
	// start snapshot does not show as committed.
	var start string
	require.NoError(t, pool.QueryRow(ctx, "SELECT start_snapshot FROM webhooks WHERE id = $1", hook.ID).Scan(&start))
	want := map[uuid.UUID]int{}
	all := 0
	for r := range done {
		all++
		var before bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT pg_visible_in_snapshot($1::text::xid8, $2::text::pg_snapshot)",
			fmt.Sprint(r.xid), start).Scan(&before))
		if !before {
			want[r.hold] = 1
		}
	}
	require.Equal(t, writers*each, all)
	require.NotEmpty(t, want, "releases came after the webhook")
	require.Less(t, len(want), all, "and before it")
	for {
		res, err := svc.Deliver(ctx, hook.ID)
		require.NoError(t, err)
		require.Empty(t, res.Failed)
		if res.Again == 0 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, received, "every release after the webhook, once; none before")
}
