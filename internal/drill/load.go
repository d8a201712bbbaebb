package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Kinds of acknowledged operations.
const (
	opHold    = "hold"
	opConfirm = "confirm"
	opRelease = "release"
	opPartial = "partial_release"
)

// op is an operation a client saw acknowledged (2xx): what must be on the
// final primary.
type op struct {
	kind string
	hold uuid.UUID
	// items of a hold; the SKU a partial release handed a unit of.
	items []item
	sku   string
	at    time.Time
}

type item struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// load is the drill's clients and what they saw.
type load struct {
	shop      string
	instances []*instance
	skus      []string

	mu      sync.Mutex
	acked   []op
	answers map[string]int // "hold 201", "confirm 503", "release error", ...
	// serverErrors are 5xx answers other than 503, with their bodies.
	serverErrors []string
	gaveUp       int
	expiring     int
}

func (l *load) note(kind string, status int, err error) {
	k := fmt.Sprintf("%s %d", kind, status)
	if err != nil {
		k = kind + " error"
	}
	l.mu.Lock()
	l.answers[k]++
	l.mu.Unlock()
}

func (l *load) ack(o op) {
	l.mu.Lock()
	l.acked = append(l.acked, o)
	l.mu.Unlock()
}

// run drives one client until ctx ends: holds of one to three SKUs, each
// then confirmed, released, partly released and then confirmed or
// released, or left to expire. Every request that gets 503 or no answer is
// sent again with the same Idempotency-Key, as a checkout would, to the
// other instance half of the time.
func (l *load) run(ctx context.Context, client int) {
	rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	for seq := 0; ctx.Err() == nil; seq++ {
		n := 1
		if rng.IntN(3) == 0 {
			n = 2 + rng.IntN(2)
		}
		items := make([]item, 0, n)
		for _, i := range rng.Perm(len(l.skus))[:n] {
			items = append(items, item{SKU: l.skus[i], Quantity: int64(1 + rng.IntN(3))})
		}
		expire := rng.IntN(10) < 3
		ttl := 300
		if expire {
			ttl = 2 + rng.IntN(3)
		}
		key := fmt.Sprintf("drill-%d-%d", client, seq)
		body := map[string]any{"order_ref": key, "items": items, "ttl_seconds": ttl}
		var hold struct {
			ID    uuid.UUID `json:"id"`
			Items []item    `json:"items"`
		}
		if !l.send(ctx, rng, opHold, http.MethodPost, "/v1/reservations", key, body, http.StatusCreated, &hold) {
			continue
		}
		l.ack(op{kind: opHold, hold: hold.ID, items: hold.Items, at: time.Now()})
		if expire {
			l.mu.Lock()
			l.expiring++
			l.mu.Unlock()
			continue
		}
		path := "/v1/reservations/" + hold.ID.String()
		switch r := rng.IntN(100); {
		case r < 45:
			l.transition(ctx, rng, opConfirm, path+"/confirm", hold.ID)
		case r < 70:
			l.transition(ctx, rng, opRelease, path+"/release", hold.ID)
		default:
			// Hand back one unit of a line that has more than one, then
			// confirm or release the rest.
			line := -1
			for i, it := range hold.Items {
				if it.Quantity > 1 {
					line = i
					break
				}
			}
			if line >= 0 {
				sku := hold.Items[line].SKU
				body := map[string]any{"reason": "drill", "items": []item{{SKU: sku, Quantity: 1}}}
				if l.send(ctx, rng, opPartial, http.MethodPost, path+"/release", key+"-p", body, http.StatusOK, nil) {
					l.ack(op{kind: opPartial, hold: hold.ID, sku: sku, at: time.Now()})
				}
			}
			if rng.IntN(2) == 0 {
				l.transition(ctx, rng, opConfirm, path+"/confirm", hold.ID)
			} else {
				l.transition(ctx, rng, opRelease, path+"/release", hold.ID)
			}
		}
	}
}

func (l *load) transition(ctx context.Context, rng *rand.Rand, kind, path string, id uuid.UUID) {
	var body any
	if kind == opRelease {
		body = map[string]any{"reason": "drill"}
	}
	if l.send(ctx, rng, kind, http.MethodPost, path, "", body, http.StatusOK, nil) {
		l.ack(op{kind: kind, hold: id, at: time.Now()})
	}
}

// send sends one request until it gets an answer other than 503 (or no
// answer at all), for up to 60 s, and reports whether it got want. A 5xx
// other than 503 is recorded: the drill fails on any.
func (l *load) send(ctx context.Context, rng *rand.Rand, kind, method, path, key string, body any, want int, out any) bool {
	deadline := time.Now().Add(60 * time.Second)
	in := l.instances[rng.IntN(len(l.instances))]
	for {
		// The request goes on after the drill stops the load: an operation
		// sent must get its answer, or it would be neither acknowledged
		// nor known to have failed.
		a, err := in.do(context.WithoutCancel(ctx), method, path, l.shop, key, body)
		l.note(kind, a.status, err)
		switch {
		case err == nil && a.status == want:
			if out != nil {
				if err := json.Unmarshal(a.body, out); err != nil {
					l.mu.Lock()
					l.serverErrors = append(l.serverErrors, fmt.Sprintf("%s %s: undecodable %s", method, path, a.body))
					l.mu.Unlock()
					return false
				}
			}
			return true
		case err == nil && a.status >= 500 && a.status != http.StatusServiceUnavailable:
			l.mu.Lock()
			l.serverErrors = append(l.serverErrors, fmt.Sprintf("%s %s: %d %s", method, path, a.status, a.body))
			l.mu.Unlock()
		case err == nil && a.status != http.StatusServiceUnavailable:
			return false // refused for good (a confirm of a hold that expired, say)
		}
		if time.Now().After(deadline) {
			l.mu.Lock()
			l.gaveUp++
			l.mu.Unlock()
			return false
		}
		if rng.IntN(2) == 0 {
			in = l.instances[rng.IntN(len(l.instances))]
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeGap is the longest time, around at, during which no write was
// acknowledged: the largest gap between consecutive acknowledgements that
// ends after at and starts before at+within.
func writeGap(acks []time.Time, at time.Time, within time.Duration) time.Duration {
	var longest time.Duration
	for i := 1; i < len(acks); i++ {
		if acks[i].After(at) && acks[i-1].Before(at.Add(within)) {
			longest = max(longest, acks[i].Sub(acks[i-1]))
		}
	}
	return longest
}

func (l *load) ackTimes() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]time.Time, len(l.acked))
	for i, o := range l.acked {
		out[i] = o.at
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
