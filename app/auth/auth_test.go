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
	"github.com/stockhold/stockhold/app/schema"
)

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestRevocationReachesEveryAuthenticator revokes a key that two
// authenticators on one database (two instances) have cached: each keeps
// answering from its cache until CacheTTL has passed since its lookup, and
// refuses the key from then on.
func TestRevocationReachesEveryAuthenticator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	token, err := Create(ctx, pool, "shop-a", RoleShop)
	require.NoError(t, err)

	clk := &clock{t: time.Now()}
	a, b := NewAuthenticator(pool, CacheTTL), NewAuthenticator(pool, time.Hour)
	a.now, b.now = clk.now, clk.now
	require.Equal(t, MaxCacheTTL, b.ttl, "a longer TTL is cut to the bound")
	for _, x := range []*Authenticator{a, b} {
		k, err := x.Authenticate(ctx, token)
		require.NoError(t, err)
		require.Equal(t, Key{ID: k.ID, Name: "shop-a", Role: RoleShop}, k)
	}
	clk.add(time.Second) // b looks the key up a second later
	b.mu.Lock()
	clear(b.cache)
	b.mu.Unlock()
	_, err = b.Authenticate(ctx, token)
	require.NoError(t, err)

	rev, err := Revoke(ctx, pool, "shop-a")
	require.NoError(t, err)
	require.Len(t, rev.IDs, 1)
	_, err = Revoke(ctx, pool, "shop-a")
	require.ErrorIs(t, err, ErrNoKey, "nothing left to revoke")

	// Until its cache entry expires each still admits the key...
	clk.add(CacheTTL - time.Second - time.Millisecond)
	_, err = a.Authenticate(ctx, token)
	require.NoError(t, err, "a: cached")
	_, err = b.Authenticate(ctx, token)
	require.NoError(t, err, "b: cached")
	// ...and from then on refuses it: a at CacheTTL after its lookup, b
	// at MaxCacheTTL after its own, both within 5 s of the revocation.
	clk.add(time.Millisecond)
	_, err = a.Authenticate(ctx, token)
	require.ErrorIs(t, err, ErrUnknownKey)
	_, err = b.Authenticate(ctx, token)
	require.NoError(t, err, "b looked up later")
	clk.add(MaxCacheTTL - CacheTTL + time.Second)
	_, err = b.Authenticate(ctx, token)
	require.ErrorIs(t, err, ErrUnknownKey)
}

// TestRotate rotates a key with a grace period: the old token works until
// the grace ends (an authenticator trusts it no longer than that, whatever
// its TTL), the new one at once, both as the same owner; names stay unique.
func TestRotate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	_, err := Rotate(ctx, pool, "dev-shop", "", 0)
	require.ErrorIs(t, err, ErrNoKey, "a first rotation needs a role")
	first, err := Rotate(ctx, pool, "dev-shop", RoleShop, 0)
	require.NoError(t, err)
	require.Nil(t, first.Old, "nothing to rotate: created")
	_, err = Create(ctx, pool, "dev-shop", RoleOps)
	require.ErrorIs(t, err, ErrNameTaken)

	second, err := Rotate(ctx, pool, "dev-shop", "", time.Hour)
	require.NoError(t, err)
	require.Equal(t, RoleShop, second.Role, "the role carries over")
	require.NotNil(t, second.Old)
	require.WithinDuration(t, time.Now().Add(time.Hour), second.Old.At, time.Minute)

	clk := &clock{t: time.Now()}
	a := NewAuthenticator(pool, CacheTTL)
	a.now = clk.now
	oldKey, err := a.Authenticate(ctx, first.Token)
	require.NoError(t, err, "in its grace period")
	newKey, err := a.Authenticate(ctx, second.Token)
	require.NoError(t, err)
	require.Equal(t, oldKey.Name, newKey.Name, "the same owner")
	require.NotEqual(t, oldKey.ID, newKey.ID)

	// The grace period ends (time moved in the database), and the cached
	// entry has not yet expired by the TTL: a fresh authenticator refuses
	// the old token, and one whose entry ends with the grace does too.
	_, err = pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() + interval '1 second' WHERE id = $1`, oldKey.ID)
	require.NoError(t, err)
	a.mu.Lock()
	clear(a.cache)
	a.mu.Unlock()
	_, err = a.Authenticate(ctx, first.Token)
	require.NoError(t, err)
	a.mu.Lock()
	expires := a.cache[sha(first.Token)].expires
	a.mu.Unlock()
	require.True(t, expires.Before(clk.now().Add(CacheTTL)), "trusted only until the grace ends")
	_, err = pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() - interval '1 second' WHERE id = $1`, oldKey.ID)
	require.NoError(t, err)
	clk.add(2 * time.Second)
	_, err = a.Authenticate(ctx, first.Token)
	require.ErrorIs(t, err, ErrUnknownKey)
	_, err = a.Authenticate(ctx, second.Token)
	require.NoError(t, err)

	// Revoking the name stops the new key too, and a rotation at once
	// (no grace) ends the old key's console sessions.
	third, err := Rotate(ctx, pool, "dev-shop", "", 0)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO ops_sessions (token_sha256, api_key_id, csrf_token, expires_at)
		VALUES ('\x01', (SELECT id FROM api_keys WHERE revoked_at IS NULL AND name = 'dev-shop'), 'c', now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = Revoke(ctx, pool, "dev-shop")
	require.NoError(t, err)
	var sessions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ops_sessions`).Scan(&sessions))
	require.Zero(t, sessions, "revoking ends the key's console sessions")
	_, err = NewAuthenticator(pool, CacheTTL).Authenticate(ctx, third.Token)
	require.ErrorIs(t, err, ErrUnknownKey)

	keys, err := List(ctx, pool)
	require.NoError(t, err)
	require.Len(t, keys, 3)
	for _, k := range keys {
		require.Equal(t, "dev-shop", k.Name)
		require.NotNil(t, k.RevokedAt)
	}
}

func sha(token string) [32]byte {
	return sha256.Sum256([]byte(token))
}

// TestMigrationKeepsNewestOfEachName runs the migration that makes live
// names unique over a database where `make run` created dev-shop three
// times: the newest keeps working, the older ones for seven more days.
func TestMigrationKeepsNewestOfEachName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m, err := schema.New(pool, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	for {
		current, _, err := m.Versions(ctx)
		require.NoError(t, err)
		if current < 51 {
			break
		}
		_, err = m.Down(ctx)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO api_keys (name, role, token_sha256) VALUES
		('dev-shop', 'shop', '\x01'), ('dev-shop', 'shop', '\x02'), ('dev-shop', 'shop', '\x03'),
		('dev-ops', 'ops', '\x04'), ('gone', 'shop', '\x05')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() - interval '1 day' WHERE name = 'gone'`)
	require.NoError(t, err)
	_, err = m.Up(ctx)
	require.NoError(t, err)

	rows, err := pool.Query(ctx, `
		SELECT token_sha256, CASE WHEN revoked_at IS NULL THEN 'in use'
		                          WHEN revoked_at BETWEEN now() + interval '6 days 23 hours' AND now() + interval '7 days' THEN 'in 7 days'
		                          WHEN revoked_at < now() THEN 'revoked' END
		FROM api_keys ORDER BY token_sha256`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var tok []byte
		var status *string
		require.NoError(t, rows.Scan(&tok, &status))
		require.NotNil(t, status)
		got = append(got, fmt.Sprintf("%x %s", tok, *status))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"01 in 7 days", "02 in 7 days", "03 in use", "04 in use", "05 revoked"}, got)
	_, err = Create(ctx, pool, "dev-ops", RoleOps)
	require.ErrorIs(t, err, ErrNameTaken)
}
