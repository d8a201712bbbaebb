// Package webhooks pushes the event feed (package events) to receivers that
// operators register: each subscription names a URL and the event types it
// wants, and a River job per subscription POSTs its events in feed order,
// signed with the subscription's secret, at least once, resuming after the
// last event the receiver acknowledged.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/enqueue"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/idempotency"
)

// AllEvents subscribes to every event type, those added later included.
const AllEvents = "*"

// MaxURLLength bounds a webhook's URL.
const MaxURLLength = 2048

// Config tunes the service.
type Config struct {
	// AllowPrivate lets webhooks reach loopback and private addresses
	// (STOCKHOLD_WEBHOOK_ALLOW_PRIVATE): tests and a receiver on the same
	// private network. Off, such addresses are refused when a webhook is
	// registered and again when each delivery connects, so a name that
	// resolves elsewhere later (DNS rebinding) cannot reach them.
	AllowPrivate bool
	// RetryBase is the wait after a failed delivery; the next waits four
	// times as long, and after the third failure (and the alert) retries
	// come every 16 times RetryBase (STOCKHOLD_RETRY_BASE when 0).
	RetryBase time.Duration
	// Tick is how often the dispatcher looks for subscriptions with events
	// to deliver; 0 means 250 ms.
	Tick time.Duration
	Log  *slog.Logger
	// Recorder, when set, is told about every delivery, for metrics.
	Recorder Recorder
}

// Recorder is told about deliveries, for metrics (app/metrics feeds
// Prometheus with it).
type Recorder interface {
	// WebhookDelivered is told about one POST of events: delivered (ok)
	// or failed.
	WebhookDelivered(ok bool, events int)
}

type nopRecorder struct{}

func (nopRecorder) WebhookDelivered(bool, int) {}

// Service registers webhooks and delivers the feed to them.
type Service struct {
	pool     *pgxpool.Pool
	jobs     enqueue.Inserter
	alerts   *alerts.Service
	cfg      Config
	client   *http.Client
	resolver *net.Resolver
}

// New returns a Service. jobs enqueues the delivery jobs the dispatcher
// starts.
func New(pool *pgxpool.Pool, jobs enqueue.Inserter, al *alerts.Service, cfg Config) *Service {
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = config.Defaults().RetryBase
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 250 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Recorder == nil {
		cfg.Recorder = nopRecorder{}
	}
	return &Service{pool: pool, jobs: jobs, alerts: al, cfg: cfg, client: newClient(cfg.AllowPrivate), resolver: net.DefaultResolver}
}

// Webhook is a subscription as operators see it; its secret is shown only
// when it is made.
type Webhook struct {
	ID        int64     `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// LastEventID is the last event the receiver acknowledged (or that was
	// skipped as a type it did not ask for): delivery resumes after it.
	LastEventID     string     `json:"last_event_id"`
	DeliveredAt     *time.Time `json:"delivered_at"`
	DeliveredEvents int64      `json:"delivered_events"`
	// Failures counts failed attempts at the batch now due; 3 raises a
	// critical webhook_failing alert.
	Failures     int32      `json:"failures"`
	FailingSince *time.Time `json:"failing_since"`
	LastError    *string    `json:"last_error"`
	// OldestPendingAt is when the oldest event not yet acknowledged
	// happened: the subscription's lag. Null when it is caught up.
	OldestPendingAt *time.Time `json:"oldest_pending_at"`
}

// Created is a new subscription with its secret, shown this once.
type Created struct {
	Webhook
	Secret string `json:"secret"`
}

// Register asks for a new subscription.
type Register struct {
	URL    string
	Events []string
	Actor  string
}

func cursorOf(w db.Webhook) events.Position {
	return events.Position{Xid: w.CursorXid, ID: w.CursorID, N: int(w.CursorN)}
}

func view(ctx context.Context, q *db.Queries, w db.Webhook) (Webhook, error) {
	out := Webhook{
		ID: w.ID, URL: w.Url, Events: w.Events, CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt,
		LastEventID: cursorOf(w).String(), DeliveredAt: w.DeliveredAt, DeliveredEvents: w.DeliveredEvents,
		Failures: w.Failures, FailingSince: w.FailingSince, LastError: w.LastError,
	}
	at, err := q.WebhookOldestPending(ctx, w.CursorXid, w.CursorID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return Webhook{}, fmt.Errorf("read webhook %d's lag: %w", w.ID, err)
	default:
		out.OldestPendingAt = &at
	}
	return out, nil
}

// validEvents checks a subscription's event types: ["*"] alone, or known
// types, each once.
func validEvents(types []string) error {
	if len(types) == 0 {
		return domain.Invalid(`events is empty: name event types, or ["*"] for all`)
	}
	if len(types) > len(events.Types) {
		return domain.Invalid("events names %d types; there are %d", len(types), len(events.Types))
	}
	for i, t := range types {
		switch {
		case t == AllEvents && len(types) > 1:
			return domain.Invalid(`events: "*" means every type: give it alone`)
		case t != AllEvents && !events.Known(t):
			return domain.Invalid("events[%d] %q is not an event type (%v, or \"*\")", i, t, events.Types)
		case slices.Index(types, t) != i:
			return domain.Invalid("events names %q twice", t)
		}
	}
	return nil
}

// CreateTx registers a webhook inside the caller's transaction. The URL must
// be absolute http(s) without credentials, and (unless AllowPrivate) its
// host must resolve only to public addresses. The subscription gets the
// events of changes that commit from now on: its cursor starts at the
// feed's horizon, and the snapshot it keeps passes over the rows after that
// horizon that had committed already (see committedBefore).
func (s *Service) CreateTx(ctx context.Context, tx pgx.Tx, r Register) (Created, error) {
	if err := validEvents(r.Events); err != nil {
		return Created{}, err
	}
	if err := s.checkURL(ctx, r.URL); err != nil {
		return Created{}, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Created{}, fmt.Errorf("webhook secret: %w", err)
	}
	q := db.New(tx)
	start, err := events.StartNow(ctx, q)
	if err != nil {
		return Created{}, err
	}
	row, err := q.WebhookCreate(ctx, db.WebhookCreateParams{
		Url: r.URL, Events: r.Events, Secret: "whsec_" + hex.EncodeToString(secret), CreatedBy: r.Actor,
		CursorXid: start.Xid, CursorID: start.ID, CursorN: int32(start.N),
	})
	if err != nil {
		return Created{}, fmt.Errorf("register webhook: %w", err)
	}
	w, err := view(ctx, q, row)
	return Created{Webhook: w, Secret: row.Secret}, err
}

// CreateOnce is CreateTx in a transaction of its own, at most once per key
// (see idempotency.Do): a retry gets the same secret.
func (s *Service) CreateOnce(ctx context.Context, key idempotency.Key, r Register) (out Created, replayed bool, err error) {
	return idempotency.Do(ctx, s.pool, key, func(tx pgx.Tx) (Created, error) { return s.CreateTx(ctx, tx, r) })
}

// Get returns webhook id.
func (s *Service) Get(ctx context.Context, id int64) (Webhook, error) {
	q := db.New(s.pool)
	row, err := q.WebhookGet(ctx, id)
	if err != nil {
		return Webhook{}, dberr.NotFound(err, "webhook")
	}
	return view(ctx, q, row)
}

// List returns every webhook, oldest first (the console's overview).
func (s *Service) List(ctx context.Context) ([]Webhook, error) {
	q := db.New(s.pool)
	rows, err := q.WebhookList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return views(ctx, q, rows)
}

// MaxList bounds one page of webhooks.
const MaxList = 1000

// Page returns up to limit webhooks in id order after id after (0: from
// the first), and the id to page on from, nil on the last page.
func (s *Service) Page(ctx context.Context, after int64, limit int) ([]Webhook, *int64, error) {
	if limit < 1 || limit > MaxList {
		return nil, nil, domain.Invalid("limit must be from 1 to %d", MaxList)
	}
	q := db.New(s.pool)
	rows, err := q.WebhookPage(ctx, after, int32(limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("list webhooks: %w", err)
	}
	var next *int64
	if len(rows) > limit {
		rows = rows[:limit]
		next = &rows[limit-1].ID
	}
	out, err := views(ctx, q, rows)
	return out, next, err
}

func views(ctx context.Context, q *db.Queries, rows []db.Webhook) ([]Webhook, error) {
	out := make([]Webhook, 0, len(rows))
	for _, r := range rows {
		w, err := view(ctx, q, r)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// Delete removes webhook id: nothing more is sent to it (a delivery in
// flight finishes, and its job ends).
func (s *Service) Delete(ctx context.Context, id int64) error {
	n, err := db.New(s.pool).WebhookDelete(ctx, id)
	if err != nil {
		return fmt.Errorf("delete webhook %d: %w", id, err)
	}
	if n == 0 {
		return domain.Missing("webhook")
	}
	return nil
}

// DeliverArgs is the job that delivers one subscription's pending events.
// At most one is queued or running per subscription; it snoozes between
// retries rather than failing, so River's attempts are left for crashes.
type DeliverArgs struct {
	WebhookID int64 `json:"webhook_id" river:"unique"`
}

// Kind names the job in river_job.
func (DeliverArgs) Kind() string { return "webhook_deliver" }

// liveStates are the job states in which a delivery job counts as queued.
var liveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

// InsertOpts keeps one delivery job per subscription.
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

// Validate checks that the job names a webhook.
func (a DeliverArgs) Validate() error {
	if a.WebhookID < 1 {
		return errors.New("webhook_id must be a webhook's id")
	}
	return nil
}

// DispatchArgs is the dispatcher's loop: each run, for one span, enqueues
// a delivery job for every subscription with events waiting, then hands
// over to the next run (one job row per span, like expire_holds).
type DispatchArgs struct{}

// Kind names the job in river_job.
func (DispatchArgs) Kind() string { return "webhook_dispatch" }
