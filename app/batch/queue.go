// Package batch is the machinery of a batch, free of what it carries: the
// Queue that gathers requests into batches, one transaction per batch, in
// flights, keeping two batches off the same rows (group commit); and the
// Pipe that sends a batch step's sqlc batch calls to PostgreSQL in one
// round trip. The hold engine (app/inventory) builds its hold batch, its
// change batch and the changes it joins to a hold batch on them.
package batch

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// request is what a batcher gathers: one caller's hold, confirm or release.
type Request interface {
	// Keys names the rows the request locks. Two requests that share a key
	// are never in two batches at once: the second waits for the first's
	// batch to end, then goes with the next one, which is what it would
	// have done anyway, queued on the row lock, but with company.
	Keys() []string
	// gone reports that the caller stopped waiting.
	Gone() bool
	// answer gives the caller its answer; only the first one counts.
	Answer(error)
}

// batcher is group commit: it gathers the requests that arrive while
// earlier batches run and runs them together, one transaction per batch,
// up to flights batches at once, each on its own connection. A request
// that finds no flight running goes at once, alone if need be, so a lone
// request never waits for company. A request that finds a flight running
// waits for it to land and goes with the next batch, along with what else
// arrived meanwhile, unless company requests are already waiting or the
// youngest flight has been out for longer than batches usually take
// (patience): then another flight goes at once. So a request waits for
// company at most about as long as it would have waited for the database
// anyway, and under load batches grow by themselves to what arrived
// during the previous round trip, on every flight.
//
// Launching a flight whenever one is free would make batches of one or
// two under moderate load, each paying a transaction's fixed cost (begin,
// settings, commit and its WAL flush, two round trips, on both the server
// and PostgreSQL); docs/internals/DESIGN_NOTES.md says more.
//
// requests wait in arrival order, and a request whose rows an in-flight
// batch holds waits for that batch (see request.keys).
type Queue[R Request] struct {
	name     string
	maxBatch int
	flights  int
	// run runs one batch and answers each of its requests; it returns the
	// requests that must go again with a later batch.
	run func(ctx context.Context, batch []R) (again []R)
	// timeout bounds one batch.
	timeout time.Duration
	// panicked is told when a batch panics (the batch's callers get an
	// error, the process goes on).
	panicked func(name string, v any, stack []byte)

	// company is how many waiting requests launch another flight while
	// one is out.
	company int

	mu      sync.Mutex
	pending []R
	flying  int
	// launched is when the youngest flight went; took is the running
	// average of how long batches take, which bounds how long requests
	// wait for a flight to land before another goes (see patience).
	launched time.Time
	took     time.Duration
	// waking is a timer that launches a flight once patience runs out
	// for requests left waiting.
	waking  *time.Timer
	busy    map[string]int  // keys of the requests in flight
	blocked map[string]bool // keys found locked by another transaction
}

func NewQueue[R Request](name string, maxBatch, flights int, timeout time.Duration,
	run func(context.Context, []R) []R, panicked func(string, any, []byte)) *Queue[R] {
	maxBatch = max(maxBatch, 1)
	return &Queue[R]{
		name: name, maxBatch: maxBatch, flights: max(flights, 1), timeout: timeout,
		run: run, panicked: panicked, busy: map[string]int{}, blocked: map[string]bool{},
		company: companyOf(maxBatch), took: time.Millisecond,
	}
}

// companyOf is the number of waiting requests that launch another flight
// at once: an eighth of a full batch, at most 16. Without coalescing
// (batches of one) it is 1: every request goes as soon as a flight is free.
func companyOf(maxBatch int) int { return max(1, min(maxBatch/8, 16)) }

// Bounds of patience: how long requests wait for a flight to land before
// another goes, whatever the batches took lately.
const (
	minPatience = 250 * time.Microsecond
	maxPatience = 5 * time.Millisecond
)

// patience is how long requests that find a flight out wait for it to
// land before another flight goes: about what a batch takes.
func (b *Queue[R]) patienceLocked() time.Duration {
	return min(max(b.took, minPatience), maxPatience)
}

// submit queues r. When a flight may go (see batcher), the caller's own
// goroutine flies the next batch (with r in it, unless r is behind a full
// batch or a busy row), which saves a lone request the hand-over to
// another goroutine; the rest go on goroutines of their own.
func (b *Queue[R]) Submit(r R) {
	b.mu.Lock()
	b.pending = append(b.pending, r)
	if !b.mayLaunchLocked() {
		b.mu.Unlock()
		return
	}
	batch := b.takeLocked()
	if len(batch) == 0 {
		b.mu.Unlock()
		return
	}
	b.startLocked()
	b.launchLocked()
	b.mu.Unlock()
	b.fly(batch)
}

// mayLaunchLocked reports whether another flight may go now: one is free,
// and none is out, or company is waiting, or patience ran out. When only
// patience is missing, it arms the timer that launches then.
func (b *Queue[R]) mayLaunchLocked() bool {
	switch {
	case b.flying >= b.flights || len(b.pending) == 0:
		return false
	case b.flying == 0 || len(b.pending) >= b.company:
		return true
	}
	wait := b.patienceLocked() - time.Since(b.launched)
	if wait <= 0 {
		return true
	}
	if b.waking == nil {
		b.waking = time.AfterFunc(wait, func() {
			b.mu.Lock()
			b.waking = nil
			b.launchLocked()
			b.mu.Unlock()
		})
	}
	return false
}

// startLocked counts a flight that goes now.
func (b *Queue[R]) startLocked() {
	b.flying++
	b.launched = time.Now()
}

// launchLocked starts flights while they may go and requests can.
func (b *Queue[R]) launchLocked() {
	for b.mayLaunchLocked() {
		batch := b.takeLocked()
		if len(batch) == 0 {
			return
		}
		b.startLocked()
		go b.fly(batch)
	}
}

// takeLocked picks the next batch: pending requests in arrival order whose
// rows no flight holds, up to maxBatch. requests on rows found locked by
// another transaction go in batches of their own, so that they do not make
// everyone else wait out the lock timeout with them.
func (b *Queue[R]) takeLocked() []R {
	var (
		batch []R
		rest  = b.pending[:0]
		kind  = -1 // 0: ordinary batch, 1: batch of requests on blocked rows
	)
	for _, r := range b.pending {
		if r.Gone() {
			r.Answer(context.Canceled)
			continue
		}
		if len(batch) == b.maxBatch || b.busyLocked(r) {
			rest = append(rest, r)
			continue
		}
		k := 0
		if b.blockedLocked(r) {
			k = 1
		}
		if kind >= 0 && k != kind {
			rest = append(rest, r)
			continue
		}
		kind = k
		batch = append(batch, r)
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	for _, r := range batch {
		for _, k := range r.Keys() {
			b.busy[k]++
		}
	}
	return batch
}

func (b *Queue[R]) busyLocked(r R) bool {
	for _, k := range r.Keys() {
		if b.busy[k] > 0 {
			return true
		}
	}
	return false
}

func (b *Queue[R]) blockedLocked(r R) bool {
	if len(b.blocked) == 0 {
		return false
	}
	for _, k := range r.Keys() {
		if b.blocked[k] {
			return true
		}
	}
	return false
}

// fly runs one batch, then lets the next ones go.
func (b *Queue[R]) fly(batch []R) {
	began := time.Now()
	again := b.runSafely(batch)
	took := time.Since(began)
	b.mu.Lock()
	b.took += (took - b.took) / 8
	for _, r := range batch {
		for _, k := range r.Keys() {
			if b.busy[k]--; b.busy[k] <= 0 {
				delete(b.busy, k)
			}
		}
	}
	if len(again) > 0 {
		b.pending = append(again, b.pending...)
	}
	b.flying--
	b.launchLocked()
	b.mu.Unlock()
}

// runSafely runs a batch; a panic becomes an error answer for each of its
// callers and a report, never a crashed process.
func (b *Queue[R]) runSafely(batch []R) (again []R) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			err := fmt.Errorf("%s batch of %d panicked: %v", b.name, len(batch), v)
			for _, r := range batch {
				r.Answer(err)
			}
			again = nil
			if b.panicked != nil {
				b.panicked(b.name, v, stack)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	return b.run(ctx, batch)
}

// block marks keys as locked by another transaction; unblock clears them.
func (b *Queue[R]) Block(keys []string) {
	b.mu.Lock()
	for _, k := range keys {
		b.blocked[k] = true
	}
	b.mu.Unlock()
}

func (b *Queue[R]) Unblock(keys []string) {
	b.mu.Lock()
	for _, k := range keys {
		delete(b.blocked, k)
	}
	b.mu.Unlock()
}

// inFlight reports whether a flight is out with one of keys.
func (b *Queue[R]) InFlight(keys []string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		if b.busy[k] > 0 {
			return true
		}
	}
	return false
}

// anyBlocked reports whether a request of batch needs a row found locked.
func (b *Queue[R]) AnyBlocked(batch []R) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range batch {
		if b.blockedLocked(r) {
			return true
		}
	}
	return false
}

// Pending is how many requests wait for a batch.
func (b *Queue[R]) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
