package inventory

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/db"
)

// A retry of a granted hold gets its first answer, even from an instance
// that remembers the pool sold out (soldout.go).
//
// A client whose hold was granted on one instance may send the same
// request again, with the same Idempotency-Key, through a load balancer
// that picks another, a millisecond later. That instance may remember the
// pool sold out from a read made before the grant: memory alone cannot
// tell that the key made a hold. So a hold memory would refuse first looks
// its key up (ReservationKeysMade, by the unique index on client and key),
// in a lookup that starts after the request arrived, so it sees every hold
// committed before: a grant answered before the retry was sent. A key
// that made a hold with the same body gets the first answer, read from
// that hold (Service.replay) without locking the stock rows a batch locks:
// a replay changes no stock, so it neither waits for a row that other
// transactions keep hot nor answers busy. A key used with another body is
// 422 idempotency_key_reused; any other is refused from memory. A failed
// lookup or read goes to a batch. The lookups go one at a time through a batcher (with no rows to
// wait for), each carrying every request that waited meanwhile, so a
// sold-out rush costs PostgreSQL one indexed read of many keys per
// flight, not a transaction with locks per refusal.

// A retry that arrives while its first attempt is still in a batch of
// this instance goes to the batches too, which answer it once the first
// is decided (a batch takes one request per key; the next replays it):
// the lookup sees only what is committed. A first attempt still
// uncommitted on another instance is not seen: its retry may be refused
// from memory, out_of_stock, as it would be had it come first.

// keysInFlight counts, per (client, key), the holds this instance's
// batches have not answered yet.
type keysInFlight struct {
	mu sync.Mutex
	n  map[[2]string]int
}

// add counts one in flight; the function it returns counts it answered.
func (k *keysInFlight) add(client, key string) func() {
	id := [2]string{client, key}
	k.mu.Lock()
	if k.n == nil {
		k.n = map[[2]string]int{}
	}
	k.n[id]++
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		if k.n[id]--; k.n[id] <= 0 {
			delete(k.n, id)
		}
		k.mu.Unlock()
	}
}

func (k *keysInFlight) has(client, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n[[2]string{client, key}] > 0
}

// keyCall is one hold refused from memory waiting for the lookup of its
// key.
type keyCall struct {
	ctx         context.Context
	client, key string
	done        chan keyMade
}

// keyMade is what a lookup found: the hold made with the key, if any.
type keyMade struct {
	made bool
	id   uuid.UUID
	hash string
	err  error
}

func (c *keyCall) Keys() []string   { return nil }
func (c *keyCall) Gone() bool       { return c.ctx.Err() != nil }
func (c *keyCall) Answer(err error) { c.reply(keyMade{err: err}) }

func (c *keyCall) reply(r keyMade) {
	select {
	case c.done <- r:
	default:
	}
}

// keyUsed looks up whether client's key made a hold, in a lookup that
// starts after the call.
func (s *Service) keyUsed(ctx context.Context, client, key string) keyMade {
	c := &keyCall{ctx: ctx, client: client, key: key, done: make(chan keyMade, 1)}
	s.replays.Submit(c)
	select {
	case r := <-c.done:
		return r
	case <-ctx.Done():
		return keyMade{err: ctx.Err()}
	}
}

// runKeyLookups looks up a batch of keys in one statement and answers
// each call.
func (s *Service) runKeyLookups(ctx context.Context, calls []*keyCall) []*keyCall {
	clients, keys := make([]string, len(calls)), make([]string, len(calls))
	for i, c := range calls {
		clients[i], keys[i] = c.client, c.key
	}
	rows, err := db.New(s.pool).ReservationKeysMade(ctx, clients, keys)
	if err != nil {
		for _, c := range calls {
			c.Answer(err)
		}
		return nil
	}
	made := make(map[[2]string]db.ReservationKeysMadeRow, len(rows))
	for _, r := range rows {
		made[[2]string{r.Client, r.IdempotencyKey}] = r
	}
	for _, c := range calls {
		r, ok := made[[2]string{c.client, c.key}]
		c.reply(keyMade{made: ok, id: r.ID, hash: r.RequestHash})
	}
	return nil
}
