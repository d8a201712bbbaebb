package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/idempotency"
)

// bundle is a database with a table standing for the change a request
// makes, and a counter of the times the change ran.
type bundle struct {
	pool *pgxpool.Pool
	runs atomic.Int64
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := dbtest.New(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE effects (id bigserial PRIMARY KEY, what text NOT NULL)`)
	require.NoError(t, err)
	return &bundle{pool: pool}
}

// made is what a change answers, as a domain service's result would be.
type made struct {
	ID   int64
	What string
	At   time.Time
}

// change is an fn for Do: it records what in effects, in Do's transaction,
// and answers the row.
func (b *bundle) change(what string) func(pgx.Tx) (made, error) {
	return func(tx pgx.Tx) (made, error) {
		b.runs.Add(1)
		m := made{What: what}
		err := tx.QueryRow(context.Background(), `INSERT INTO effects (what) VALUES ($1) RETURNING id, now()`, what).Scan(&m.ID, &m.At)
		return m, err
	}
}

func key(client, k string, hash string) idempotency.Key {
	return idempotency.Key{Client: client, Key: k, Hash: hash}
}

func (b *bundle) effects(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT what FROM effects ORDER BY id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return got
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	hash := idempotency.Hash([]byte("POST /things"), []byte(`{"n": 1}`))

	first, replayed, err := idempotency.Do(ctx, b.pool, key("shop-a", "k1", hash), b.change("first"))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "first", first.What)

	again, replayed, err := idempotency.Do(ctx, b.pool, key("shop-a", "k1", hash), b.change("second"))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.What, again.What, "the stored answer, not the second change's")
	require.True(t, first.At.Equal(again.At), "decoded from its JSON")
	require.EqualValues(t, 1, b.runs.Load(), "a replay does not run the change")

	// Another body under the same key is refused and changes nothing.
	other := idempotency.Hash([]byte("POST /things"), []byte(`{"n": 2}`))
	_, _, err = idempotency.Do(ctx, b.pool, key("shop-a", "k1", other), b.change("third"))
	require.ErrorIs(t, err, domain.ErrKeyReused)

	// Keys belong to their client: another client's k1 is a new request.
	theirs, replayed, err := idempotency.Do(ctx, b.pool, key("shop-b", "k1", hash), b.change("theirs"))
	require.NoError(t, err)
	require.False(t, replayed)
	require.NotEqual(t, first.ID, theirs.ID)

	require.Equal(t, []string{"first", "theirs"}, b.effects(t))
	require.EqualValues(t, 2, b.runs.Load())
}

// TestDoStoresNothingWhenTheChangeFails: the answer is stored in the
// change's transaction, so a failed change leaves neither change nor key,
// and a retry with the same key runs afresh.
func TestDoStoresNothingWhenTheChangeFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	hash := idempotency.Hash([]byte("x"))
	boom := errors.New("warehouse says no")

	_, _, err := idempotency.Do(ctx, b.pool, key("shop-a", "k", hash), func(tx pgx.Tx) (made, error) {
		if _, err := b.change("doomed")(tx); err != nil {
			return made{}, err
		}
		return made{}, boom // after the change: it must roll back
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, b.effects(t), "the failed change rolled back")
	var keys int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	require.Zero(t, keys, "no answer stored")

	ans, replayed, err := idempotency.Do(ctx, b.pool, key("shop-a", "k", hash), b.change("retried"))
	require.NoError(t, err)
	require.False(t, replayed, "the retry ran the change")
	require.Equal(t, "retried", ans.What)
	require.Equal(t, []string{"retried"}, b.effects(t))
}

// TestConcurrentCallsWaitForTheFirst sends the same request many times at
// once while the first is still running: the others wait for it, then
// replay its answer; the change runs once. When the first fails instead,
// one of the waiters runs the change and the rest replay that.
func TestConcurrentCallsWaitForTheFirst(t *testing.T) {
	t.Parallel()
	for _, firstFails := range []bool{false, true} {
		t.Run(fmt.Sprint("first fails=", firstFails), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			hash := idempotency.Hash([]byte("storm"))

			type result struct {
				ans      made
				replayed bool
				err      error
			}
			started, release := make(chan struct{}), make(chan struct{})
			firstDone := make(chan result, 1)
			boom := errors.New("first attempt fails")
			go func() {
				ans, replayed, err := idempotency.Do(ctx, b.pool, key("shop", "k", hash), func(tx pgx.Tx) (made, error) {
					ans, err := b.change("first")(tx)
					close(started)
					<-release
					if firstFails {
						return made{}, boom
					}
					return ans, err
				})
				firstDone <- result{ans, replayed, err}
			}()
			<-started

			const twins = 10
			results := make(chan result, twins)
			var wg sync.WaitGroup
			for i := range twins {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ans, replayed, err := idempotency.Do(ctx, b.pool, key("shop", "k", hash), b.change(fmt.Sprint("twin-", i)))
					results <- result{ans, replayed, err}
				}()
			}
			// Every twin waits on the first's claim of the key.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				var waiting int
				assert.NoError(c, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
				assert.Equal(c, twins, waiting)
			}, 10*time.Second, 5*time.Millisecond)
			close(release)
			wg.Wait()
			close(results)
			first := <-firstDone

			fresh := 0
			var answers []made
			for r := range results {
				require.NoError(t, r.err)
				if !r.replayed {
					fresh++
				}
				answers = append(answers, r.ans)
			}
			if firstFails {
				require.ErrorIs(t, first.err, boom)
				require.Equal(t, 1, fresh, "one twin ran the change afresh")
			} else {
				require.NoError(t, first.err)
				require.False(t, first.replayed)
				require.Zero(t, fresh, "every twin replayed the first")
				answers = append(answers, first.ans)
			}
			for _, a := range answers {
				require.Equal(t, answers[0].ID, a.ID, "every caller got the same answer")
				require.Equal(t, answers[0].What, a.What)
			}
			require.Len(t, b.effects(t), 1, "the change committed once")
		})
	}
}

func TestHashSeparatesParts(t *testing.T) {
	t.Parallel()
	ab := idempotency.Hash([]byte("ab"), []byte("c"))
	require.Equal(t, ab, idempotency.Hash([]byte("ab"), []byte("c")), "the same request, the same hash")
	require.NotEqual(t, ab, idempotency.Hash([]byte("a"), []byte("bc")), "parts are not merely concatenated")
	require.NotEqual(t, ab, idempotency.Hash([]byte("abc")))
	require.Len(t, ab, 64, "hex SHA-256")
	require.Equal(t, idempotency.Key{Client: "c", Key: "k", Hash: ab}, idempotency.NewKey("c", "k", []byte("ab"), []byte("c")))
}
