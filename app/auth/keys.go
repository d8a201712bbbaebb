package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// Listed is a key as `stockhold apikey list` shows it: never its token.
type Listed struct {
	ID        int64
	Name      string
	Role      Role
	CreatedAt time.Time
	// RevokedAt is nil while the key is in use; a time to come is the
	// grace period of a rotated key.
	RevokedAt *time.Time
	// Locations binds the key's holds to those locations (nil: all).
	Locations []string
	// Strategy is the allocation strategy of its holds (empty: priority).
	Strategy string
}

// List returns every key, revoked ones included, by name.
func List(ctx context.Context, pool *pgxpool.Pool) ([]Listed, error) {
	rows, err := db.New(pool).APIKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	out := make([]Listed, len(rows))
	for i, r := range rows {
		out[i] = Listed{ID: r.ID, Name: r.Name, Role: Role(r.Role), CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt, Locations: r.Locations,
			Strategy: value(r.Strategy)}
	}
	return out, nil
}

// Revoked is what a revocation did.
type Revoked struct {
	IDs []int64
	// At is when the keys stop working (now, or the end of a grace period).
	At time.Time
}

// Revoke stops every key named name, at once: the key in use, and a rotated
// one still in its grace period. Their console sessions end in the same
// transaction. Every instance refuses the keys within CacheTTL (each caches
// lookups that long). No such key is ErrNoKey.
func Revoke(ctx context.Context, pool *pgxpool.Pool, name string) (Revoked, error) {
	var out Revoked
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		out, err = revokeTx(ctx, db.New(tx), name, 0)
		if err != nil {
			return err
		}
		if len(out.IDs) == 0 {
			return fmt.Errorf("%q: %w", name, ErrNoKey)
		}
		return db.New(tx).OpsSessionsDeleteForKeys(ctx, out.IDs)
	})
	return out, err
}

func revokeTx(ctx context.Context, q *db.Queries, name string, grace time.Duration) (Revoked, error) {
	rows, err := q.APIKeysRevoke(ctx, grace.Seconds(), name)
	if err != nil {
		return Revoked{}, fmt.Errorf("revoke API key %q: %w", name, err)
	}
	var out Revoked
	for _, r := range rows {
		out.IDs = append(out.IDs, r.ID)
		if r.RevokedAt != nil {
			out.At = *r.RevokedAt
		}
	}
	return out, nil
}

// Rotated is a rotation's new token and what happened to the old key.
type Rotated struct {
	Token string
	Role  Role
	// Old is the key the new one replaces (none on a first rotation).
	Old *Revoked
}

// Rotate issues a new token for name in one transaction: the key in use
// under that name stops working after grace (0: at once), so a shop can
// deploy the new token before the old one goes, and a new key with the same
// name (the same owner: its holds and idempotency keys carry over) takes
// its place. role may be empty to keep the old key's; with no key named
// name, Rotate creates one and role is required.
func Rotate(ctx context.Context, pool *pgxpool.Pool, name string, role Role, grace time.Duration) (Rotated, error) {
	return RotateWith(ctx, pool, name, role, grace, RotateOptions{})
}

// RotateOptions change what a rotation's new key carries over.
type RotateOptions struct {
	// Strategy, when set, is the new key's default allocation strategy
	// ("" for none: priority); nil keeps the old key's.
	Strategy *string
}

// RotateWith is Rotate with o.
func RotateWith(ctx context.Context, pool *pgxpool.Pool, name string, role Role, grace time.Duration, o RotateOptions) (Rotated, error) {
	if err := validName(name); err != nil {
		return Rotated{}, err
	}
	if role != "" {
		if _, err := ParseRole(string(role)); err != nil {
			return Rotated{}, err
		}
	}
	if grace < 0 {
		return Rotated{}, fmt.Errorf("grace must not be negative")
	}
	var out Rotated
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		old, err := q.APIKeyLockLive(ctx, name)
		var (
			locations []string
			strategy  *string
		)
		switch {
		case err == nil:
			if role == "" {
				role = Role(old.Role)
			}
			if role == Role(old.Role) {
				locations = old.Locations // the new key sells where the old one did
			}
			strategy = old.Strategy
			rev, err := revokeTx(ctx, q, name, grace)
			if err != nil {
				return err
			}
			out.Old = &rev
			if grace == 0 {
				if err := q.OpsSessionsDeleteForKeys(ctx, rev.IDs); err != nil {
					return err
				}
			}
		case errors.Is(err, pgx.ErrNoRows) && role == "":
			return fmt.Errorf("%q: %w: give a role to create it", name, ErrNoKey)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("look up API key %q: %w", name, err)
		}
		if o.Strategy != nil {
			strategy = nil
			if *o.Strategy != "" {
				strategy = o.Strategy
			}
		}
		token, sum, err := newToken()
		if err != nil {
			return err
		}
		if _, err := q.APIKeyCreate(ctx, db.APIKeyCreateParams{Name: name, Role: string(role), TokenSha256: sum[:], Locations: locations,
			Strategy: strategy}); err != nil {
			if isNameTaken(err) {
				return fmt.Errorf("%q: %w", name, ErrNameTaken)
			}
			return fmt.Errorf("store API key: %w", err)
		}
		out.Token, out.Role = token, role
		return nil
	})
	return out, err
}

// MaxLocations bounds the locations one key is bound to.
const MaxLocations = 100

// validLocations checks the locations a key is bound to: a shop key's, at
// most MaxLocations, each a location that exists.
func validLocations(ctx context.Context, q *db.Queries, role Role, locations []string) error {
	if locations == nil {
		return nil
	}
	switch {
	case role != RoleShop:
		return fmt.Errorf("locations bind a shop key's holds (a sales channel): an %s key has none", role)
	case len(locations) == 0 || len(locations) > MaxLocations:
		return fmt.Errorf("give 1 to %d locations", MaxLocations)
	}
	found, err := q.LocationsGet(ctx, locations)
	if err != nil {
		return fmt.Errorf("look up locations: %w", err)
	}
	for _, id := range locations {
		if !slices.ContainsFunc(found, func(l db.Location) bool { return l.ID == id }) {
			return fmt.Errorf("location %q does not exist (POST /v1/locations or stockhold locations create adds one)", id)
		}
	}
	return nil
}
