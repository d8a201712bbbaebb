// Package idempotency makes a POST that creates something safe to retry:
// the first request's answer is stored in the same transaction as the change
// it made, and a retry with the same key and body gets that answer again.
// Holds do not use it; a hold's own row is its idempotency record.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// ErrReused means the key was used before with a different request.
var ErrReused = errors.New("idempotency key reused with a different request")

// Answer is a stored response.
type Answer struct {
	Status int
	Body   []byte
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

// Do runs fn once per (client, key). The first call claims the key and runs
// fn in a transaction; fn's answer is stored in that same transaction, so it
// exists if and only if fn's change committed. A concurrent call with the
// same key waits for the first to finish, then replays its answer (replayed
// is true). If fn fails, nothing is stored and a retry runs fn afresh.
func Do(ctx context.Context, pool *pgxpool.Pool, client, key, hash string, fn func(pgx.Tx) (Answer, error)) (ans Answer, replayed bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		_, err := q.IdempotencyKeyClaim(ctx, client, key, hash)
		if errors.Is(err, pgx.ErrNoRows) {
			stored, err := q.IdempotencyKeyGet(ctx, client, key)
			if err != nil {
				return fmt.Errorf("read idempotency key: %w", err)
			}
			if stored.RequestHash != hash {
				return ErrReused
			}
			ans, replayed = Answer{Status: int(stored.StatusCode), Body: stored.Response}, true
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		if ans, err = fn(tx); err != nil {
			return err
		}
		return q.IdempotencyKeyStore(ctx, db.IdempotencyKeyStoreParams{
			StatusCode: int32(ans.Status), Response: ans.Body, Client: client, Key: key,
		})
	})
	return ans, replayed, err
}
