// Package alerts records what a person must look at, at most one open alert
// per kind and subject, and hands new ones to the webhook through the
// deliver_alert job, enqueued in the same transaction as the alert.
package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/enqueue"
)

// Levels of alerts.
const (
	Info     = "info"
	Warning  = "warning"
	Critical = "critical"
)

// Alert statuses.
const (
	StatusOpen     = "open"
	StatusAcked    = "acked"
	StatusResolved = "resolved"
)

// Service raises, lists and acknowledges alerts.
type Service struct {
	pool *pgxpool.Pool
	jobs enqueue.Inserter
	// deliver is whether a webhook is configured to receive new alerts.
	deliver bool
	// repageAfter is how long an open alert stays quiet before a repeat
	// pages again; 0 never re-pages.
	repageAfter time.Duration
}

// New returns a Service; deliver says whether new alerts go to the webhook.
// An open alert that repeats pages only once, unless WithRepageAfter is set.
func New(pool *pgxpool.Pool, jobs enqueue.Inserter, deliver bool) *Service {
	return &Service{pool: pool, jobs: jobs, deliver: deliver}
}

// WithRepageAfter makes a repeat of an open alert page again (its webhook
// delivery enqueued once more) when the alert last paged at least d ago:
// a failure that comes back after a quiet hour is news, one that repeats
// every minute pages once an hour. 0 never re-pages. Call it while wiring.
func (s *Service) WithRepageAfter(d time.Duration) *Service {
	s.repageAfter = d
	return s
}

// Alert is an alert as operators see it.
type Alert struct {
	ID              int64           `json:"id"`
	Level           string          `json:"level"`
	Kind            string          `json:"kind"`
	Subject         string          `json:"subject"`
	SKU             *string         `json:"sku"`
	Location        *string         `json:"location"`
	Pool            *string         `json:"pool"`
	Details         json.RawMessage `json:"details"`
	SuggestedAction string          `json:"suggested_action"`
	Status          string          `json:"status"`
	FirstSeenAt     time.Time       `json:"first_seen_at"`
	LastSeenAt      time.Time       `json:"last_seen_at"`
	Occurrences     int32           `json:"occurrences"`
	AckedBy         *string         `json:"acked_by"`
	// AckedKey is the API key that acknowledged it, beside the operator
	// AckedBy names (see domain.WithKeyName).
	AckedKey *string    `json:"acked_key"`
	AckedAt  *time.Time `json:"acked_at"`
	// Owner is who handles the alert (Take; acknowledging sets it when
	// nobody had taken it), TakenAt since when.
	Owner *string `json:"owner"`
	// OwnerKey is the API key that authenticated whoever took it.
	OwnerKey    *string    `json:"owner_key"`
	TakenAt     *time.Time `json:"taken_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	// ResolvedAt is when the alert was resolved, Resolution how (what
	// fixed it, who, why); both null until then.
	ResolvedAt *time.Time `json:"resolved_at"`
	Resolution *string    `json:"resolution"`
}

func newAlert(a db.Alert) Alert {
	return Alert{
		ID: a.ID, Level: a.Level, Kind: a.Kind, Subject: a.Subject, SKU: a.Sku, Location: a.Location, Pool: a.Pool,
		Details: a.Details, SuggestedAction: a.SuggestedAction, Status: a.Status,
		FirstSeenAt: a.FirstSeenAt, LastSeenAt: a.LastSeenAt, Occurrences: a.Occurrences,
		AckedBy: a.AckedBy, AckedKey: a.AckedKey, AckedAt: a.AckedAt, DeliveredAt: a.DeliveredAt,
		Owner: a.Owner, OwnerKey: a.OwnerKey, TakenAt: a.TakenAt,
		ResolvedAt: a.ResolvedAt, Resolution: a.Resolution,
	}
}

// Raise describes an alert to open (or repeat).
type Raise struct {
	Level    string
	Kind     string
	Subject  string
	SKU      string
	Location string
	Pool     string
	Details  map[string]any
	Action   string
}

// RaiseTx opens the alert inside the caller's transaction, or counts another
// occurrence of the open one with the same kind and subject. A new alert,
// and a repeat after the re-page interval, is queued for the webhook in the
// same transaction.
func (s *Service) RaiseTx(ctx context.Context, tx pgx.Tx, r Raise) (Alert, error) {
	details, err := json.Marshal(r.Details)
	if err != nil {
		return Alert{}, fmt.Errorf("alert details: %w", err)
	}
	if r.Details == nil {
		details = []byte("{}")
	}
	row, err := db.New(tx).AlertRaise(ctx, db.AlertRaiseParams{
		Level: r.Level, Kind: r.Kind, Subject: r.Subject, Sku: domain.Optional(r.SKU), Location: domain.Optional(r.Location), Pool: domain.Optional(r.Pool),
		Details: details, SuggestedAction: r.Action, RepageAfterMs: s.repageAfter.Milliseconds(),
	})
	if err != nil {
		return Alert{}, fmt.Errorf("raise %s alert: %w", r.Kind, err)
	}
	// A new alert, or a repeat that re-pages: see AlertRaise.
	if row.PagedOccurrences == row.Occurrences && s.deliver {
		if _, err := s.jobs.InsertTx(ctx, tx, DeliverAlertArgs{AlertID: row.ID}, nil); err != nil {
			return Alert{}, fmt.Errorf("enqueue deliver_alert: %w", err)
		}
	}
	return newAlert(row), nil
}

// Raise is RaiseTx in a transaction of its own.
func (s *Service) Raise(ctx context.Context, r Raise) (Alert, error) {
	var a Alert
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		a, err = s.RaiseTx(ctx, tx, r)
		return err
	})
	return a, err
}

// MaxList bounds one listing.
const MaxList = 500

// List returns the newest alerts, all of them or those in status.
func (s *Service) List(ctx context.Context, status string, limit int) ([]Alert, error) {
	p, err := s.Page(ctx, ListQuery{Status: status, Limit: limit})
	return p.Alerts, err
}

// ListQuery asks Page for a page of alerts.
type ListQuery struct {
	// Status, when given, is the only status listed.
	Status string
	Limit  int
	// After is the previous page's Next; nil for the first page.
	After *Cursor
}

// Cursor is where a page of alerts ends: its last alert's last_seen_at
// and id, the keyset alerts are listed in.
type Cursor struct {
	SeenAt time.Time
	ID     int64
}

// String is the cursor as the API gives it: microseconds since the epoch
// and the id.
func (c Cursor) String() string {
	return strconv.FormatInt(c.SeenAt.UnixMicro(), 10) + "-" + strconv.FormatInt(c.ID, 10)
}

// ParseCursor reads a Cursor's String.
func ParseCursor(s string) (Cursor, error) {
	at, id, ok := strings.Cut(s, "-")
	us, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || us < 0 || n < 1 {
		return Cursor{}, fmt.Errorf("not an alerts cursor: %q", s)
	}
	return Cursor{SeenAt: time.UnixMicro(us).UTC(), ID: n}, nil
}

// Page is a page of alerts and the cursor of the next, nil on the last.
type Page struct {
	Alerts []Alert
	Next   *Cursor
}

// Page returns the alerts lq asks for, the last seen first.
func (s *Service) Page(ctx context.Context, lq ListQuery) (Page, error) {
	p := db.AlertListParams{Lim: int32(lq.Limit + 1)}
	switch lq.Status {
	case "":
	case StatusOpen, StatusAcked, StatusResolved:
		p.Status = &lq.Status
	default:
		return Page{}, domain.Invalid("status must be open, acked or resolved")
	}
	if lq.Limit < 1 || lq.Limit > MaxList {
		return Page{}, domain.Invalid("limit must be from 1 to %d", MaxList)
	}
	if lq.After != nil {
		p.SeenBefore, p.IDBefore = &lq.After.SeenAt, lq.After.ID
	}
	rows, err := db.New(s.pool).AlertList(ctx, p)
	if err != nil {
		return Page{}, err
	}
	var out Page
	if len(rows) > lq.Limit {
		rows = rows[:lq.Limit]
		last := rows[lq.Limit-1]
		out.Next = &Cursor{SeenAt: last.LastSeenAt, ID: last.ID}
	}
	out.Alerts = make([]Alert, len(rows))
	for i, r := range rows {
		out.Alerts[i] = newAlert(r)
	}
	return out, nil
}

// Get returns alert id.
func (s *Service) Get(ctx context.Context, id int64) (Alert, error) {
	row, err := db.New(s.pool).AlertGet(ctx, id)
	if err != nil {
		return Alert{}, dberr.NotFound(err, "alert")
	}
	return newAlert(row), nil
}

// Ack records that operator is on it. Acknowledging again answers the alert
// as it is. A later occurrence opens a new alert.
func (s *Service) Ack(ctx context.Context, id int64, operator string) (Alert, error) {
	if err := domain.ValidName("operator", operator); err != nil {
		return Alert{}, err
	}
	row, err := db.New(s.pool).AlertAck(ctx, &operator, domain.KeyName(ctx), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Get(ctx, id)
	}
	if err != nil {
		return Alert{}, err
	}
	return newAlert(row), nil
}

// Take makes operator the owner of alert id: the person handling what it
// reports. The alert stays open (acknowledging is a separate step); taking
// it again, by anyone, changes the owner. A resolved alert is answered as
// it is.
func (s *Service) Take(ctx context.Context, id int64, operator string) (Alert, error) {
	if err := domain.ValidName("operator", operator); err != nil {
		return Alert{}, err
	}
	row, err := db.New(s.pool).AlertTake(ctx, &operator, domain.KeyName(ctx), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Get(ctx, id)
	}
	if err != nil {
		return Alert{}, err
	}
	return newAlert(row), nil
}

// Resolve closes the open or acknowledged alert of kind about subject, when
// what it reported went away, with resolution saying how (what fixed it,
// who, why); it reports whether there was one.
func (s *Service) Resolve(ctx context.Context, kind, subject, resolution string) (bool, error) {
	n, err := db.New(s.pool).AlertResolve(ctx, &resolution, kind, subject)
	if err != nil {
		return false, fmt.Errorf("resolve %s alert: %w", kind, err)
	}
	return n > 0, nil
}
