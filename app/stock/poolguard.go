package stock

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/stockhold/stockhold/app/db"
)

// A SKU's pool of units with an identity lives at one location, alone: no
// row of the pool at another location holds stock without an identity or
// expects some (incoming), and units are never added to a pool that has
// either. The checks read rows another transaction may be writing, a row
// it is creating included, which no row lock covers; so each side first
// takes an advisory lock of the pool, until its transaction ends, and only
// then reads:
//
//   - an addition of units takes its pool's exact key and bucket key
//     exclusively (addUnitsTx);
//   - what may put stock without an identity on a row of the pool (a
//     stock-in, a transfer, a count) takes the exact key shared
//     (notSerializedElsewhere); a bulk adjustment, which may touch a
//     thousand pools, takes their bucket keys shared (at most
//     guardBuckets locks a transaction).
//
// Shared locks never wait for one another: only an addition of units
// waits, or is waited for, and only on its own pool (or a pool of its
// bucket, for a bulk adjustment).

// guardBuckets is how many bucket keys pools share.
const guardBuckets = 64

// guardBase puts the bucket keys apart from every other advisory key.
const guardBase = int64(0x73686c64) << 32 // "shld"

// guardKeys are a pool's exact and bucket advisory keys.
func guardKeys(sku, pool string) (exact, bucket int64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte("stockhold.pool\x1f" + sku + "\x1f" + pool))
	sum := h.Sum64()
	return int64(sum), guardBase + int64(sum%guardBuckets)
}

// guardUnits takes the exclusive side for an addition of units to sku's
// pool.
func guardUnits(ctx context.Context, q *db.Queries, sku, pool string) error {
	exact, bucket := guardKeys(sku, pool)
	if err := q.StockPoolsGuard(ctx, []int64{exact, bucket}); err != nil {
		return fmt.Errorf("guard %s/%s: %w", sku, pool, err)
	}
	return nil
}

// guardPlain takes the shared side for stock without an identity on a row
// of sku's pool.
func guardPlain(ctx context.Context, q *db.Queries, sku, pool string) error {
	exact, _ := guardKeys(sku, pool)
	if err := q.StockPoolsGuardShared(ctx, []int64{exact}); err != nil {
		return fmt.Errorf("guard %s/%s: %w", sku, pool, err)
	}
	return nil
}

// guardPlainMany takes the shared side for many pools at once, by bucket.
func guardPlainMany(ctx context.Context, q *db.Queries, skus, pools []string) error {
	var keys []int64
	for i := range skus {
		_, bucket := guardKeys(skus[i], pools[i])
		keys = append(keys, bucket)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 0 {
		return nil
	}
	if err := q.StockPoolsGuardShared(ctx, keys); err != nil {
		return fmt.Errorf("guard pools: %w", err)
	}
	return nil
}
