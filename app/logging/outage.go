package logging

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// An outage of the database makes every part of the process say so, over
// and over: River's producers about ten times a second per queue, its
// completer, notifier and elector, the hold batches, the jobs it
// interrupts, each request refused. A 20 s restart logged 618-682 ERROR
// lines, which hide everything else. So the logger collapses them: the
// first line about the lost database is logged (saying that what follows
// is held back), the lines like it are counted and dropped until the
// database answers again, and then one line says so, with how long it was
// unreachable and how many lines were held back. Whether it answers is a
// probe's (WatchDatabase), run only while it does not.

// probeEvery is how often a lost database is probed.
const probeEvery = 250 * time.Millisecond

// outage is what the handlers derived from one logger share.
type outage struct {
	// out is where the outage's own line goes: the handler New built.
	out slog.Handler

	mu    sync.Mutex
	probe func(context.Context) error
	down  bool
	since time.Time
	held  int
}

// outageHandler holds back the lines about a lost database (see outage).
type outageHandler struct {
	slog.Handler
	o *outage
}

// Handle passes r on, unless it is about a lost database while an outage
// is being watched: then the first such line passes, saying so, and the
// rest are counted.
func (h outageHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo || !aboutLostDatabase(r) {
		return h.Handler.Handle(ctx, r)
	}
	o := h.o
	o.mu.Lock()
	switch {
	case o.probe == nil:
		o.mu.Unlock()
		return h.Handler.Handle(ctx, r)
	case o.down:
		o.held++
		o.mu.Unlock()
		return nil
	}
	o.down, o.since, o.held = true, time.Now(), 0
	probe := o.probe
	o.mu.Unlock()
	go o.watch(probe)
	r = r.Clone()
	r.AddAttrs(slog.String("log_note", "the database is unreachable: the lines like this one are held back until it answers again"))
	return h.Handler.Handle(ctx, r)
}

// watch probes the database until it answers (or the watch ends), then
// says how long it was gone and how many lines were held back.
func (o *outage) watch(probe func(context.Context) error) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for range t.C {
		ctx, cancel := context.WithTimeout(context.Background(), 4*probeEvery)
		err := probe(ctx)
		cancel()
		o.mu.Lock()
		if o.probe == nil { // unwatched: the process is stopping
			o.down = false
			o.mu.Unlock()
			return
		}
		if err != nil {
			o.mu.Unlock()
			continue
		}
		held, since := o.held, o.since
		o.down, o.held = false, 0
		o.mu.Unlock()
		if held == 0 && time.Since(since) < time.Second {
			return // a blip (a timeout, one dropped connection): nothing was held back
		}
		r := slog.NewRecord(time.Now(), slog.LevelWarn, "database answers again", 0)
		r.AddAttrs(slog.Duration("unreachable_for", time.Since(since).Round(time.Millisecond)), slog.Int("held_back", held))
		_ = o.out.Handle(context.Background(), r)
		return
	}
}

// WithAttrs keeps the wrapper, and its outage, around the derived handler.
func (h outageHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return outageHandler{Handler: h.Handler.WithAttrs(attrs), o: h.o}
}

// WithGroup keeps the wrapper, and its outage, around the derived handler.
func (h outageHandler) WithGroup(name string) slog.Handler {
	return outageHandler{Handler: h.Handler.WithGroup(name), o: h.o}
}

// WatchDatabase makes log (one New built; any other is left alone) hold
// back the lines about a lost database, with probe telling when it answers
// again (a ping of the process's pool). The returned function ends the
// watch (when the pool closes); lines then pass as they come.
func WatchDatabase(log *slog.Logger, probe func(context.Context) error) (unwatch func()) {
	h, ok := log.Handler().(outageHandler)
	if !ok {
		return func() {}
	}
	h.o.mu.Lock()
	h.o.probe = probe
	h.o.mu.Unlock()
	return func() {
		h.o.mu.Lock()
		h.o.probe = nil
		h.o.mu.Unlock()
	}
}

// lostDatabase is what the errors of a database that went away say: the
// connection refused or dropped, the server shutting down or restarting,
// a connection or a pool wait that ran out of time. They come as error
// values or as text (River logs err.Error()).
var lostDatabase = []string{
	"failed to connect", "dial error", "connection refused", "connection reset", "broken pipe",
	"unexpected EOF", "conn closed", "server closed the connection", "no connection to the server",
	"SQLSTATE 57P01", "SQLSTATE 57P02", "SQLSTATE 57P03", "SQLSTATE 08",
	"terminating connection", "the database system is", "context deadline exceeded",
}

// aboutLostDatabase reports whether r's error (an attribute err or error)
// says the database went away.
func aboutLostDatabase(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" && a.Key != "error" {
			return true
		}
		var text string
		switch v := a.Value.Resolve().Any().(type) {
		case error:
			text = v.Error()
			found = errors.Is(v, context.DeadlineExceeded)
		case string:
			text = v
		default:
			return true
		}
		for _, s := range lostDatabase {
			if strings.Contains(text, s) {
				found = true
				break
			}
		}
		return !found
	})
	return found
}
