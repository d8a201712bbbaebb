package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestCacheSparesTheDatabase checks what the cache is for: within the TTL
// an answer, a refusal included, costs no round trip to PostgreSQL; once
// the TTL has passed the next lookup asks the database again, and sees
// what changed there meanwhile.
func TestCacheSparesTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	token, err := Create(ctx, pool, "shop-a", RoleShop)
	require.NoError(t, err)
	clk := &clock{t: time.Now()}
	a := NewAuthenticator(pool, CacheTTL)
	a.now = clk.now
	acquires := func() int64 { return pool.Stat().AcquireCount() }

	before := acquires()
	_, err = a.Authenticate(ctx, token)
	require.NoError(t, err)
	require.Equal(t, before+1, acquires(), "the first lookup asks the database")
	// A token nobody issued yet: refused, and the refusal is cached too.
	unknown := "sh_not-yet-issued"
	_, err = a.Authenticate(ctx, unknown)
	require.ErrorIs(t, err, ErrUnknownKey)
	require.Equal(t, before+2, acquires())

	// The token becomes a key meanwhile (in psql, say).
	sum := sha256.Sum256([]byte(unknown))
	_, err = pool.Exec(ctx, `INSERT INTO api_keys (name, role, token_sha256) VALUES ('late', 'ops', $1)`, sum[:])
	require.NoError(t, err)

	mid := acquires()
	clk.add(CacheTTL - time.Millisecond)
	for range 5 {
		k, err := a.Authenticate(ctx, token)
		require.NoError(t, err)
		require.Equal(t, "shop-a", k.Name)
		_, err = a.Authenticate(ctx, unknown)
		require.ErrorIs(t, err, ErrUnknownKey, "the cached refusal stands until the TTL has passed")
	}
	require.Equal(t, mid, acquires(), "cached answers cost no round trip")

	clk.add(time.Millisecond)
	k, err := a.Authenticate(ctx, unknown)
	require.NoError(t, err, "looked up again once the TTL has passed")
	require.Equal(t, Key{ID: k.ID, Name: "late", Role: RoleOps}, k)
	_, err = a.Authenticate(ctx, token)
	require.NoError(t, err)
	require.Equal(t, mid+2, acquires())
}

// TestCacheIsBounded fills the cache to its bound with tokens nobody
// issued, as a flood of random tokens would: the next new token empties it
// rather than growing it, and known keys keep working throughout.
func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	token, err := Create(ctx, pool, "shop-a", RoleShop)
	require.NoError(t, err)
	a := NewAuthenticator(pool, CacheTTL)

	// Real lookups grow the cache one entry per token...
	for i := range 50 {
		_, err := a.Authenticate(ctx, fmt.Sprint("sh_random-", i))
		require.ErrorIs(t, err, ErrUnknownKey)
	}
	_, err = a.Authenticate(ctx, token)
	require.NoError(t, err)
	require.Equal(t, 51, a.cached())

	// ...up to the bound: fill the rest (a lookup per entry would only make
	// the test slow), with entries that are still fresh.
	a.mu.Lock()
	for i := 0; len(a.cache) < maxCached; i++ {
		a.cache[sha256.Sum256(fmt.Append(nil, "sh_flood-", i))] = cached{err: ErrUnknownKey, expires: time.Now().Add(time.Hour)}
	}
	a.mu.Unlock()
	require.Equal(t, maxCached, a.cached())

	_, err = a.Authenticate(ctx, "sh_one-more")
	require.ErrorIs(t, err, ErrUnknownKey)
	require.Equal(t, 1, a.cached(), "at the bound the cache starts again rather than grow")
	k, err := a.Authenticate(ctx, token)
	require.NoError(t, err, "a known key is looked up again")
	require.Equal(t, "shop-a", k.Name)
	require.Equal(t, 2, a.cached())
}

// TestAuthenticateConcurrently has many requests look up good and bad
// tokens at once on one Authenticator while time moves past the TTL, under
// the race detector: every answer is right.
func TestAuthenticateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	tokens := map[string]Role{}
	for i, role := range []Role{RoleShop, RoleOps, RoleShop} {
		token, err := Create(ctx, pool, fmt.Sprint("key-", i), role)
		require.NoError(t, err)
		tokens[token] = role
	}
	var good []string
	for token := range tokens {
		good = append(good, token)
	}
	clk := &clock{t: time.Now()}
	a := NewAuthenticator(pool, CacheTTL)
	a.now = clk.now

	type answer struct {
		token string
		key   Key
		err   error
	}
	const workers, rounds = 16, 40
	answers := make(chan answer, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				token := good[(w+i)%len(good)]
				if i%4 == 3 {
					token = fmt.Sprint("sh_bad-", w, "-", i%8)
				}
				if w == 0 && i%10 == 0 {
					clk.add(CacheTTL) // every entry so far expires
				}
				k, err := a.Authenticate(ctx, token)
				answers <- answer{token, k, err}
			}
		}()
	}
	wg.Wait()
	close(answers)
	n := 0
	for ans := range answers {
		n++
		role, ok := tokens[ans.token]
		if !ok {
			require.ErrorIs(t, ans.err, ErrUnknownKey, ans.token)
			continue
		}
		require.NoError(t, ans.err)
		require.Equal(t, role, ans.key.Role)
		require.Positive(t, ans.key.ID)
	}
	require.Equal(t, workers*rounds, n)
	require.LessOrEqual(t, a.cached(), len(tokens)+workers*8)
}

// cached is the number of entries in the cache.
func (a *Authenticator) cached() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}
