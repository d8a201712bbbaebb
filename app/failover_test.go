package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/dbtest"
)

// serverPool opens a pool on the test database the way `stockhold serve`
// does (app.Open), hooks included, for River and readiness.
func serverPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := config.Load(func(k string) string {
		if k == "DATABASE_URL" {
			return dbtest.URL(t, dbtest.New(t))
		}
		return ""
	})
	require.NoError(t, err)
	pool, err := app.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// setReadOnly makes the database's new sessions read-only (or writable
// again), as a standby's are, and drops pool's connections so that it
// opens new ones: a pool that found itself on a server that takes no
// writes.
func setReadOnly(t *testing.T, pool *pgxpool.Pool, on bool) {
	t.Helper()
	name := pgx.Identifier{pool.Config().ConnConfig.Database}.Sanitize()
	sql := "ALTER DATABASE " + name + " RESET default_transaction_read_only"
	if on {
		sql = "ALTER DATABASE " + name + " SET default_transaction_read_only = on"
	}
	cc := pool.Config().ConnConfig.Copy()
	cc.Database = "postgres" // the database itself may be read-only by now
	conn, err := pgx.ConnectConfig(context.Background(), cc)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), sql)
	require.NoError(t, err)
}

// TestReadOnlyServerIsDroppedAtOnce puts the instance's pools on a server
// that takes no writes (every session read-only, SQLSTATE 25006 on each
// write), as a pool left on a node that became a standby would be. While
// it lasts, holds answer 503 unavailable with Retry-After, never 500, and
// /readyz says the database is not writable. Once writes are possible
// again the very next requests succeed: the connections that met the
// read-only error were dropped rather than kept to fail request after
// request.
func TestReadOnlyServerIsDroppedAtOnce(t *testing.T) {
	t.Parallel()
	pool := serverPool(t)
	in := start(t, &instanceOpts{pool: pool})
	in.stockIn("A1", 1000)
	for i := range 5 { // fill the pools with writable connections
		a, err := in.hold(fmt.Sprintf("warm-%d", i), "A1")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	}

	setReadOnly(t, pool, true)
	in.app.RequestPool.Reset()
	pool.Reset()
	for i := range 5 {
		a := in.must("POST", "/v1/reservations", in.shop, `{"items": [{"sku": "A1", "quantity": 1}]}`,
			"Idempotency-Key", fmt.Sprintf("ro-%d", i))
		require.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
		require.Equal(t, "unavailable", a.problem(t)["code"])
		require.NotEmpty(t, a.header.Get("Retry-After"))
	}
	ready := in.must("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, ready.status, "%s", ready.body)
	require.Equal(t, "database not writable", ready.problem(t)["detail"])

	// The connections are open and read-only; the server takes writes
	// again. Each request meets at most one connection left from before.
	setReadOnly(t, pool, false)
	refused := 0
	for i := range 5 {
		a := in.must("POST", "/v1/reservations", in.shop, `{"items": [{"sku": "A1", "quantity": 1}]}`,
			"Idempotency-Key", fmt.Sprintf("back-%d", i))
		if a.status == http.StatusServiceUnavailable {
			refused++
			continue
		}
		require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	}
	require.LessOrEqual(t, refused, 1, "the read-only connections were kept: requests go on failing")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a, err := in.do("GET", "/readyz", "", "")
		if assert.NoError(c, err) {
			assert.Equal(c, http.StatusOK, a.status, "%s", a.body)
		}
	}, 10*time.Second, 50*time.Millisecond)
	for _, l := range in.logs.lines(t, 0) {
		require.NotEqual(t, "request failed", l["msg"], "a request answered 500: %v", l)
	}
}

// syncRepWarning installs a deferred trigger on table that raises, at
// COMMIT, the warning PostgreSQL sends when a commit's wait for the
// synchronous standby is cancelled (by statement_timeout, say): the
// transaction committed on the primary only, and COMMIT answers success.
// It returns a function that removes the trigger.
func syncRepWarning(t *testing.T, pool *pgxpool.Pool, table string) (remove func()) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION test_sync_rep_cancelled() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE WARNING 'canceling wait for synchronous replication due to user request'
				USING DETAIL = 'The transaction has already committed locally, but might not have been replicated to the standby.';
			RETURN NULL;
		END $$`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE CONSTRAINT TRIGGER test_sync_rep_cancelled AFTER INSERT OR UPDATE ON `+table+`
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_sync_rep_cancelled()`)
	require.NoError(t, err)
	return func() {
		_, err := pool.Exec(ctx, `DROP TRIGGER test_sync_rep_cancelled ON `+table)
		require.NoError(t, err)
	}
}

// TestUnconfirmedCommitIsNotAcknowledged makes every hold's COMMIT come
// back with PostgreSQL's "canceling wait for synchronous replication"
// warning, which it sends when a commit waiting for the synchronous
// standby is cancelled: the hold is on the primary only, and a failover
// would lose it. The hold answers 503 unavailable instead of 201; the
// client's retry with the same key, once commits are confirmed again,
// gets the hold (replayed: it did commit here).
func TestUnconfirmedCommitIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	in := start(t, nil)
	in.stockIn("A1", 10)
	remove := syncRepWarning(t, in.pool, "reservations")
	body := `{"items": [{"sku": "A1", "quantity": 1}]}`
	a := in.must("POST", "/v1/reservations", in.shop, body, "Idempotency-Key", "unconfirmed")
	require.Equal(t, http.StatusServiceUnavailable, a.status, "a hold the standby never confirmed was acknowledged: %s", a.body)
	require.Equal(t, "unavailable", a.problem(t)["code"])

	remove()
	a = in.must("POST", "/v1/reservations", in.shop, body, "Idempotency-Key", "unconfirmed")
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	require.Equal(t, "true", a.header.Get("Idempotent-Replayed"))
}

// TestReadyzWritesAndWaitsForTheStandby makes the readiness probe's commit
// come back unconfirmed by the synchronous standby (an old primary
// restarted before its demotion, whose commits wait for a standby that is
// gone, looks like this once the probe's timeout cancels the wait):
// /readyz answers 503 "database not writable", where a read would have
// said ready, and 200 again once commits are confirmed.
func TestReadyzWritesAndWaitsForTheStandby(t *testing.T) {
	t.Parallel()
	pool := serverPool(t)
	in := start(t, &instanceOpts{pool: pool})
	ready := in.must("GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, ready.status, "%s", ready.body)

	remove := syncRepWarning(t, pool, "readiness_probes")
	ready = in.must("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, ready.status, "%s", ready.body)
	require.Equal(t, "database not writable", ready.problem(t)["detail"])
	require.NotContains(t, string(ready.body), "synchronous", "the reason only")

	remove()
	ready = in.must("GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, ready.status, "%s", ready.body)
}
