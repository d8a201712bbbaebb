package torture_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/dbtest"
)

// Where features meet: scenes, each combining two of
// five features, run beside everything else. Bugs of this kind need two
// features at once (a campaign at a second warehouse that cannot end; a
// forced count's shortfall back on sale; a bound key reinstating
// elsewhere; a retry on a second instance told "sold out"), so each scene
// runs every hold path and every operator act on SKUs of its own with two
// features switched on:
//
//   - location: the scene's stock is at east and west, not default (its
//     transfers go between them); without it, at default, transfers going
//     to east;
//   - campaign: a campaign takes allotments of the scene's SKUs (at both
//     its locations when it has two), half its holds draw on that pool,
//     the operator moves, transfers, counts, pauses and rolls back in that
//     pool, and the campaign ends (by request or by its own end time)
//     while stock of its pool is moved to quality control or in transit;
//   - seats: the goods are a pool of seats (named, by count, together,
//     named and more), added and retired while held;
//   - bound key: the scene's shop key is bound to its locations; at the
//     scene's end it is revoked and made again bound elsewhere, and the
//     scene reinstates its ended holds with it;
//   - two instances: every request goes to one of two instances of the
//     service on the same database, idempotent retries to the other one,
//     sold-out memory is built up on both, and stock comes back through
//     the other instance.
//
// The seed shuffles the ten pairs; scenes take them in turn, so every pair
// runs once in every ten scenes (a one-minute run sees about ten, a
// ten-minute run every pair many times). What each scene does:
//
//   - buyers hold (allocated, naming a location, split, two lines of one
//     SKU, a line of another SKU beside it, lines at both locations under
//     a campaign's cap; seats by name, by count, together, named and more),
//     then confirm, release, release part, extend, retry (on the other
//     instance when there are two, after a partial release too), reuse a
//     key with another body, let the hold expire or make it overdue, and
//     reinstate ended holds;
//   - an operator adjusts, moves (and writes off), transfers (received,
//     received in part and closed, cancelled, left in transit), counts,
//     pauses and resumes, stops sales at a location and deactivates it
//     for a moment, rolls back by SKU at one location and by ids (and by
//     campaign), previews repairs, pauses and resumes the campaign, adds
//     and retires seats, and tries to add units where plain stock of the
//     SKU lives elsewhere;
//   - a counter holds units of a SKU of its own, counts the shelf below
//     what they hold (forced), lets the holds leave (released, released in
//     part, expired, rolled back, confirmed), resumes, and checks that the
//     units the count found missing did not come back;
//   - a prober sells a SKU of its own out, is refused by the batch and
//     then from memory on every instance in use, reuses a granted key with
//     another body, puts a unit back (added, or released) through one
//     instance, and then retries a granted request on the other at once or
//     asks again past the sold-out memory's bound.
//
// Checked as it goes: every retry of an acknowledged hold answers its
// first answer (status and body); no refusal contradicts the stock it
// read (an out_of_stock whose detail says enough was available; one from
// memory past the bound after stock came back); a bound key's holds and
// reinstates are only where it is bound; a campaign's cap holds across
// lines and locations; a campaign ends when asked (202) and finishes.
// Checked at every checkpoint and at the end (checkSeamsNow): no pool of a
// finished campaign has anything on hand (what was in transit lands in
// main when it arrives or is cancelled: checkSeams); every forced
// count's shortfall is off the shelf once the holds it found have left;
// no hold of a capped campaign has more of a SKU than its cap; a rollback
// scoped to a location handed back only lines there; no SKU's pool is
// units at one location and plain stock at another; campaigns finish within
// 90 s of being asked to or of their end time. At the end: every hold
// made with a bound key is where that key was bound, and every transfer
// left in transit can still be received or cancelled, after which no
// finished campaign's pool has anything incoming.

type feature uint8

const (
	fLocation feature = 1 << iota
	fCampaign
	fSeats
	fBound
	fInstance
)

var featureNames = []struct {
	f    feature
	name string
}{{fLocation, "location"}, {fCampaign, "campaign"}, {fSeats, "seats"}, {fBound, "bound key"}, {fInstance, "two instances"}}

func (f feature) String() string {
	var names []string
	for _, n := range featureNames {
		if f&n.f != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, " + ")
}

// seamPlaces are the locations the scenes with a location use (the rest
// of the run keeps away from them).
var seamPlaces = []string{"east", "west"}

// seams is what the scenes share: the order of the pairs, and what they
// acknowledged and saw.
type seams struct {
	order []feature
	next  atomic.Int64

	mu sync.Mutex
	// scenes counts the scenes run per pair; acts what each pair's scenes
	// did that was acknowledged (or refused as it must be), by name.
	scenes map[feature]int
	acts   map[feature]map[string]int
	// firsts are the first acknowledgments of the scenes' holds, by key
	// owner and Idempotency-Key: what every retry must answer.
	firsts map[string][]byte
	// bound are the holds made or reinstated with a key bound to
	// locations, and those locations.
	bound map[uuid.UUID][]string
	// campaigns are the scenes' campaigns (for the report).
	campaigns int
	// pending are the follow paths no scene has taken yet: buyers take
	// them first, so that a short run on a slow machine takes each.
	pending map[string]bool
	// took is how long the scenes' steps took (setup, run, end).
	took map[string][]time.Duration
	// switching is held while a scene has one of seamPlaces deactivated
	// or stopped: the stretches recorded are then the true ones.
	switching sync.Mutex
}

func newSeams(seed uint64) *seams {
	var pairs []feature
	for i := range featureNames {
		for j := i + 1; j < len(featureNames); j++ {
			pairs = append(pairs, featureNames[i].f|featureNames[j].f)
		}
	}
	r := rand.New(rand.NewPCG(seed, 37))
	r.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	pending := map[string]bool{}
	for _, p := range followPaths {
		pending[p] = true
	}
	return &seams{order: pairs, scenes: map[feature]int{}, acts: map[feature]map[string]int{},
		firsts: map[string][]byte{}, bound: map[uuid.UUID][]string{}, pending: pending, took: map[string][]time.Duration{}}
}

// setupSeams adds the scenes' locations.
func (tr *torture) setupSeams(t *testing.T) {
	t.Helper()
	for i, id := range seamPlaces {
		tr.mustStatus(201, "POST", "/v1/locations", tr.ops, map[string]any{"id": id, "name": id, "priority": 10 + i},
			"Idempotency-Key", "loc-"+id)
	}
}

// seamer runs scenes, one after another, each of the next pair in the
// seed's order. A scene takes 15 to 50 s, by the machine's load: so that
// a short run on a loaded machine still runs the scenes reportSeams
// requires (leastScenes), the seamers go on past the run's end, each
// scene with a phase of its own, until that many began.
func (tr *torture) seamer(ctx context.Context, r *rand.Rand) {
	for {
		sctx := ctx
		if !pace(ctx, r, 200*time.Millisecond) {
			if tr.seams.next.Load() >= leastScenes(tr.duration) {
				return
			}
			sctx = context.WithoutCancel(ctx)
		}
		i := tr.seams.next.Add(1) - 1
		f := tr.seams.order[int(i)%len(tr.seams.order)]
		sc := tr.newScene(r, f, i)
		began := time.Now()
		if sc.setup(sctx, r) {
			sc.tookSince("setup", began)
			sc.run(sctx, r)
		}
		sc.tookSince("scene", began)
		tr.seams.mu.Lock()
		tr.seams.scenes[f]++
		tr.seams.mu.Unlock()
	}
}

// scene is one pair of features at work on SKUs of its own.
type scene struct {
	tr *torture
	f  feature
	// home is where the scene's stock is; away the other place: where
	// its transfers go and, with a location, its second stock.
	home, away string
	// goods are what buyers buy (seats with seats); sold the prober's
	// SKU; counted the counter's.
	goods, sold, counted string
	seatIDs              []string
	campaign             string
	cap                  int64 // the campaign's max_per_order; 0: none

	mu sync.Mutex
	// client is the key owner of the scene's holds; token its key now,
	// bound to binding (nil: unbound).
	client  string
	token   string
	binding []string
	// held are the holds the buyers made (for rollbacks by ids and
	// reinstates); transit the transfers left in transit.
	held    []uuid.UUID
	transit []transitOf
	units   int // a counter for unit ids
	// turns count each kind of turn; offset starts them where the seed
	// says.
	turns  map[string]int
	offset int64
}

type transitOf struct {
	id   uuid.UUID
	pool string
}

func (tr *torture) newScene(r *rand.Rand, f feature, i int64) *scene {
	prefix := fmt.Sprintf("SEAM-%d-%d", tr.seed%1000, i)
	sc := &scene{tr: tr, f: f, home: "default", away: seamPlaces[r.IntN(2)], offset: r.Int64N(1000),
		goods: prefix + "-G", sold: prefix + "-SO", counted: prefix + "-C", client: "torture-shop", token: tr.shop}
	if f&fLocation != 0 {
		k := r.IntN(2)
		sc.home, sc.away = seamPlaces[k], seamPlaces[1-k]
	}
	if f&fCampaign != 0 {
		sc.campaign = strings.ToLower(prefix)
	}
	return sc
}

func (sc *scene) has(f feature) bool { return sc.f&f != 0 }

// inst picks the instance a request goes to; other is the instance a
// retry goes to.
func (sc *scene) inst(r *rand.Rand) int {
	if sc.has(fInstance) {
		return r.IntN(2)
	}
	return 0
}

func (sc *scene) other(i int) int {
	if sc.has(fInstance) {
		return 1 - i
	}
	return i
}

// note counts act as done by this scene's pair.
func (sc *scene) note(act string) {
	s := sc.tr.seams
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acts[sc.f] == nil {
		s.acts[sc.f] = map[string]int{}
	}
	s.acts[sc.f][act]++
	delete(s.pending, act)
}

// tookSince records how long step took.
func (sc *scene) tookSince(step string, began time.Time) {
	s := sc.tr.seams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.took[step] = append(s.took[step], time.Since(began))
}

// nextFollow is what a buyer does next with a hold: a path no scene took
// yet, else the scene's next in turn.
func (sc *scene) nextFollow() string {
	if p := sc.owedFollow(); p != "" {
		return p
	}
	return followPaths[sc.turn("follow", len(followPaths))]
}

// owedFollow is the first follow path no scene took yet, or "".
func (sc *scene) owedFollow() string {
	s := sc.tr.seams
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range followPaths {
		if s.pending[p] {
			return p
		}
	}
	return ""
}

// key is the scene's shop key now.
func (sc *scene) key() (client, token string, binding []string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.client, sc.token, sc.binding
}

// ops sends an operator's request to an instance of the scene's, with an
// Idempotency-Key when idem; the answer is counted under "seam "+op.
func (sc *scene) ops(r *rand.Rand, op, method, path string, body any, idem bool) (int, []byte) {
	var headers []string
	if idem {
		headers = []string{"Idempotency-Key", sc.tr.name("seam-ops")}
	}
	return sc.tr.doOn(sc.inst(r), "seam "+op, method, path, sc.tr.ops, body, headers...)
}

// must is ops for a step the scene cannot go on without: its answer must
// be want (a 503 is asked again).
func (sc *scene) must(r *rand.Rand, want int, op, method, path string, body any) ([]byte, bool) {
	for range 20 {
		st, b := sc.ops(r, op, method, path, body, true)
		if st == 503 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if st != want {
			sc.tr.t.Errorf("scene %s: %s %s %s: %d %s", sc.f, op, method, path, st, b)
			return b, false
		}
		return b, true
	}
	sc.tr.t.Errorf("scene %s: %s %s %s: busy 20 times", sc.f, op, method, path)
	return nil, false
}

// pool is the pool an operator's act on the goods works on: the
// campaign's half the time when there is one.
func (sc *scene) pool(r *rand.Rand) string {
	if sc.campaign != "" && r.IntN(2) == 0 {
		return sc.campaign
	}
	return "main"
}

// setup stocks the scene's SKUs, makes its key and its campaign, and
// waits for the campaign to start.
func (sc *scene) setup(ctx context.Context, r *rand.Rand) bool {
	tr := sc.tr
	adjust := func(sku, loc string, n int) bool {
		_, ok := sc.must(r, 200, "stock", "POST", "/v1/skus/"+sku+"/adjustments",
			map[string]any{"delta": n, "location": loc, "reason": "seam stock"})
		return ok
	}
	if sc.has(fSeats) {
		var plan []map[string]any
		for _, row := range []string{"A", "B", "C"} {
			for p := 1; p <= 8; p++ {
				id := fmt.Sprintf("%s-%d", row, p)
				sc.seatIDs = append(sc.seatIDs, id)
				plan = append(plan, map[string]any{"id": id, "group": row, "position": p})
			}
		}
		if _, ok := sc.must(r, 200, "stock", "POST", "/v1/skus/"+sc.goods+"/units",
			map[string]any{"location": sc.home, "reason": "seam venue", "units": plan}); !ok {
			return false
		}
		if _, ok := sc.must(r, 200, "stock", "POST", "/v1/skus/"+sc.sold+"/units", map[string]any{"location": sc.home, "reason": "seam venue",
			"units": []map[string]any{{"id": "S-1", "group": "S", "position": 1}, {"id": "S-2", "group": "S", "position": 2}}}); !ok {
			return false
		}
	} else {
		if !adjust(sc.goods, sc.home, 30) || sc.has(fLocation) && !adjust(sc.goods, sc.away, 20) || !adjust(sc.sold, sc.home, 2) {
			return false
		}
	}
	if !adjust(sc.counted, sc.home, 6) {
		return false
	}
	if sc.has(fBound) {
		sc.client = tr.name("seam-key")
		sc.binding = []string{sc.home}
		if sc.has(fLocation) && r.IntN(2) == 0 {
			sc.binding = append(sc.binding, sc.away)
		}
		token, err := auth.CreateBound(context.WithoutCancel(ctx), tr.pool, sc.client, auth.RoleShop, sc.binding)
		if err != nil {
			tr.t.Errorf("scene %s: make a key bound to %v: %v", sc.f, sc.binding, err)
			return false
		}
		sc.token = token
	}
	if sc.campaign == "" {
		return true
	}
	allot := []map[string]any{{"sku": sc.goods, "quantity": 12, "location": sc.home}}
	if sc.has(fSeats) {
		allot[0]["quantity"] = 8
	} else if sc.has(fLocation) {
		allot = append(allot, map[string]any{"sku": sc.goods, "quantity": 8, "location": sc.away})
	}
	allot = append(allot, map[string]any{"sku": sc.sold, "quantity": 2, "location": sc.home},
		map[string]any{"sku": sc.counted, "quantity": 6, "location": sc.home})
	now := time.Now().UTC()
	body := map[string]any{"id": sc.campaign, "starts_at": now.Format(time.RFC3339Nano), "ends_at": now.Add(10 * time.Minute).Format(time.RFC3339Nano),
		"hold_ttl_seconds": 3 + r.IntN(3), "allotments": allot}
	if r.IntN(2) == 0 {
		body["max_per_order"], sc.cap = 2, 2
	}
	if _, ok := sc.must(r, 201, "campaign create", "POST", "/v1/campaigns", body); !ok {
		return false
	}
	tr.seams.mu.Lock()
	tr.seams.campaigns++
	tr.seams.mu.Unlock()
	for range 300 {
		if st, b := sc.ops(r, "campaign read", "GET", "/v1/campaigns/"+sc.campaign, nil, false); st == 200 && strings.Contains(string(b), `"status":"active"`) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	tr.t.Errorf("scene %s: campaign %s did not start in 30 s", sc.f, sc.campaign)
	return false
}

// run is the scene: buyers, an operator, a counter and a prober for a few
// seconds; then the key made again elsewhere and ended holds reinstated
// with it; then the campaign's end, with stock of its pool moved away.
func (sc *scene) run(ctx context.Context, r *rand.Rand) {
	began := time.Now()
	phase, stop := context.WithTimeout(ctx, time.Duration(3000+r.IntN(3000))*time.Millisecond)
	defer stop()
	var wg sync.WaitGroup
	// Buyers go on past the phase while a follow path is owed, for up to
	// a minute from its start.
	buyer := func(ctx context.Context, r *rand.Rand) { sc.buyer(ctx, r, began.Add(time.Minute)) }
	workers := []func(context.Context, *rand.Rand){buyer, buyer, buyer, sc.operator, sc.counter, sc.prober}
	for i, w := range workers {
		rr := rand.New(rand.NewPCG(r.Uint64(), uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			w(phase, rr)
		}()
	}
	wg.Wait()
	sc.tookSince("phase", began)
	end := context.WithoutCancel(ctx)
	if sc.has(fBound) {
		sc.rebind(end, r)
	}
	if sc.campaign != "" {
		sc.endCampaign(end, r)
	}
	// The scene's transfers still in transit: received or cancelled now,
	// or left for the run's end to finish.
	sc.mu.Lock()
	transit := slices.Clone(sc.transit)
	sc.mu.Unlock()
	for _, t := range transit {
		if t.pool != "main" || r.IntN(3) == 0 || !sc.tr.claim(t.id) {
			continue
		}
		sc.finishTransfer(r, t.id)
		sc.tr.unclaim(t.id)
	}
}

// holdPaths are the ways the scene's buyers hold its goods.
func (sc *scene) holdPaths() []string {
	if sc.has(fSeats) {
		return []string{"seats by name", "seats by count", "seats by count at a location", "seats together", "seats named and more"}
	}
	paths := []string{"hold", "hold at a location", "split hold", "two lines of one SKU", "hold with another SKU"}
	if sc.campaign != "" && sc.has(fLocation) {
		paths = append(paths, "lines at two locations")
	}
	return paths
}

// followPaths are what a buyer does with a hold once it has it.
var followPaths = []string{"confirm", "release", "partial release", "retry after a partial release", "extend", "retry", "key reused",
	"made overdue", "left to expire"}

// holdBody is a hold of the goods by path; with a campaign, from its pool
// when inCampaign (always for lines at two locations, under its cap).
func (sc *scene) holdBody(r *rand.Rand, path string, inCampaign bool) map[string]any {
	body := map[string]any{"order_ref": sc.tr.name("seam"), "ttl_seconds": 1 + r.IntN(4)}
	if path == "lines at two locations" {
		inCampaign = true
	}
	if inCampaign {
		body["campaign"] = sc.campaign
	}
	seat := func() string {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.seatIDs[r.IntN(len(sc.seatIDs))]
	}
	q := 1 + r.IntN(2)
	var items []map[string]any
	switch path {
	case "seats by name":
		units := []string{seat()}
		if u := seat(); u != units[0] && r.IntN(2) == 0 {
			units = append(units, u)
		}
		items = []map[string]any{{"sku": sc.goods, "units": units}}
	case "seats by count":
		items = []map[string]any{{"sku": sc.goods, "quantity": q}}
	case "seats by count at a location":
		items = []map[string]any{{"sku": sc.goods, "quantity": q, "location": sc.home}}
	case "seats together":
		items = []map[string]any{{"sku": sc.goods, "quantity": 2, "adjacent": true}}
	case "seats named and more":
		items = []map[string]any{{"sku": sc.goods, "units": []string{seat()}}, {"sku": sc.goods, "quantity": 1}}
	case "hold":
		items = []map[string]any{{"sku": sc.goods, "quantity": q}}
	case "hold at a location":
		items = []map[string]any{{"sku": sc.goods, "quantity": q, "location": []string{sc.home, sc.away}[r.IntN(2)]}}
	case "split hold":
		items = []map[string]any{{"sku": sc.goods, "quantity": 2 + r.IntN(3), "split": true}}
	case "two lines of one SKU":
		second := map[string]any{"sku": sc.goods, "quantity": 1}
		if r.IntN(2) == 0 {
			second["split"] = true
		}
		items = []map[string]any{{"sku": sc.goods, "quantity": 1, "location": sc.home}, second}
	case "lines at two locations":
		items = []map[string]any{{"sku": sc.goods, "quantity": 2, "location": sc.home}, {"sku": sc.goods, "quantity": 1 + r.IntN(2), "location": sc.away}}
	case "hold with another SKU":
		items = []map[string]any{{"sku": sc.goods, "quantity": q, "location": sc.home}}
		if !inCampaign && !sc.has(fBound) {
			// Stock at default only: a key bound elsewhere could not.
			items = append(items, map[string]any{"sku": skus[3+r.IntN(3)], "quantity": 1})
		}
	}
	body["items"] = items
	return body
}

// turn is the next of a scene's turns of kind: every path and act in
// turn, so that a short scene on a slow machine still takes each.
func (sc *scene) turn(kind string, n int) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.turns == nil {
		sc.turns = map[string]int{}
	}
	t := sc.turns[kind]
	sc.turns[kind]++
	return (t + int(sc.offset)) % n
}

// buyer holds the goods by every path in turn, and does one thing with
// each hold, every one in turn; now and then it reinstates an ended hold.
// While a follow path is one no scene took yet, the buyers take it first
// (nextFollow) and, once the phase is over, go on until it is taken or
// until passes: a short run on a slow machine, whose phases are over
// before a buyer got far, still takes every one.
func (sc *scene) buyer(ctx context.Context, r *rand.Rand, until time.Time) {
	tr := sc.tr
	paths := sc.holdPaths()
	owed := func() bool { return sc.owedFollow() != "" && time.Now().Before(until) }
	for pace(ctx, r, 60*time.Millisecond) || owed() {
		if ctx.Err() != nil {
			time.Sleep(20 * time.Millisecond) // past the phase: no pace
		} else if sc.turn("reinstate", 8) == 0 {
			sc.reinstate(r, "reinstate")
			continue
		}
		path := paths[sc.turn("hold", len(paths))]
		body := sc.holdBody(r, path, sc.campaign != "" && sc.turn("campaign", 2) == 0)
		inst := sc.inst(r)
		client, token, binding := sc.key()
		key := tr.name("seam-hold")
		st, b := tr.doOn(inst, "seam hold", "POST", "/v1/reservations", token, body, "Idempotency-Key", key)
		if st == 422 && path == "lines at two locations" && sc.cap > 0 && strings.Contains(string(b), "limit_exceeded") {
			sc.note("cap refused across locations")
		}
		if st != 201 {
			continue
		}
		sc.note(path)
		h, ok := sc.granted(b, binding, body)
		if !ok {
			continue
		}
		sc.remember(client, key, b)
		sc.mu.Lock()
		sc.held = append(sc.held, h.ID)
		sc.mu.Unlock()
		if !pace(ctx, r, 300*time.Millisecond) && !owed() {
			return
		}
		sc.follow(r, sc.nextFollow(), inst, client, token, key, body, h)
	}
}

// granted records an acknowledged hold of the scene's and checks it
// against the key's binding and the campaign's cap.
func (sc *scene) granted(b []byte, binding []string, body map[string]any) (reservation, bool) {
	tr := sc.tr
	var h reservation
	if err := json.Unmarshal(b, &h); err != nil {
		tr.t.Errorf("scene %s: hold answer: %v: %s", sc.f, err, b)
		return h, false
	}
	tr.mu.Lock()
	tr.holds[h.ID] = true
	tr.mu.Unlock()
	tr.recordWhere(h.ID, b)
	sc.checkBinding("hold", h, binding, b)
	if body["campaign"] != nil && sc.cap > 0 {
		per := map[string]int64{}
		for _, it := range h.Items {
			per[it.SKU] += it.Quantity
		}
		for sku, n := range per {
			if n > sc.cap {
				tr.t.Errorf("scene %s: hold %s of campaign %s has %d of %s, over its max_per_order of %d: %s", sc.f, h.ID, sc.campaign, n, sku, sc.cap, b)
			}
		}
	}
	return h, true
}

// checkBinding fails the run if a hold made or reinstated with a key
// bound to binding has a line elsewhere, and records it for the end.
func (sc *scene) checkBinding(what string, h reservation, binding []string, b []byte) {
	if binding == nil {
		return
	}
	tr := sc.tr
	tr.seams.mu.Lock()
	tr.seams.bound[h.ID] = binding
	tr.seams.mu.Unlock()
	for _, it := range h.Items {
		places := []string{it.Location}
		if len(it.Allocations) > 0 {
			places = nil
			for _, a := range it.Allocations {
				places = append(places, a.Location)
			}
		}
		for _, p := range places {
			if !slices.Contains(binding, p) {
				tr.t.Errorf("scene %s: a key bound to %v made a %s at %s: %s", sc.f, binding, what, p, b)
			}
		}
	}
}

// remember keeps a hold's first acknowledgment, for its retries.
func (sc *scene) remember(client, key string, b []byte) {
	s := sc.tr.seams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.firsts[client+"\x00"+key] = b
}

// follow does one thing with an acknowledged hold, like a checkout.
func (sc *scene) follow(r *rand.Rand, what string, inst int, client, token, key string, body map[string]any, h reservation) {
	tr := sc.tr
	path := "/v1/reservations/" + h.ID.String()
	switch what {
	case "confirm":
		if st, _ := tr.doOn(sc.inst(r), "seam confirm", "POST", path+"/confirm", token, nil); st == 200 {
			sc.note("confirm")
			tr.mu.Lock()
			tr.confirmed[h.ID] = true
			tr.mu.Unlock()
		}
	case "release":
		if sc.release(r, token, h.ID, nil) {
			sc.note("release")
		}
	case "partial release", "retry after a partial release":
		if sc.releasePart(r, token, h) {
			sc.note("partial release")
			if what != "partial release" {
				sc.retry(sc.inst(r), token, client, key, body, what)
			}
		}
	case "extend":
		if st, _ := tr.doOn(sc.inst(r), "seam extend", "POST", path+"/extend", token, map[string]any{"ttl_seconds": 1 + r.IntN(5)}); st == 200 {
			sc.note("extend")
		}
	case "retry":
		sc.retry(sc.other(inst), token, client, key, body, "retry")
	case "key reused":
		sc.reuseKey(sc.other(inst), token, key, body)
	case "made overdue":
		if _, err := tr.pool.Exec(context.Background(), `UPDATE reservations SET expires_at = now() - interval '1 second'
			WHERE id = $1 AND status = 'held'`, h.ID); err == nil {
			sc.note("made overdue")
		}
	case "left to expire":
		sc.note(what)
	}
}

// release releases a hold whole (items nil) or in part, and records it.
func (sc *scene) release(r *rand.Rand, token string, id uuid.UUID, items []any) bool {
	return sc.releaseOn(sc.inst(r), token, id, items) != ""
}

// releaseOn is release on instance i; it returns the hold's status as
// the answer says ("" when refused).
func (sc *scene) releaseOn(i int, token string, id uuid.UUID, items []any) string {
	tr := sc.tr
	body := map[string]any{"reason": "seam"}
	var headers []string
	op := "seam release"
	if items != nil {
		body["items"] = items
		headers = []string{"Idempotency-Key", tr.name("seam-part")}
		op = "seam partial release"
	}
	st, b := tr.doOn(i, op, "POST", "/v1/reservations/"+id.String()+"/release", token, body, headers...)
	if st != 200 {
		return ""
	}
	var got reservation
	if err := json.Unmarshal(b, &got); err != nil {
		tr.t.Errorf("scene %s: release answer: %v: %s", sc.f, err, b)
		return ""
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if got.Status == "held" {
		tr.partials[id]++
	} else {
		tr.ended[id] = got.Status
	}
	return got.Status
}

// releasePart gives back one unit of one line of h (a seat by name).
func (sc *scene) releasePart(r *rand.Rand, token string, h reservation) bool {
	l := h.Items[r.IntN(len(h.Items))]
	give := map[string]any{"sku": l.SKU, "quantity": 1}
	switch {
	case len(l.Units) > 0:
		give = map[string]any{"sku": l.SKU, "units": []string{l.Units[r.IntN(len(l.Units))]}}
	case len(l.Allocations) > 0:
		give["location"] = l.Allocations[r.IntN(len(l.Allocations))].Location
	case l.Location != "" && len(h.Items) > 1:
		give["location"] = l.Location
	}
	return sc.release(r, token, h.ID, []any{give})
}

// retry sends an acknowledged hold's request again, with its key, to
// instance i: the answer must be its first answer, whatever happened to
// the hold since (released in part, confirmed, expired).
func (sc *scene) retry(i int, token, client, key string, body map[string]any, what string) {
	tr := sc.tr
	tr.seams.mu.Lock()
	first := tr.seams.firsts[client+"\x00"+key]
	tr.seams.mu.Unlock()
	for range 10 {
		st, b := tr.doOn(i, "seam "+what, "POST", "/v1/reservations", token, body, "Idempotency-Key", key)
		switch {
		case st == 503:
			time.Sleep(20 * time.Millisecond)
			continue
		case st == 401:
			return // the key was revoked meanwhile
		case st != 201 || !sameJSON(first, b):
			tr.t.Errorf("scene %s: a %s of an acknowledged hold (key %s) on instance %d answered %d %s; its first answer was 201 %s",
				sc.f, what, key, i, st, b, first)
		default:
			sc.note(what)
			if i == 1 {
				sc.note(what + " on the second instance")
			}
		}
		return
	}
}

// reuseKey sends another body with an acknowledged hold's key: 422
// idempotency_key_reused, whatever memory knows of the SKU.
func (sc *scene) reuseKey(i int, token, key string, body map[string]any) {
	tr := sc.tr
	other := map[string]any{}
	for k, v := range body {
		other[k] = v
	}
	other["order_ref"] = tr.name("seam-other")
	for range 10 {
		st, b := tr.doOn(i, "seam key reused", "POST", "/v1/reservations", token, other, "Idempotency-Key", key)
		switch {
		case st == 503:
			time.Sleep(20 * time.Millisecond)
			continue
		case st == 401:
		case st != 422 || !strings.Contains(string(b), "idempotency_key_reused"):
			tr.t.Errorf("scene %s: a key reused with another body on instance %d answered %d %s, not 422 idempotency_key_reused", sc.f, i, st, b)
		default:
			sc.note("key reused")
		}
		return
	}
}

// reinstate reinstates one of the scene's ended holds with the scene's
// key now: never a hold where the key is not bound.
func (sc *scene) reinstate(r *rand.Rand, what string) (reservation, bool) {
	tr := sc.tr
	sc.mu.Lock()
	held := slices.Clone(sc.held)
	sc.mu.Unlock()
	var id uuid.UUID
	if err := tr.pool.QueryRow(context.Background(), `SELECT id FROM reservations WHERE id = ANY($1) AND status IN ('released', 'expired')
		AND NOT EXISTS (SELECT 1 FROM reservations x WHERE x.client = reservations.client AND x.idempotency_key = '↻' || reservations.id::text)
		ORDER BY random() LIMIT 1`, held).Scan(&id); err != nil {
		return reservation{}, false
	}
	_, token, binding := sc.key()
	st, b := tr.doOn(sc.inst(r), "seam "+what, "POST", "/v1/reservations/"+id.String()+"/reinstate", token, nil)
	if st != 200 {
		return reservation{}, false
	}
	var h reservation
	if err := json.Unmarshal(b, &h); err != nil {
		tr.t.Errorf("scene %s: reinstate answer: %v: %s", sc.f, err, b)
		return h, false
	}
	sc.note(what)
	tr.mu.Lock()
	tr.holds[h.ID] = true
	tr.mu.Unlock()
	sc.checkBinding(what, h, binding, b)
	return h, true
}

// rebind revokes the scene's key and makes it again bound to the other
// place, then reinstates ended holds with it: a reinstate must apply the
// caller's binding like any new hold.
func (sc *scene) rebind(ctx context.Context, r *rand.Rand) {
	tr := sc.tr
	sc.mu.Lock()
	name, old := sc.client, sc.binding
	sc.mu.Unlock()
	binding := []string{sc.away}
	if slices.Contains(old, sc.away) {
		binding = []string{"north"}
	}
	if _, err := auth.Revoke(ctx, tr.pool, name); err != nil {
		tr.t.Errorf("scene %s: revoke %s: %v", sc.f, name, err)
		return
	}
	token, err := auth.CreateBound(ctx, tr.pool, name, auth.RoleShop, binding)
	if err != nil {
		tr.t.Errorf("scene %s: make %s again bound to %v: %v", sc.f, name, binding, err)
		return
	}
	sc.mu.Lock()
	sc.token, sc.binding = token, binding
	sc.mu.Unlock()
	sc.note("key bound elsewhere")
	for range 4 {
		sc.reinstate(r, "reinstate with the key bound elsewhere")
	}
}

// operator does the operator's acts on the goods, one after another.
func (sc *scene) operator(ctx context.Context, r *rand.Rand) {
	type act struct {
		name string
		ok   bool
		run  func() bool
	}
	plain, seats := !sc.has(fSeats), sc.has(fSeats)
	acts := []act{
		{"adjust", plain, func() bool { return sc.adjust(r) }},
		{"move", plain, func() bool { return sc.move(r, false) }},
		{"write-off", plain, func() bool { return sc.move(r, true) }},
		{"transfer", plain, func() bool { return sc.transfer(ctx, r) }},
		{"count", plain, func() bool { return sc.count(r) }},
		{"pause and resume", true, func() bool { return sc.pauseResume(ctx, r) }},
		{"stop-sale at a location", true, func() bool { return sc.stopAt(ctx, r) }},
		{"deactivate a location", true, func() bool { return sc.deactivate(ctx, r) }},
		{"rollback at a location", true, func() bool { return sc.rollbackAt(r) }},
		{"rollback by ids", true, func() bool { return sc.rollbackIDs(r) }},
		{"repair preview", true, func() bool { return sc.repairPreview(r) }},
		{"units where plain stock is", plain, func() bool { return sc.unitsElsewhere(r) }},
		{"add seats", seats, func() bool { return sc.addSeats(r) }},
		{"retire a seat", seats, func() bool { return sc.retireSeat(r) }},
		{"campaign pause and resume", sc.campaign != "", func() bool { return sc.campaignPauseResume(ctx, r) }},
		{"rollback by campaign", sc.campaign != "", func() bool { return sc.rollbackCampaign(r) }},
	}
	acts = slices.DeleteFunc(acts, func(a act) bool { return !a.ok })
	r.Shuffle(len(acts), func(i, j int) { acts[i], acts[j] = acts[j], acts[i] })
	for pace(ctx, r, 250*time.Millisecond) {
		if a := acts[sc.turn("act", len(acts))]; a.run() {
			sc.note(a.name)
		}
	}
}

func (sc *scene) adjust(r *rand.Rand) bool {
	loc := sc.home
	if sc.has(fLocation) && r.IntN(2) == 0 {
		loc = sc.away
	}
	delta := 1 + r.IntN(4)
	if r.IntN(3) == 0 {
		delta = -1
	}
	st, _ := sc.ops(r, "adjust", "POST", "/v1/skus/"+sc.goods+"/adjustments",
		map[string]any{"delta": delta, "location": loc, "reason": "seam adjust"}, true)
	return st == 200
}

// move moves units of the goods to quality control and, half the time,
// back; or writes one off.
func (sc *scene) move(r *rand.Rand, writeOff bool) bool {
	pool := sc.pool(r)
	body := map[string]any{"location": sc.home, "pool": pool, "from": "available", "to": "quality_control", "quantity": 1 + r.IntN(2), "reason": "seam move"}
	if writeOff {
		body["to"], body["quantity"] = "lost", 1
	}
	st, _ := sc.ops(r, "move", "POST", "/v1/skus/"+sc.goods+"/moves", body, true)
	if st != 200 || writeOff || r.IntN(2) == 0 {
		return st == 200
	}
	body["from"], body["to"] = "quality_control", "available"
	sc.ops(r, "move", "POST", "/v1/skus/"+sc.goods+"/moves", body, true)
	return true
}

// transfer sends units of the goods from home to away, in main or the
// campaign's pool, and then receives them, receives part and closes,
// cancels, or leaves them in transit.
func (sc *scene) transfer(ctx context.Context, r *rand.Rand) bool {
	pool := sc.pool(r)
	q := 1 + r.IntN(3)
	st, b := sc.ops(r, "transfer", "POST", "/v1/transfers",
		map[string]any{"sku": sc.goods, "pool": pool, "from": sc.home, "to": sc.away, "quantity": q, "reason": "seam transfer"}, true)
	if st != 201 {
		return false
	}
	var t struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		sc.tr.t.Errorf("scene %s: transfer answer: %v: %s", sc.f, err, b)
		return false
	}
	sc.tr.noteTransfer(t.ID, b)
	if !sc.tr.claim(t.ID) {
		return true // the archivist took it
	}
	defer sc.tr.unclaim(t.ID)
	if r.IntN(4) == 0 || !pace(ctx, r, 200*time.Millisecond) {
		sc.mu.Lock()
		sc.transit = append(sc.transit, transitOf{t.ID, pool})
		sc.mu.Unlock()
		sc.note("transfer left in transit")
		return true
	}
	sc.finishTransfer(r, t.ID)
	return true
}

// finishTransfer receives, receives part of and closes, or cancels a
// transfer in transit: never refused for the units' kind.
func (sc *scene) finishTransfer(r *rand.Rand, id uuid.UUID) {
	path := "/v1/transfers/" + id.String()
	var (
		st int
		b  []byte
		op string
	)
	var q int64
	if err := sc.tr.pool.QueryRow(context.Background(), `SELECT quantity - received - lost FROM transfers WHERE id = $1`, id).Scan(&q); err != nil || q <= 0 {
		return
	}
	switch r.IntN(3) {
	case 0:
		op = "transfer receive"
		st, b = sc.ops(r, op, "POST", path+"/receive", map[string]any{"quantity": q}, true)
	case 1:
		op = "transfer close"
		if q > 1 {
			sc.ops(r, "transfer receive", "POST", path+"/receive", map[string]any{"quantity": q - 1}, true)
		}
		st, b = sc.ops(r, op, "POST", path+"/close", map[string]any{"reason": "the rest was lost"}, true)
	default:
		op = "transfer cancel"
		st, b = sc.ops(r, op, "POST", path+"/cancel", map[string]any{"reason": "not needed"}, true)
	}
	if st == 409 && strings.Contains(string(b), "serialized_pool") {
		sc.tr.t.Errorf("scene %s: %s of transfer %s refused for the units' kind: the units stay in transit for ever: %s", sc.f, op, id, b)
	}
	if st == 200 {
		sc.tr.noteTransfer(id, b)
		sc.note(op)
	}
}

// count counts the goods at home as the counters say.
func (sc *scene) count(r *rand.Rand) bool {
	pool := sc.pool(r)
	p, ok := sc.row(sc.goods, sc.home, pool)
	if !ok {
		return false
	}
	st, b := sc.ops(r, "count", "POST", "/v1/skus/"+sc.goods+"/counts",
		map[string]any{"location": sc.home, "pool": pool, "counted": p.onShelf(), "reason": "seam count"}, true)
	if st == 200 {
		sc.tr.checkCountAnswer(b)
	}
	return st == 200
}

// onShelf is what the counters should find on the shelf: every state
// but sold, less the held units a count found missing (short).
func (p pooled) onShelf() int64 {
	return p.Available + p.Reserved - p.Short + p.QualityControl + p.Damaged + p.SafetyStock
}

// row reads one (location, pool) of a SKU over the API.
func (sc *scene) row(sku, loc, pool string) (pooled, bool) {
	view, ok := sc.tr.stockView(sku)
	if !ok {
		return pooled{}, false
	}
	for _, p := range view {
		if p.Location == loc && p.Pool == pool {
			return p, true
		}
	}
	return pooled{}, false
}

func (sc *scene) pauseResume(ctx context.Context, r *rand.Rand) bool {
	body := map[string]any{"location": sc.home, "pool": sc.pool(r), "reason": "seam switch"}
	if st, _ := sc.ops(r, "pause", "POST", "/v1/skus/"+sc.goods+"/pause", body, false); st != 200 {
		return false
	}
	pace(ctx, r, 200*time.Millisecond)
	return sc.resume(r, sc.goods, body)
}

// resume resumes a row, asking again while busy: books that balance are
// never refused.
func (sc *scene) resume(r *rand.Rand, sku string, body map[string]any) bool {
	for range 20 {
		st, b := sc.ops(r, "resume", "POST", "/v1/skus/"+sku+"/resume", body, false)
		switch st {
		case 200:
			return true
		case 409:
			if strings.Contains(string(b), "books_unbalanced") {
				sc.tr.t.Errorf("scene %s: resume of %s %v refused though its books balance: %s", sc.f, sku, body, b)
			}
			return false
		case 503:
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return false
	}
	return false
}

// stopAt stops sales at one of the scene's places that is not default
// for a moment.
func (sc *scene) stopAt(ctx context.Context, r *rand.Rand) bool {
	sc.tr.seams.switching.Lock()
	defer sc.tr.seams.switching.Unlock()
	loc := seamPlaces[r.IntN(2)]
	on := map[string]any{"active": true, "reason": "seam", "location": loc}
	if st, _ := sc.ops(r, "location stop-sale on", "PUT", "/v1/stop-sale", on, false); st != 200 {
		return false
	}
	pace(ctx, r, 200*time.Millisecond)
	for range 20 {
		off := map[string]any{"active": false, "reason": "seam", "location": loc}
		if st, _ := sc.ops(r, "location stop-sale off", "PUT", "/v1/stop-sale", off, false); st != 503 {
			break
		}
	}
	return true
}

// deactivate takes one of the scene's places (never default) out of
// allocation for a moment.
func (sc *scene) deactivate(ctx context.Context, r *rand.Rand) bool {
	sc.tr.seams.switching.Lock()
	defer sc.tr.seams.switching.Unlock()
	loc := seamPlaces[r.IntN(2)]
	if st, _ := sc.ops(r, "location off", "PATCH", "/v1/locations/"+loc, map[string]any{"active": false}, false); st != 200 {
		return false
	}
	off := time.Now()
	pace(ctx, r, 200*time.Millisecond)
	on := time.Now()
	for range 20 {
		if st, _ := sc.ops(r, "location on", "PATCH", "/v1/locations/"+loc, map[string]any{"active": true}, false); st != 503 {
			break
		}
	}
	sc.tr.mu.Lock()
	sc.tr.inactive[loc] = append(sc.tr.inactive[loc], [2]time.Time{off, on})
	sc.tr.mu.Unlock()
	return true
}

// rollbackAt rolls back the goods' holds at one location: only their
// lines there may go (checkSeamsNow).
func (sc *scene) rollbackAt(r *rand.Rand) bool {
	loc := sc.home
	if sc.has(fLocation) && r.IntN(2) == 0 {
		loc = sc.away
	}
	body := map[string]any{"operator": sc.tr.name("op-seam"), "reason": "seam", "sku": sc.goods, "location": loc, "pool": sc.pool(r),
		"held_before": time.Now().UTC().Format(time.RFC3339Nano), "dry_run": r.IntN(6) == 0}
	st, _ := sc.ops(r, "rollback", "POST", "/v1/rollbacks", body, true)
	return st == 202
}

func (sc *scene) rollbackIDs(r *rand.Rand) bool {
	sc.mu.Lock()
	held := slices.Clone(sc.held)
	sc.mu.Unlock()
	if len(held) == 0 {
		return false
	}
	var ids []uuid.UUID
	for range 1 + r.IntN(3) {
		ids = append(ids, held[r.IntN(len(held))])
	}
	st, _ := sc.ops(r, "rollback", "POST", "/v1/rollbacks",
		map[string]any{"operator": sc.tr.name("op-seam"), "reason": "seam", "reservation_ids": ids}, true)
	return st == 202
}

func (sc *scene) rollbackCampaign(r *rand.Rand) bool {
	st, _ := sc.ops(r, "rollback", "POST", "/v1/rollbacks",
		map[string]any{"operator": sc.tr.name("op-seam"), "reason": "seam", "campaign": sc.campaign}, true)
	return st == 202
}

// repairPreview previews a repair of the goods' row: balanced books
// repair to nothing.
func (sc *scene) repairPreview(r *rand.Rand) bool {
	pool := sc.pool(r)
	st, b := sc.ops(r, "repair", "POST", "/v1/skus/"+sc.goods+"/repair",
		map[string]any{"location": sc.home, "pool": pool, "to": []string{"ledger", "counters"}[r.IntN(2)], "reason": "seam", "dry_run": true}, false)
	if st != 200 {
		return false
	}
	var got struct {
		Difference map[string]int64 `json:"difference"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		sc.tr.t.Errorf("scene %s: repair answer: %v: %s", sc.f, err, b)
		return false
	}
	for k, v := range got.Difference {
		if v != 0 {
			sc.tr.t.Errorf("scene %s: repair preview of %s at %s (pool %s) found %s off by %d in balanced books: %s", sc.f, sc.goods, sc.home, pool, k, v, b)
		}
	}
	return true
}

// unitsElsewhere adds a unit with an identity of the goods at away while
// plain stock of them lives at home (and transfers may be on their way
// there): refused, or the pool would be units at one place and plain
// stock at another.
func (sc *scene) unitsElsewhere(r *rand.Rand) bool {
	st, b := sc.ops(r, "units where plain stock is", "POST", "/v1/skus/"+sc.goods+"/units",
		map[string]any{"location": sc.away, "reason": "seam", "units": []map[string]any{{"id": sc.tr.name("U")}}}, true)
	if st == 200 {
		sc.tr.t.Errorf("scene %s: units of %s added at %s while plain stock of it lives at %s: %s", sc.f, sc.goods, sc.away, sc.home, b)
	}
	return st == 409
}

func (sc *scene) addSeats(r *rand.Rand) bool {
	sc.mu.Lock()
	sc.units++
	row := fmt.Sprintf("X%d", sc.units)
	sc.mu.Unlock()
	var plan []map[string]any
	var ids []string
	for p := 1; p <= 3; p++ {
		id := fmt.Sprintf("%s-%d", row, p)
		ids = append(ids, id)
		plan = append(plan, map[string]any{"id": id, "group": row, "position": p})
	}
	st, _ := sc.ops(r, "add seats", "POST", "/v1/skus/"+sc.goods+"/units",
		map[string]any{"location": sc.home, "pool": sc.pool(r), "reason": "seam row", "units": plan}, true)
	if st == 200 {
		sc.mu.Lock()
		sc.seatIDs = append(sc.seatIDs, ids...)
		sc.mu.Unlock()
	}
	return st == 200
}

func (sc *scene) retireSeat(r *rand.Rand) bool {
	var seat, pool string
	if err := sc.tr.pool.QueryRow(context.Background(), `SELECT id, pool FROM units WHERE sku = $1 AND status = 'available' ORDER BY random() LIMIT 1`,
		sc.goods).Scan(&seat, &pool); err != nil {
		return false
	}
	st, _ := sc.ops(r, "retire a seat", "POST", "/v1/skus/"+sc.goods+"/units/retire",
		map[string]any{"pool": pool, "reason": "broken seat", "units": []string{seat}}, true)
	return st == 200
}

func (sc *scene) campaignPauseResume(ctx context.Context, r *rand.Rand) bool {
	path := "/v1/campaigns/" + sc.campaign
	if st, _ := sc.ops(r, "campaign pause", "POST", path+"/pause", map[string]any{"reason": "seam"}, false); st != 200 {
		return false
	}
	pace(ctx, r, 200*time.Millisecond)
	for range 20 {
		st, b := sc.ops(r, "campaign resume", "POST", path+"/resume", map[string]any{"reason": "seam"}, false)
		if st == 409 && strings.Contains(string(b), "books_unbalanced") {
			sc.tr.t.Errorf("scene %s: resume of campaign %s refused though its books balance: %s", sc.f, sc.campaign, b)
		}
		if st != 503 {
			return st == 200
		}
	}
	return false
}

// counter: a forced count's shortfall is off the shelf. It holds units of
// its SKU, counts the shelf below what they hold (forced), lets the holds
// leave every way, resumes the row, and checks that what the count found
// missing did not come back.
func (sc *scene) counter(ctx context.Context, r *rand.Rand) {
	tr := sc.tr
	pool := "main"
	if sc.campaign != "" {
		pool = sc.campaign
	}
	_, token, _ := sc.key()
	var ids []uuid.UUID
	for range 12 {
		if len(ids) >= 3 {
			break
		}
		body := map[string]any{"order_ref": tr.name("seam-count"), "ttl_seconds": 60,
			"items": []map[string]any{{"sku": sc.counted, "quantity": 1 + r.IntN(2)}}}
		if r.IntN(2) == 0 {
			body["items"].([]map[string]any)[0]["location"] = sc.home
		}
		if pool != "main" {
			body["campaign"] = pool
		}
		st, b := tr.doOn(sc.inst(r), "seam count hold", "POST", "/v1/reservations", token, body, "Idempotency-Key", tr.name("seam-count-hold"))
		if st == 503 {
			time.Sleep(50 * time.Millisecond) // a stop-sale or a pause of a moment
		}
		if st != 201 {
			continue
		}
		var h reservation
		if err := json.Unmarshal(b, &h); err != nil {
			tr.t.Errorf("scene %s: count hold answer: %v: %s", sc.f, err, b)
			return
		}
		tr.mu.Lock()
		tr.holds[h.ID] = true
		tr.mu.Unlock()
		ids = append(ids, h.ID)
	}
	p, ok := sc.row(sc.counted, sc.home, pool)
	held := p.Reserved - p.Short
	if !ok || held < 2 {
		return
	}
	counted := held - 1 - r.Int64N(held-1)
	body := map[string]any{"location": sc.home, "pool": pool, "counted": counted, "force": true, "reason": "seam count below held"}
	var st int
	var b []byte
	for range 20 {
		if st, b = sc.ops(r, "forced count", "POST", "/v1/skus/"+sc.counted+"/counts", body, true); st != 503 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st != 200 {
		tr.t.Errorf("scene %s: a forced count of %s at %s (pool %s) below held answered %d %s", sc.f, sc.counted, sc.home, pool, st, b)
		return
	}
	tr.checkCountAnswer(b)
	sc.note("forced count")
	// The holds leave, each its own way.
	ways := map[string]int{}
	var rollback []uuid.UUID
	for k, id := range ids {
		path := "/v1/reservations/" + id.String()
		way := []string{"release", "partial release", "expiry", "rollback", "confirm"}[(k+r.IntN(5))%5]
		if k == 0 && way == "confirm" {
			way = "release" // one at least comes back if the count let it
		}
		ways[way]++
		switch way {
		case "release":
			sc.release(r, token, id, nil)
		case "partial release":
			sc.release(r, token, id, []any{map[string]any{"sku": sc.counted, "quantity": 1}})
			sc.release(r, token, id, nil)
		case "expiry":
			_, _ = tr.pool.Exec(context.Background(), `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1 AND status = 'held'`, id)
		case "rollback":
			rollback = append(rollback, id)
		case "confirm":
			if st, _ := tr.doOn(sc.inst(r), "seam confirm", "POST", path+"/confirm", token, nil); st == 200 {
				tr.mu.Lock()
				tr.confirmed[id] = true
				tr.mu.Unlock()
			}
		}
	}
	if len(rollback) > 0 {
		sc.ops(r, "rollback", "POST", "/v1/rollbacks", map[string]any{"operator": tr.name("op-seam"), "reason": "seam count", "reservation_ids": rollback}, true)
	}
	deadline := time.Now().Add(60 * time.Second)
	for tr.count(context.Background(), `SELECT count(*) FROM reservations WHERE id = ANY($1) AND status = 'held'`, ids) > 0 {
		if time.Now().After(deadline) {
			// Anything still held (a release refused while the row was
			// busy) is rolled back: the check needs them gone.
			tr.t.Errorf("scene %s: holds %v of %s still held a minute after they were let go", sc.f, ids, sc.counted)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	sc.resume(r, sc.counted, map[string]any{"location": sc.home, "pool": pool, "reason": "counted again"})
	after, ok := sc.row(sc.counted, sc.home, pool)
	if !ok {
		return
	}
	var cameIn int64
	if err := tr.pool.QueryRow(context.Background(), `SELECT coalesce(sum(greatest(delta_total - delta_sold, 0)), 0) FROM ledger
		WHERE sku = $1 AND location = $2 AND pool = $3
		  AND stock_version > (SELECT min(stock_version) FROM ledger WHERE sku = $1 AND location = $2 AND pool = $3 AND kind = 'count')`,
		sc.counted, sc.home, pool).Scan(&cameIn); err != nil {
		tr.t.Errorf("scene %s: read what came in since the count: %v", sc.f, err)
		return
	}
	if got := after.onShelf(); got > counted+cameIn {
		tr.t.Errorf("scene %s: a forced count of %s at %s (pool %s) found %d with %d held; once its holds left (%v), %d are on the shelf "+
			"(%d available) with %d come in since: %d the count found missing are back", sc.f, sc.counted, sc.home, pool, counted, held,
			ways, got, after.Available, cameIn, got-counted-cameIn)
	}
}

// checkCountAnswer: a count's answer says forced as its record does.
func (tr *torture) checkCountAnswer(b []byte) {
	var c struct {
		ID     *int64 `json:"id"`
		Forced bool   `json:"forced"`
	}
	if json.Unmarshal(b, &c) != nil || c.ID == nil {
		return
	}
	var forced bool
	if err := tr.pool.QueryRow(context.Background(), `SELECT forced FROM stock_counts WHERE id = $1`, *c.ID).Scan(&forced); err != nil {
		tr.t.Errorf("count %d: %v", *c.ID, err)
		return
	}
	if forced != c.Forced {
		tr.t.Errorf("count %d answered forced %t, its record says %t: %s", *c.ID, c.Forced, forced, b)
	}
}

// prober: sold-out memory on every instance, and stock coming back. It
// sells its SKU out, is refused by the batch and from memory on each
// instance in use, reuses a granted key with another body, puts a unit
// back through one instance (added, or a hold released), and then either
// retries a request granted there at once on the other instance (its
// first answer) or, past the bound, asks the other instance: granted,
// unless something took the unit first.
func (sc *scene) prober(ctx context.Context, r *rand.Rand) {
	for round := 0; round < len(probes) && pace(ctx, r, 200*time.Millisecond); round++ {
		sc.probe(r, probes[round])
	}
}

// probes are the prober's rounds, in order: how the unit comes back
// (added, where the pool takes adjustments or units, or a hold of the
// prober's released), whether the hold then asked for is a retry at once
// on the other instance or a new hold past the bound, and whether the
// line names its location (a seat pool's quantity line naming its
// location is what memory once kept refusing).
var probes = []struct {
	add, retry, named bool
}{{add: true, named: true}, {retry: true}, {named: true}, {add: true, retry: true, named: true}}

func (sc *scene) probe(r *rand.Rand, p struct{ add, retry, named bool }) {
	tr := sc.tr
	client, token, binding := sc.key()
	if binding != nil && !slices.Contains(binding, sc.home) {
		return
	}
	pool := "main"
	if sc.campaign != "" {
		pool = sc.campaign
	}
	item := map[string]any{"sku": sc.sold, "quantity": 1}
	if p.named {
		item["location"] = sc.home
	}
	body := func() map[string]any {
		b := map[string]any{"order_ref": tr.name("seam-so"), "ttl_seconds": 30, "items": []map[string]any{item}}
		if pool != "main" {
			b["campaign"] = pool
		}
		return b
	}
	type grant struct {
		key  string
		body map[string]any
		h    reservation
	}
	var grants []grant
	hold := func(i int, op, key string, b map[string]any) (int, []byte) {
		st, ans := tr.doOn(i, "seam "+op, "POST", "/v1/reservations", token, b, "Idempotency-Key", key)
		if st == 201 {
			var h reservation
			if err := json.Unmarshal(ans, &h); err != nil {
				tr.t.Errorf("scene %s: %s answer: %v: %s", sc.f, op, err, ans)
				return st, ans
			}
			tr.mu.Lock()
			tr.holds[h.ID] = true
			tr.mu.Unlock()
			sc.checkBinding("hold", h, binding, ans)
			sc.remember(client, key, ans)
			grants = append(grants, grant{key, b, h})
		}
		return st, ans
	}
	defer func() {
		for _, g := range grants {
			sc.release(r, token, g.h.ID, nil)
		}
	}()
	gone := false
	for range 6 {
		st, ans := hold(sc.inst(r), "sold-out hold", tr.name("seam-so-hold"), body())
		if st == 409 && strings.Contains(string(ans), `"out_of_stock"`) {
			gone = true
			break
		}
		if st == 503 || st == 409 {
			time.Sleep(50 * time.Millisecond) // a stop-sale or a pause (of the campaign) of a moment
		}
	}
	if !gone || len(grants) == 0 {
		return
	}
	// Refused again on each instance: by the batch, then from memory.
	instances := []int{0}
	if sc.has(fInstance) {
		instances = []int{0, 1}
	}
	for _, i := range instances {
		for range 3 {
			hold(i, "sold-out refused", tr.name("seam-so-hold"), body())
		}
		g := grants[r.IntN(len(grants))]
		sc.reuseKey(i, token, g.key, g.body)
	}
	sc.note("sold out on every instance")
	// A unit comes back through instance via.
	via := sc.inst(r)
	var before int64
	if err := tr.pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM ledger`).Scan(&before); err != nil {
		tr.t.Errorf("scene %s: %v", sc.f, err)
		return
	}
	how := "release"
	if pool == "main" && p.add {
		how = "add"
	}
	var st int
	switch {
	case how == "release":
		g := grants[0]
		grants = grants[1:]
		if sc.releaseOn(via, token, g.h.ID, nil) != "released" {
			return // expired meanwhile, and put back by whichever instance expired it
		}
		// A release of a hold that had ended already (rolled back by the
		// operator's rollback of the campaign, whose unit a refusal above
		// may then have been granted) answers 200 too, and puts nothing
		// back.
		var put bool
		if err := tr.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM ledger WHERE reservation_id = $1 AND id > $2
			AND delta_available > 0)`, g.h.ID, before).Scan(&put); err != nil || !put {
			return
		}
		st = 200
	case sc.has(fSeats):
		sc.mu.Lock()
		sc.units++
		n := 2 + sc.units
		sc.mu.Unlock()
		st, _ = tr.doOn(via, "seam sold-out restock", "POST", "/v1/skus/"+sc.sold+"/units", tr.ops,
			map[string]any{"location": sc.home, "reason": "seam", "units": []map[string]any{{"id": fmt.Sprintf("S-%d", n), "group": "S", "position": n}}},
			"Idempotency-Key", tr.name("seam-so-add"))
	default:
		st, _ = tr.doOn(via, "seam sold-out restock", "POST", "/v1/skus/"+sc.sold+"/adjustments", tr.ops,
			map[string]any{"delta": 1, "location": sc.home, "reason": "seam"}, "Idempotency-Key", tr.name("seam-so-add"))
	}
	if st != 200 {
		return
	}
	back := time.Now()
	taken := func() bool {
		var n int
		if err := tr.pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger WHERE sku = $1 AND id > $2 AND delta_available < 0`,
			sc.sold, before).Scan(&n); err != nil {
			tr.t.Errorf("scene %s: %v", sc.f, err)
			return true
		}
		return n > 0
	}
	ask := sc.other(via)
	if p.retry {
		// Granted where the unit came back, and retried at once on the
		// other instance: its first answer, never sold out.
		key, b := tr.name("seam-so-hold"), body()
		st, ans := hold(via, "sold-out hold after restock", key, b)
		if st != 201 {
			if st == 409 && strings.Contains(string(ans), `"out_of_stock"`) && !taken() {
				tr.t.Errorf("scene %s: a hold of %s on instance %d was refused right after a unit came back through it (%s), and nothing took it: %s; "+
					"the SKU's ledger since: %s", sc.f, sc.sold, via, how, ans, sc.ledgerSince(before))
			}
			return
		}
		sc.retry(ask, token, client, key, b, "retry of a sold-out SKU's hold")
		return
	}
	// Past the bound, on the other instance.
	time.Sleep(time.Until(back.Add(tr.soldOutBound + 50*time.Millisecond)))
	sent := time.Now()
	st, ans := hold(ask, "sold-out hold past the bound", tr.name("seam-so-hold"), body())
	switch {
	case st == 201:
		sc.note("sold out, back past the bound")
	case st == 409 && strings.Contains(string(ans), `"out_of_stock"`) && !taken():
		tr.t.Errorf("scene %s: a hold of %s (%v) on instance %d refused %s after a unit came back through instance %d (%s; the bound is %s), "+
			"and nothing took it: %s; the SKU's ledger since: %s", sc.f, sc.sold, item, ask, sent.Sub(back).Round(time.Millisecond), via, how,
			tr.soldOutBound, ans, sc.ledgerSince(before))
	}
}

// ledgerSince is the prober SKU's ledger rows after the one numbered
// before, for a failure's message.
func (sc *scene) ledgerSince(before int64) string {
	var rows string
	if err := sc.tr.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(format('%s %s %s by %s (available %s, reserved %s)',
		id, kind, coalesce(reservation_id::text, ''), actor, delta_available, delta_reserved), '; ' ORDER BY id), 'none')
		FROM ledger WHERE sku = $1 AND id > $2`, sc.sold, before).Scan(&rows); err != nil {
		return err.Error()
	}
	return rows
}

// endCampaign ends the scene's campaign (by request, or at its end time)
// while stock of its pool is in quality control and in transit, then
// finishes what was in transit, and waits for the campaign to finish.
func (sc *scene) endCampaign(ctx context.Context, r *rand.Rand) {
	tr := sc.tr
	if !sc.has(fSeats) {
		sc.ops(r, "move", "POST", "/v1/skus/"+sc.goods+"/moves", map[string]any{"location": sc.home, "pool": sc.campaign,
			"from": "available", "to": "quality_control", "quantity": 1, "reason": "seam move before the end"}, true)
		for range 2 {
			st, b := sc.ops(r, "transfer", "POST", "/v1/transfers", map[string]any{"sku": sc.goods, "pool": sc.campaign,
				"from": sc.home, "to": sc.away, "quantity": 1, "reason": "seam transfer before the end"}, true)
			var t struct {
				ID uuid.UUID `json:"id"`
			}
			if st == 201 && json.Unmarshal(b, &t) == nil {
				tr.noteTransfer(t.ID, b)
				sc.mu.Lock()
				sc.transit = append(sc.transit, transitOf{t.ID, sc.campaign})
				sc.mu.Unlock()
			}
		}
	}
	asked := time.Now()
	if r.IntN(3) > 0 {
		var st int
		var b []byte
		for range 20 {
			st, b = sc.ops(r, "campaign end", "POST", "/v1/campaigns/"+sc.campaign+"/end",
				map[string]any{"operator": tr.name("op-seam-end"), "reason": "seam over"}, false)
			if st != 503 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st != 202 {
			tr.t.Errorf("scene %s: the end of campaign %s answered %d %s", sc.f, sc.campaign, st, b)
		} else {
			sc.note("campaign end")
		}
	} else {
		// Its end time comes now: time moved in SQL, the campaign_end job
		// due at once.
		if _, err := tr.pool.Exec(ctx, `UPDATE campaigns SET ends_at = now() WHERE id = $1`, sc.campaign); err != nil {
			tr.t.Errorf("scene %s: move campaign %s's end: %v", sc.f, sc.campaign, err)
			return
		}
		if _, err := tr.pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now()
			WHERE kind = 'campaign_end' AND args->>'campaign' = $1 AND state = 'scheduled'`, sc.campaign); err != nil {
			tr.t.Errorf("scene %s: make campaign %s's end due: %v", sc.f, sc.campaign, err)
			return
		}
		sc.note("campaign end at its end time")
	}
	// What was in transit arrives or is cancelled after the end.
	sc.mu.Lock()
	transit := slices.Clone(sc.transit)
	sc.mu.Unlock()
	for _, t := range transit {
		if t.pool == sc.campaign && tr.claim(t.id) {
			sc.finishTransfer(r, t.id)
			tr.unclaim(t.id)
		}
	}
	for time.Since(asked) < 90*time.Second {
		var status string
		if err := tr.pool.QueryRow(ctx, `SELECT status FROM campaigns WHERE id = $1`, sc.campaign).Scan(&status); err != nil {
			tr.t.Errorf("scene %s: %v", sc.f, err)
			return
		}
		if status == "rolled_back" {
			sc.note("campaign finished")
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	tr.t.Errorf("scene %s: campaign %s (at %s) did not finish within 90 s of its end", sc.f, sc.campaign, sc.home)
}

// Refusals that contradict the stock they read, by their detail.
var (
	availableRequested = regexp.MustCompile(`has (\d+) available(?: at [^,]+| across its active locations)?, (\d+) requested`)
	mostAtOne          = regexp.MustCompile(`has (\d+) available \(the most at one is (\d+)`)
	keyMayUse          = regexp.MustCompile(`no location this key may use \([^)]*\) has (\d+) available,`)
)

// refusedWithStock says why a 409 answer to a hold contradicts the stock
// its own detail says it read (an out_of_stock that had enough), or "".
func refusedWithStock(body any, answer []byte) string {
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
		SKU    string `json:"sku"`
	}
	if json.Unmarshal(answer, &p) != nil || p.Code != "out_of_stock" {
		return ""
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if m := mostAtOne.FindStringSubmatch(p.Detail); m != nil {
		if num(m[2]) >= num(m[1]) {
			return fmt.Sprintf("the most at one location is %s, %s asked", m[2], m[1])
		}
		return ""
	}
	if m := availableRequested.FindStringSubmatch(p.Detail); m != nil {
		if num(m[1]) >= num(m[2]) {
			return fmt.Sprintf("%s available, %s requested", m[1], m[2])
		}
		return ""
	}
	if m := keyMayUse.FindStringSubmatch(p.Detail); m != nil {
		if q := requested(body, p.SKU); q > 0 && num(m[1]) >= q {
			return fmt.Sprintf("%s available, %d requested", m[1], q)
		}
	}
	return ""
}

// requested is the quantity of the one line of a hold's body that asks
// for sku (0 when there is not exactly one).
func requested(body any, sku string) int64 {
	b, err := json.Marshal(body)
	if err != nil {
		return 0
	}
	var h struct {
		Items []struct {
			SKU      string `json:"sku"`
			Quantity int64  `json:"quantity"`
		} `json:"items"`
	}
	if json.Unmarshal(b, &h) != nil {
		return 0
	}
	var q int64
	n := 0
	for _, it := range h.Items {
		if it.SKU == sku {
			q, n = it.Quantity, n+1
		}
	}
	if n != 1 {
		return 0
	}
	return q
}

// sameJSON reports whether two JSON documents say the same.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// checkSeamsNow checks, in single statements, what must hold at every
// moment where features meet.
func (tr *torture) checkSeamsNow(t *testing.T, when string) {
	t.Helper()
	ctx := context.Background()
	report := func(what, query string, args ...any) {
		rows, err := tr.pool.Query(ctx, query, args...)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			t.Errorf("%s: %s: %s", when, what, line)
		}
		require.NoError(t, rows.Err())
	}
	report("a pool of a finished campaign holds stock", `
		SELECT format('campaign %s, %s at %s: %s available, %s reserved, %s in quality control, %s damaged, %s safety stock; '
		              'since it finished: %s',
		              c.id, s.sku, s.location, s.available, s.reserved, s.quality_control, s.damaged, s.safety_stock,
		              (SELECT coalesce(string_agg(format('%s %s by %s (available %s, total %s)', g.kind, coalesce(g.reservation_id::text, ''), g.actor,
		                                                 g.delta_available, g.delta_total), '; ' ORDER BY g.id), 'nothing')
		               FROM ledger g WHERE g.sku = s.sku AND g.location = s.location AND g.pool = s.pool AND g.at >= c.rolled_back_at))
		FROM stock s JOIN campaigns c ON c.id = s.pool
		WHERE c.status = 'rolled_back' AND s.available + s.reserved + s.quality_control + s.damaged + s.safety_stock > 0`)
	report("a campaign has not finished a minute after its end", `
		SELECT format('campaign %s is %s, its end asked %s ago (ends_at %s)', id, status, now() - coalesce(ended_at, ends_at), ends_at)
		FROM campaigns
		WHERE status = 'ended' AND ended_at < now() - interval '90 seconds'
		   OR status = 'active' AND ends_at < now() - interval '90 seconds'`)
	// A forced count's shortfall: once every hold held at the row when it
	// was counted has left, what the counters have on the shelf is at most
	// what was counted plus what came in since, until a later count of the
	// row says what is on the shelf then (it may find the missing units
	// again).
	report("a forced count's shortfall is back on the shelf", `
		WITH f AS (
			SELECT c.id, c.sku, c.location, c.pool, c.counted, c.at,
			       coalesce((SELECT min(g.stock_version) FROM ledger g WHERE g.sku = c.sku AND g.location = c.location AND g.pool = c.pool
			                   AND g.kind = 'count' AND g.at = c.at),
			                (SELECT max(g.stock_version) FROM ledger g WHERE g.sku = c.sku AND g.location = c.location AND g.pool = c.pool
			                   AND g.at <= c.at), 0) AS v
			FROM stock_counts c
			WHERE c.forced AND NOT EXISTS (SELECT 1 FROM stock_counts n WHERE n.sku = c.sku AND n.location = c.location AND n.pool = c.pool
			                                 AND n.id > c.id)
		), m AS (
			SELECT f.*, s.available, s.available + s.reserved - s.short + s.quality_control + s.damaged + s.safety_stock AS on_shelf,
			       coalesce((SELECT sum(greatest(g.delta_total - g.delta_sold, 0)) FROM ledger g
			                 WHERE g.sku = f.sku AND g.location = f.location AND g.pool = f.pool AND g.stock_version > f.v), 0) AS came_in
			FROM f JOIN stock s ON s.sku = f.sku AND s.location = f.location AND s.pool = f.pool
			WHERE NOT EXISTS (SELECT 1 FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
			                  WHERE r.status = 'held' AND r.created_at <= f.at AND l.sku = f.sku AND l.location = f.location AND l.pool = f.pool)
		)
		SELECT format('count %s of %s at %s (pool %s) found %s; %s came in since, %s on the shelf now (%s available)',
		              id, sku, location, pool, counted, came_in, on_shelf, available)
		FROM m WHERE on_shelf > counted + came_in`)
	report("a hold of a capped campaign is over its cap", `
		SELECT format('hold %s of campaign %s: %s of %s reserved, max_per_order %s', g.reservation_id, c.id, sum(g.delta_reserved), g.sku, c.max_per_order)
		FROM ledger g JOIN reservations r ON r.id = g.reservation_id JOIN campaigns c ON c.id = r.campaign
		WHERE g.kind = 'reserve' AND c.max_per_order IS NOT NULL
		GROUP BY g.reservation_id, c.id, g.sku, c.max_per_order HAVING sum(g.delta_reserved) > c.max_per_order`)
	report("a rollback scoped to a location handed back a line elsewhere", `
		SELECT format('rollback %s (%s) handed back %s units of hold %s: %s at %s (pool %s)', q.id, q.scope, -g.delta_reserved, g.reservation_id,
		              g.sku, g.location, g.pool)
		FROM rollback_requests q JOIN ledger g ON g.kind = 'rollback' AND g.actor = q.operator
		WHERE q.scope ? 'location' AND (g.location <> q.scope->>'location'
		      OR q.scope ? 'sku' AND (g.sku <> q.scope->>'sku' OR g.pool <> coalesce(q.scope->>'pool', 'main')))`)
	report("a SKU's pool is units at one location and plain stock at another", `
		SELECT format('%s (pool %s): units at %s, plain stock at %s (%s on hand, %s incoming)', a.sku, a.pool, a.location, b.location,
		              b.total - b.sold, b.incoming)
		FROM stock a JOIN stock b ON b.sku = a.sku AND b.pool = a.pool AND b.location <> a.location
		WHERE a.serialized AND NOT b.serialized AND (b.total - b.sold > 0 OR b.incoming > 0)`)
}

// checkSeams, once everything settled: every hold made with a bound key
// is where that key was bound, and every transfer left in transit can
// still arrive or be cancelled.
func (tr *torture) checkSeams(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for id, binding := range tr.seams.bound {
		rows, err := tr.pool.Query(ctx, `SELECT DISTINCT location FROM reservation_lines WHERE reservation_id = $1`, id)
		require.NoError(t, err)
		for rows.Next() {
			var loc string
			require.NoError(t, rows.Scan(&loc))
			if !slices.Contains(binding, loc) {
				t.Errorf("hold %s, made with a key bound to %v, has a line at %s", id, binding, loc)
			}
		}
		require.NoError(t, rows.Err())
	}
	// Transfers still in transit, of main or of a campaign's pool (which
	// land in main once the campaign ended): each arrives or is cancelled.
	rows, err := tr.pool.Query(ctx, `SELECT id, quantity - received - lost, received FROM transfers WHERE status = 'in_transit'`)
	require.NoError(t, err)
	type open struct {
		id             uuid.UUID
		left, received int64
	}
	var transit []open
	for rows.Next() {
		var o open
		require.NoError(t, rows.Scan(&o.id, &o.left, &o.received))
		transit = append(transit, o)
	}
	require.NoError(t, rows.Err())
	for k, o := range transit {
		path := "/v1/transfers/" + o.id.String()
		var st int
		var b []byte
		for range 20 {
			switch {
			case k%2 == 0:
				st, b = tr.do("settle transfer", "POST", path+"/receive", tr.ops, map[string]any{"quantity": o.left}, "Idempotency-Key", tr.name("settle-rcv"))
			case o.received > 0: // what never arrived is written off
				st, b = tr.do("settle transfer", "POST", path+"/close", tr.ops, map[string]any{"reason": "settle"}, "Idempotency-Key", tr.name("settle-close"))
			default:
				st, b = tr.do("settle transfer", "POST", path+"/cancel", tr.ops, map[string]any{"reason": "settle"}, "Idempotency-Key", tr.name("settle-cancel"))
			}
			if st != 503 {
				break
			}
		}
		if st != 200 {
			t.Errorf("transfer %s left in transit could not be finished: %d %s", o.id, st, b)
			continue
		}
		tr.noteTransfer(o.id, b)
	}
	tr.checkSeamsNow(t, "transfers finished")
	if n := dbtest.Count(t, tr.pool, `SELECT count(*) FROM stock s JOIN campaigns c ON c.id = s.pool WHERE c.status = 'rolled_back' AND s.incoming <> 0`); n > 0 {
		t.Errorf("%d pools of finished campaigns still have stock incoming once every transfer arrived or was cancelled", n)
	}
}

// leastScenes is how many scenes a run of duration runs at least: three,
// and from five minutes on one of every pair.
func leastScenes(duration time.Duration) int64 {
	if duration >= 5*time.Minute {
		return int64(len(featureNames) * (len(featureNames) - 1) / 2)
	}
	return 3
}

// reportSeams prints which pairs of features ran, how often, and what
// each did; it fails a run whose scenes hardly ran, and a run of five
// minutes or more in which a pair never had its turn.
func (tr *torture) reportSeams(t *testing.T, duration time.Duration) {
	t.Helper()
	s := tr.seams
	var b strings.Builder
	total := 0
	for _, f := range s.order {
		n := s.scenes[f]
		total += n
		fmt.Fprintf(&b, "\n  %-26s %2d scenes:", f, n)
		names := make([]string, 0, len(s.acts[f]))
		for a := range s.acts[f] {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			fmt.Fprintf(&b, " %s %d,", a, s.acts[f][a])
		}
	}
	t.Logf("torture: pairs of features in the seed's order, scenes and what they did (acknowledged, or refused as they must be):%s", strings.TrimSuffix(b.String(), ","))
	byFeature := map[string]int{}
	for f, n := range s.scenes {
		for _, fn := range featureNames {
			if f&fn.f != 0 {
				byFeature[fn.name] += n
			}
		}
	}
	t.Logf("torture: %d scenes, by feature: %v; %d campaigns", total, byFeature, s.campaigns)
	var took []string
	for _, step := range []string{"setup", "phase", "scene"} {
		d := slices.Clone(s.took[step])
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		took = append(took, fmt.Sprintf("%s %s (at most %s)", step, d[len(d)/2].Round(100*time.Millisecond), d[len(d)-1].Round(100*time.Millisecond)))
	}
	t.Logf("torture: a scene's steps at the median: %s", strings.Join(took, ", "))
	if int64(total) < leastScenes(duration) {
		t.Errorf("torture: only %d scenes ran: the pairs of features were hardly combined", total)
	}
	if duration >= 5*time.Minute {
		for _, f := range s.order {
			if s.scenes[f] == 0 {
				t.Errorf("torture: the pair %s never had its turn", f)
			}
		}
	}
	all := map[string]int{}
	for _, acts := range s.acts {
		for a, n := range acts {
			all[a] += n
		}
	}
	for _, a := range append(slices.Clone(followPaths), "forced count", "sold out on every instance") {
		if all[a] == 0 {
			t.Errorf("torture: no scene did %q: that path never ran where features meet", a)
		}
	}
}
