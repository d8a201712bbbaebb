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
	"github.com/jackc/pgx/v5/pgconn"
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
	// Locations, when not nil, are the only locations this key's holds
	// take stock from (a sales channel).
	Locations []string
	// Strategy is how the key's holds that name none are allocated
	// (priority, most_stock, nearest); empty: priority.
	Strategy string
}

// ErrUnknownKey means the token matches no live key.
var ErrUnknownKey = errors.New("unknown or revoked API key")

// tokenPrefix marks stockhold tokens so they are easy to spot in logs and
// secret scanners.
const tokenPrefix = "sh_"

// ErrNameTaken means a key in use already has the name: names are owners,
// unique among live keys. Rotate that key, or revoke it first.
var ErrNameTaken = errors.New("a key in use already has this name")

// ErrNoKey means no key in use has the name.
var ErrNoKey = errors.New("no key in use has this name")

func newToken() (token string, sum [32]byte, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", sum, err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, sha256.Sum256([]byte(token)), nil
}

func validName(name string) error {
	if name == "" || len(name) > 64 {
		return errors.New("name must be 1 to 64 bytes")
	}
	return nil
}

// Create issues a key and returns its token, which is shown only this once.
// A name already in use by a live key is ErrNameTaken.
func Create(ctx context.Context, pool *pgxpool.Pool, name string, role Role) (string, error) {
	return CreateBound(ctx, pool, name, role, nil)
}

// CreateBound is Create for a shop key whose holds take stock only at
// locations (a sales channel); nil binds it to none (every location).
// Each location must exist.
func CreateBound(ctx context.Context, pool *pgxpool.Pool, name string, role Role, locations []string) (string, error) {
	return CreateWith(ctx, pool, name, role, Options{Locations: locations})
}

// Options are what a key may carry besides its name and role.
type Options struct {
	// Locations binds a shop key's holds to those locations (nil: every
	// location); each must exist.
	Locations []string
	// Strategy is the allocation strategy of the key's holds that name
	// none (empty: priority): the database's CHECK api_keys_strategy
	// refuses any other than priority, most_stock or nearest.
	Strategy string
}

// CreateWith is Create with the key's options.
func CreateWith(ctx context.Context, pool *pgxpool.Pool, name string, role Role, o Options) (string, error) {
	locations := o.Locations
	if err := validName(name); err != nil {
		return "", err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", err
	}
	if err := validLocations(ctx, db.New(pool), role, locations); err != nil {
		return "", err
	}
	token, sum, err := newToken()
	if err != nil {
		return "", err
	}
	if _, err := db.New(pool).APIKeyCreate(ctx, db.APIKeyCreateParams{Name: name, Role: string(role), TokenSha256: sum[:], Locations: locations,
		Strategy: optional(o.Strategy)}); err != nil {
		if isNameTaken(err) {
			return "", fmt.Errorf("%q: %w", name, ErrNameTaken)
		}
		return "", fmt.Errorf("store API key: %w", err)
	}
	return token, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func value(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func isNameTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "api_keys_live_name"
}

// CacheTTL is how long an Authenticator trusts a lookup: a key revoked on
// any instance (or in psql) is refused by every instance within it, and a
// busy shop costs one query per instance per CacheTTL instead of one per
// request.
const CacheTTL = 3 * time.Second

// MaxCacheTTL bounds the TTL an Authenticator accepts: revocation must
// take effect everywhere within 5 seconds, lookup included.
const MaxCacheTTL = 4 * time.Second

// Authenticator looks tokens up, remembering answers for a short while. A
// revoked key stops working within the cache's TTL; a key whose revocation
// time is nearer than that is trusted only until then.
type Authenticator struct {
	pool *pgxpool.Pool
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	key     Key
	err     error
	expires time.Time
}

// NewAuthenticator returns an Authenticator that caches lookups for ttl,
// at most MaxCacheTTL.
func NewAuthenticator(pool *pgxpool.Pool, ttl time.Duration) *Authenticator {
	return &Authenticator{pool: pool, ttl: min(ttl, MaxCacheTTL), now: time.Now, cache: map[[32]byte]cached{}}
}

// maxCached bounds the cache, so a flood of random tokens cannot grow it.
const maxCached = 10_000

// Authenticate returns the key for token, or ErrUnknownKey.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Key, error) {
	sum := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[sum]
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.key, c.err
	}

	var key Key
	expires := now.Add(a.ttl)
	row, err := db.New(a.pool).APIKeyGetByHash(ctx, sum[:])
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = ErrUnknownKey
	case err != nil:
		return Key{}, fmt.Errorf("look up API key: %w", err)
	default:
		key = Key{ID: row.ID, Name: row.Name, Role: Role(row.Role), Locations: row.Locations, Strategy: value(row.Strategy)}
		if row.RevokedAt != nil && row.RevokedAt.Before(expires) {
			// A rotated key in its grace period: trusted until it ends.
			expires = *row.RevokedAt
		}
	}

	a.mu.Lock()
	if len(a.cache) >= maxCached {
		clear(a.cache)
	}
	a.cache[sum] = cached{key: key, err: err, expires: expires}
	a.mu.Unlock()
	return key, err
}
