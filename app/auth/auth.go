// Package auth issues and checks API keys: bearer tokens stored only as
// SHA-256, each with an owner name and a role.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// Role is what a key may do.
type Role string

// The roles: shops hold and read; ops do everything.
const (
	RoleShop Role = "shop"
	RoleOps  Role = "ops"
)

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case RoleShop, RoleOps:
		return Role(s), nil
	}
	return "", fmt.Errorf("role must be shop or ops, not %q", s)
}

// Key is an authenticated caller.
type Key struct {
	ID   int64
	Name string
	Role Role
}

// ErrUnknownKey means the token matches no live key.
var ErrUnknownKey = errors.New("unknown or revoked API key")

// tokenPrefix marks stockhold tokens so they are easy to spot in logs and
// secret scanners.
const tokenPrefix = "sh_"

// Create issues a key and returns its token, which is shown only this once.
func Create(ctx context.Context, pool *pgxpool.Pool, name string, role Role) (string, error) {
	if name == "" || len(name) > 64 {
		return "", errors.New("name must be 1 to 64 bytes")
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	if _, err := db.New(pool).APIKeyCreate(ctx, name, string(role), sum[:]); err != nil {
		return "", fmt.Errorf("store API key: %w", err)
	}
	return token, nil
}

// Authenticator looks tokens up, remembering answers for a short while so a
// busy shop does not cost a query per request. A revoked key stops working
// within the cache's TTL.
type Authenticator struct {
	pool *pgxpool.Pool
	ttl  time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	key     Key
	err     error
	expires time.Time
}

// NewAuthenticator returns an Authenticator that caches lookups for ttl.
func NewAuthenticator(pool *pgxpool.Pool, ttl time.Duration) *Authenticator {
	return &Authenticator{pool: pool, ttl: ttl, cache: map[[32]byte]cached{}}
}

// maxCached bounds the cache, so a flood of random tokens cannot grow it.
const maxCached = 10_000

// Authenticate returns the key for token, or ErrUnknownKey.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Key, error) {
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	c, ok := a.cache[sum]
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.key, c.err
	}

	var key Key
	row, err := db.New(a.pool).APIKeyGetByHash(ctx, sum[:])
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = ErrUnknownKey
	case err != nil:
		return Key{}, fmt.Errorf("look up API key: %w", err)
	default:
		key = Key{ID: row.ID, Name: row.Name, Role: Role(row.Role)}
	}

	a.mu.Lock()
	if len(a.cache) >= maxCached {
		clear(a.cache)
	}
	a.cache[sum] = cached{key: key, err: err, expires: now.Add(a.ttl)}
	a.mu.Unlock()
	return key, err
}
