package apiclient_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apiclient"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// serve starts a fully wired stockhold on a fresh database and returns its
// base URL and an ops and a shop key.
func serve(t *testing.T) (base, ops, shop string) {
	t.Helper()
	env := map[string]string{"DATABASE_URL": "postgres://unused", "STOCKHOLD_DRAIN_DELAY": "0s",
		"STOCKHOLD_SHUTDOWN_TIMEOUT": "5s", "STOCKHOLD_JOB_STOP_TIMEOUT": "5s"}
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
	ops, err = auth.Create(ctx, pool, "alice", auth.RoleOps)
	require.NoError(t, err)
	shop, err = auth.Create(ctx, pool, "shop", auth.RoleShop)
	require.NoError(t, err)
	return "http://" + ln.Addr().String(), ops, shop
}

// client is the generated client with a bearer token, every exchange also
// checked against the document by apitest.
func client(t *testing.T, base, token string) *apiclient.ClientWithResponses {
	t.Helper()
	c, err := apiclient.NewClientWithResponses(base,
		apiclient.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil), Timeout: 30 * time.Second}),
		apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	require.NoError(t, err)
	return c
}

func ptr[T any](v T) *T { return &v }

// TestGeneratedClientCoreFlow drives the core flow through the client
// oapi-codegen generated from openapi.json, against a real server: stock
// in, hold, extend, release part of it, confirm, a refusal decoded as its
// problem, a hold released whole, and the events all of it produced.
func TestGeneratedClientCoreFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, opsKey, shopKey := serve(t)
	ops, shop := client(t, base, opsKey), client(t, base, shopKey)

	adj, err := ops.AdjustStockWithResponse(ctx, "A1", &apiclient.AdjustStockParams{IdempotencyKey: ptr("po-1")},
		apiclient.AdjustmentRequest{Delta: 10, Reason: "restock", Ref: ptr("PO-1")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, adj.StatusCode(), string(adj.Body))
	require.Equal(t, int64(10), adj.JSON200.Pools[0].Available)

	hold, err := shop.CreateReservationWithResponse(ctx, &apiclient.CreateReservationParams{IdempotencyKey: "order-1"},
		apiclient.HoldRequest{OrderRef: ptr("o-1"), Items: []apiclient.HoldItem{{Sku: "A1", Quantity: ptr(int64(3))}}, TtlSeconds: ptr(int64(60))})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, hold.StatusCode(), string(hold.Body))
	id := hold.JSON201.Id
	require.Equal(t, apiclient.ReservationStatus("held"), hold.JSON201.Status)

	ext, err := shop.ExtendReservationWithResponse(ctx, id, apiclient.ExtendRequest{TtlSeconds: 1800})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ext.StatusCode(), string(ext.Body))
	require.WithinDuration(t, time.Now().Add(30*time.Minute), ext.JSON200.ExpiresAt, time.Minute)

	part, err := shop.ReleaseReservationWithResponse(ctx, id, &apiclient.ReleaseReservationParams{IdempotencyKey: ptr("drop-1")},
		apiclient.ReleaseRequest{Reason: ptr("one out of stock"), Items: &[]apiclient.HoldItem{{Sku: "A1", Quantity: ptr(int64(1))}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, part.StatusCode(), string(part.Body))
	require.Equal(t, int64(2), part.JSON200.Items[0].Quantity)

	conf, err := shop.ConfirmReservationWithResponse(ctx, id, apiclient.EmptyRequest{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, conf.StatusCode(), string(conf.Body))
	require.Equal(t, apiclient.ReservationStatus("confirmed"), conf.JSON200.Status)

	// A refusal comes back as its problem, typed.
	late, err := shop.ReleaseReservationWithResponse(ctx, id, nil, apiclient.ReleaseRequest{Reason: ptr("cancelled")})
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, late.StatusCode(), string(late.Body))
	require.NotNil(t, late.ApplicationproblemJSON409, string(late.Body))
	require.Equal(t, "reservation_not_held", late.ApplicationproblemJSON409.Code)

	second, err := shop.CreateReservationWithResponse(ctx, &apiclient.CreateReservationParams{IdempotencyKey: "order-2"},
		apiclient.HoldRequest{OrderRef: ptr("o-2"), Items: []apiclient.HoldItem{{Sku: "A1", Quantity: ptr(int64(4))}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, second.StatusCode(), string(second.Body))
	rel, err := shop.ReleaseReservationWithResponse(ctx, second.JSON201.Id, nil, apiclient.ReleaseRequest{Reason: ptr("cancelled")})
	require.NoError(t, err)
	require.Equal(t, apiclient.ReservationStatus("released"), rel.JSON200.Status)

	got, err := shop.GetReservationWithResponse(ctx, id)
	require.NoError(t, err)
	require.Equal(t, apiclient.ReservationStatus("confirmed"), got.JSON200.Status)
	stock, err := shop.GetStockWithResponse(ctx, "A1")
	require.NoError(t, err)
	p := stock.JSON200.Pools[0]
	require.Equal(t, []int64{10, 8, 0, 2}, []int64{p.Total, p.Available, p.Reserved, p.Sold})

	// The events of all of it, in order, read through the cursor. The feed
	// serves a change once no older transaction is still running anywhere
	// on the server (other tests' included), so an empty page means "not
	// yet": read on from the cursor until the five hold events are there.
	want := []string{"hold.created", "hold.released", "hold.confirmed", "hold.created", "hold.released"}
	var types []string
	after := ""
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for {
			page, err := ops.ListEventsWithResponse(ctx, &apiclient.ListEventsParams{After: &after, Limit: ptr(3)})
			if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, page.StatusCode(), string(page.Body)) {
				return
			}
			if len(page.JSON200.Events) == 0 {
				break
			}
			for _, e := range page.JSON200.Events {
				if e.Type != "stock.changed" {
					types = append(types, string(e.Type))
				}
			}
			after = page.JSON200.Next
		}
		assert.Len(c, types, len(want))
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, want, types)
}
