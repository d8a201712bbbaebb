package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/events"
	"github.com/stockhold/stockhold/app/leader"
)

// Delivery limits.
const (
	// BatchSize is the most events one POST carries.
	BatchSize = 100
	// MaxAttempts is how many times in a row a batch may fail before the
	// critical alert.
	MaxAttempts = 3
	// Budget is how long one delivery job delivers before it hands over to
	// its next run (it snoozes for no time), so one busy subscription does
	// not keep a worker for ever.
	Budget = 20 * time.Second
	// scanPage is how many events one read of the feed takes.
	scanPage = 500
	// scanLimit bounds the events one batch looks at for ones the
	// subscription wants, before it moves its cursor past those it read.
	scanLimit = 10 * scanPage
)

// AlertKind is the alert raised for a receiver that failed MaxAttempts
// deliveries in a row.
const AlertKind = "webhook_failing"

// SignatureHeader carries a delivery's signature: t=<unix seconds>,v1=<hex
// HMAC-SHA256 of "<t>.<body>" keyed with the subscription's secret>.
const SignatureHeader = "Stockhold-Signature"

// Sign returns the SignatureHeader value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	ts := strconv.FormatInt(t.Unix(), 10)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Body is what each delivery POSTs.
type Body struct {
	Events []events.Event `json:"events"`
}

// Result is what one delivery job did, and when it wants to run again.
type Result struct {
	Delivered int `json:"delivered"`
	Batches   int `json:"batches"`
	// Failed is the error of the batch that failed, if one did.
	Failed string `json:"failed,omitempty"`
	// Again, when positive, is when to run again: after a failure, or
	// at once (a nanosecond) when the budget ran out with events left.
	Again time.Duration `json:"-"`
}

// Deliver delivers subscription id's pending events, a batch of up to
// BatchSize at a time in feed order, until it is caught up, a batch fails,
// or Budget has passed. A batch is acknowledged by a 2xx answer: the
// cursor moves past it (in the database, so a restart resumes there; a
// crash between the answer and the move sends the batch again: at least
// once). A failed batch is counted; the job retries it after RetryBase,
// then four times that, and at the third failure in a row raises a
// critical webhook_failing alert and goes on retrying every 16 times
// RetryBase, from the same event, until the receiver takes it (which
// resolves the alert) or the webhook is deleted.
func (s *Service) Deliver(ctx context.Context, id int64) (Result, error) {
	var res Result
	deadline := time.Now().Add(Budget)
	q := db.New(s.pool)
	for {
		w, err := q.WebhookGet(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return res, nil // deleted
		}
		if err != nil {
			return res, fmt.Errorf("read webhook %d: %w", id, err)
		}
		from := cursorOf(w)
		batch, upto, err := s.collect(ctx, q, from, w)
		if err != nil {
			return res, err
		}
		if len(batch) == 0 && upto == from {
			return res, nil // caught up
		}
		if len(batch) > 0 {
			if perr := s.post(ctx, w, batch); perr != nil {
				s.cfg.Recorder.WebhookDelivered(false, len(batch))
				return s.failed(ctx, q, w, perr, res)
			}
			s.cfg.Recorder.WebhookDelivered(true, len(batch))
			res.Delivered += len(batch)
			res.Batches++
		}
		moved, err := q.WebhookAdvance(ctx, db.WebhookAdvanceParams{
			ID: id, CursorXid: upto.Xid, CursorID: upto.ID, CursorN: int32(upto.N), Delivered: int64(len(batch)),
			FromXid: from.Xid, FromID: from.ID, FromN: int32(from.N),
		})
		if err != nil {
			return res, fmt.Errorf("move webhook %d's cursor: %w", id, err)
		}
		if moved == 0 {
			return res, nil // another delivery moved it meanwhile: it goes on
		}
		if w.Failures >= MaxAttempts {
			if _, err := s.alerts.Resolve(ctx, AlertKind, subject(id), "the receiver acknowledged a delivery again: the webhook's events go on from its cursor"); err != nil {
				s.cfg.Log.WarnContext(ctx, "resolve webhook alert", "webhook_id", id, "err", err)
			}
		}
		if time.Now().After(deadline) {
			res.Again = time.Nanosecond
			return res, nil
		}
	}
}

func subject(id int64) string { return fmt.Sprintf("webhook:%d", id) }

// failed records a failed batch and says when to try it again.
func (s *Service) failed(ctx context.Context, q *db.Queries, w db.Webhook, why error, res Result) (Result, error) {
	msg := why.Error()
	res.Failed = msg
	n, err := q.WebhookFailed(ctx, &msg, w.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, nil // deleted meanwhile
	}
	if err != nil {
		return res, fmt.Errorf("record webhook %d's failure: %w", w.ID, err)
	}
	s.cfg.Log.WarnContext(ctx, "webhook delivery failed", "webhook_id", w.ID, "url", w.Url, "failures", n, "err", msg)
	res.Again = s.cfg.RetryBase
	for i := int32(1); i < min(n, MaxAttempts); i++ {
		res.Again *= 4
	}
	if n < MaxAttempts {
		return res, nil
	}
	if n == MaxAttempts {
		_, err := s.alerts.Raise(ctx, alerts.Raise{
			Level:   alerts.Critical,
			Kind:    AlertKind,
			Subject: subject(w.ID),
			Details: map[string]any{
				"webhook_id": w.ID, "url": w.Url, "failures": n, "last_error": msg,
				"last_event_id": cursorOf(w).String(),
			},
			Action: fmt.Sprintf("Webhook %d (%s) failed %d deliveries of the same batch in a row (last: %s). "+
				"Delivery goes on being retried every %s from the last event it acknowledged (%s), so nothing is lost: "+
				"fix the receiver, or DELETE /v1/webhooks/%d if it is gone. The alert resolves itself once a delivery succeeds.",
				w.ID, w.Url, n, msg, res.Again, cursorOf(w), w.ID),
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// wants reports whether a subscription to types wants an event of type t.
func wants(types []string, t string) bool {
	return slices.Contains(types, AllEvents) || slices.Contains(types, t)
}

// collect reads the feed after from for up to BatchSize events the
// subscription wants. It returns them and the position up to which it
// read: the last event returned, or, when it found fewer, the last event it
// looked at (events of other types, and events from before the webhook
// existed, are passed over with them).
func (s *Service) collect(ctx context.Context, q *db.Queries, from events.Position, w db.Webhook) ([]events.Event, events.Position, error) {
	var batch []events.Event
	upto := from
	for scanned := 0; scanned < scanLimit; {
		page, err := events.Read(ctx, q, upto, scanPage)
		if err != nil {
			return nil, from, err
		}
		before, err := committedBefore(ctx, q, w, page.Events)
		if err != nil {
			return nil, from, err
		}
		for _, e := range page.Events {
			upto = e.Position
			if wants(w.Events, e.Type) && !before[e.Position.ID] {
				batch = append(batch, e)
				if len(batch) == BatchSize {
					return batch, upto, nil
				}
			}
		}
		if len(page.Events) < scanPage {
			break // caught up
		}
		scanned += len(page.Events)
	}
	return batch, upto, nil
}

// committedBefore returns the ledger rows among evs' that committed before
// webhook w was created. A webhook's cursor starts at the feed's horizon,
// the oldest transaction still running when it was created; rows that had
// committed by then but sit after that horizon (an older transaction was
// still open) are in the webhook's start snapshot, and are not its events.
// Each row is judged by its own writing transaction, not by its feed
// position (the stock row's youngest writer: see WebhookCommittedBefore).
// Only rows below the snapshot's xmax can be before it (a row's feed
// position is a transaction that had committed when the row's writer
// did): past it the feed no longer asks the database.
func committedBefore(ctx context.Context, q *db.Queries, w db.Webhook, evs []events.Event) (map[int64]bool, error) {
	if w.StartSnapshot == nil || len(evs) == 0 {
		return nil, nil
	}
	// pg_snapshot's text form is xmin:xmax:xip,...
	parts := strings.SplitN(*w.StartSnapshot, ":", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("webhook %d's start snapshot %q is not a pg_snapshot", w.ID, *w.StartSnapshot)
	}
	xmax, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("webhook %d's start snapshot %q: %w", w.ID, *w.StartSnapshot, err)
	}
	var ids []int64
	for _, e := range evs {
		if e.Position.Xid < xmax && (len(ids) == 0 || ids[len(ids)-1] != e.Position.ID) {
			ids = append(ids, e.Position.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.WebhookCommittedBefore(ctx, ids, *w.StartSnapshot)
	if err != nil {
		return nil, fmt.Errorf("read which events came before webhook %d: %w", w.ID, err)
	}
	before := make(map[int64]bool, len(rows))
	for _, id := range rows {
		before[id] = true
	}
	return before, nil
}

// post sends one batch, signed; only a 2xx answer acknowledges it.
func (s *Service) post(ctx context.Context, w db.Webhook, batch []events.Event) error {
	body, err := json.Marshal(Body{Events: batch})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.Url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stockhold-webhooks")
	req.Header.Set("Stockhold-Webhook-Id", strconv.FormatInt(w.ID, 10))
	req.Header.Set(SignatureHeader, Sign(w.Secret, time.Now(), body))
	res, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("post %d events: %w", len(batch), err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("post %d events: the receiver answered %s", len(batch), res.Status)
	}
	return nil
}

// DispatchRun is what one run of the dispatcher did; the webhook_dispatch
// job records it as its output.
type DispatchRun struct {
	Enqueued int `json:"enqueued"`
	Passes   int `json:"passes"`
	// Skipped means another runner kept the dispatch lock all along.
	Skipped bool `json:"skipped,omitempty"`
}

// DispatchLoop wakes deliveries until until (or ctx ends): every Tick it
// enqueues a webhook_deliver job for each subscription with events past its
// cursor and no delivery job queued or running. Waking by polling the feed
// rather than by a job per event keeps the write path as it was: a batch
// of holds writes ledger rows and nothing else. One loop runs at a time
// across every instance, under an advisory lock held by its connection.
func (s *Service) DispatchLoop(ctx context.Context, until time.Time) (DispatchRun, error) {
	var run DispatchRun
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return run, err
	}
	defer pc.Release()
	q := db.New(pc.Conn())
	lock := leader.Lock{Name: "dispatch", Try: q.WebhookDispatchLockTry, Unlock: q.WebhookDispatchUnlock}
	lr, err := leader.Loop(ctx, pc.Conn(), lock, until, s.cfg.Tick, func(ctx context.Context) error {
		n, err := s.dispatch(ctx, q)
		run.Enqueued += n
		return err
	})
	run.Passes, run.Skipped = lr.Passes, lr.Skipped
	return run, err
}

// dispatch is one pass of the dispatcher.
func (s *Service) dispatch(ctx context.Context, q *db.Queries) (int, error) {
	ids, err := q.WebhooksDue(ctx)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: DeliverArgs{WebhookID: id}}
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := s.jobs.InsertManyTx(ctx, tx, params)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	return len(ids), nil
}
