// Package idempotency makes a change safe to retry: the first request's
// result is stored in the same transaction as the change it made, and a
// retry with the same key and request gets that result again. The domain
// services use it for their creating calls (a stock adjustment, a
// campaign, a rollback, ...); holds do not, as a hold's own row is its
// idempotency record.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
)

// Key identifies one request: who sent it, the key it carried, and the
// hash of what it asked (see Hash), which a retry must match.
type Key struct {
	Client string
	Key    string
	Hash   string
}

// NewKey returns the key of a request that client sent with key, made of
// parts (the method, the path and the body, say).
func NewKey(client, key string, parts ...[]byte) Key {
	return Key{Client: client, Key: key, Hash: Hash(parts...)}
}

// Hash identifies a request by the parts that make it what it is.
func Hash(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// storedStatus is the status_code of a stored result.
const storedStatus = 200

// Do runs fn once per (client, key). The first call claims the key and runs
// fn in a transaction on pool; fn's result is stored, as JSON, in that same
// transaction, so it exists if and only if fn's change committed. A
// concurrent call with the same key waits for the first to finish, then
// gets its result decoded into T (replayed is true); one with the same key
// but another hash gets domain.ErrKeyReused. If fn fails, nothing is stored
// and a retry runs fn afresh. T must survive a JSON round trip.
func Do[T any](ctx context.Context, pool *pgxpool.Pool, k Key, fn func(pgx.Tx) (T, error)) (out T, replayed bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		_, err := q.IdempotencyKeyClaim(ctx, k.Client, k.Key, k.Hash)
		if errors.Is(err, pgx.ErrNoRows) {
			stored, err := q.IdempotencyKeyGet(ctx, k.Client, k.Key)
			if err != nil {
				return fmt.Errorf("read idempotency key: %w", err)
			}
			if stored.RequestHash != k.Hash {
				return domain.ErrKeyReused
			}
			replayed = true
			if err := json.Unmarshal(stored.Response, &out); err != nil {
				return fmt.Errorf("decode the stored answer of idempotency key %q: %w", k.Key, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		if out, err = fn(tx); err != nil {
			return err
		}
		body, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("encode the answer of idempotency key %q: %w", k.Key, err)
		}
		// The result is the domain's; each endpoint answers it, fresh or
		// replayed, with its one success status. status_code says success
		// for binaries before this one, which replayed the stored status.
		return q.IdempotencyKeyStore(ctx, db.IdempotencyKeyStoreParams{
			StatusCode: storedStatus, Response: body, Client: k.Client, Key: k.Key,
		})
	})
	return out, replayed, err
}
