package api

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// throttle logs a recurring refusal (the database unreachable, rows locked,
// the pool exhausted) once per interval with how many requests it stood
// for, rather than once per request: an outage answered at thousands of
// requests a second must not bury the log.
type throttle struct {
	log   *slog.Logger
	every time.Duration

	mu     sync.Mutex
	byCode map[string]*throttled
}

type throttled struct {
	last  time.Time
	count int
}

func newThrottle(log *slog.Logger, every time.Duration) *throttle {
	return &throttle{log: log, every: every, byCode: map[string]*throttled{}}
}

// note counts one refusal with code; the first one, and the first after
// each interval, is logged with the count since the previous line.
func (t *throttle) note(ctx context.Context, code, what string, err error) {
	now := time.Now()
	t.mu.Lock()
	e := t.byCode[code]
	if e == nil {
		e = &throttled{}
		t.byCode[code] = e
	}
	e.count++
	if !e.last.IsZero() && now.Sub(e.last) < t.every {
		t.mu.Unlock()
		return
	}
	n := e.count
	e.count, e.last = 0, now
	t.mu.Unlock()

	level := slog.LevelWarn
	if code == "unavailable" {
		level = slog.LevelError
	}
	t.log.Log(ctx, level, "requests refused under pressure (logged once per interval)",
		"code", code, "count", n, "interval", t.every, "last", what, "err", err)
}
