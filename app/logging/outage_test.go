package logging_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/logging"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t require.TestingT) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		out = append(out, m)
	}
	return out
}

// TestOutageIsTwoLines: while the database is away, the first line about
// it passes (saying the rest are held back), the others (River's, as
// text, and the process's own, as errors, from derived loggers too) are
// counted and dropped, lines about anything else pass; once the probe
// answers, one line says for how long and how many were held back. A
// logger nobody watches for passes every line.
func TestOutageIsTwoLines(t *testing.T) {
	var buf lockedBuffer
	log, err := logging.New("json", "info", &buf)
	require.NoError(t, err)
	var up atomic.Bool
	unwatch := logging.WatchDatabase(log, func(context.Context) error {
		if up.Load() {
			return nil
		}
		return errors.New("connection refused")
	})
	defer unwatch()

	river := log.With("component", "river")
	lost := errors.New(`failed to connect to "user=postgres": dial error: dial tcp 127.0.0.1:5432: connect: connection refused`)
	for range 100 {
		river.Error("producer: Error fetching jobs", slog.String("err", lost.Error()), slog.String("queue", "default"))
		log.Warn("hold batch failed", "err", lost)
		log.Info("job interrupted by the loss of the database", "err", errors.New("unexpected EOF"))
	}
	log.Error("something else", "err", errors.New("a bug"))
	log.Info("request", "status", 503)
	up.Store(true)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, buf.lines(c), 4)
	}, 5*time.Second, 10*time.Millisecond)
	lines := buf.lines(t)
	require.Equal(t, "producer: Error fetching jobs", lines[0]["msg"])
	require.Contains(t, lines[0]["log_note"], "held back")
	require.Equal(t, "something else", lines[1]["msg"])
	require.Equal(t, "request", lines[2]["msg"])
	require.Equal(t, "database answers again", lines[3]["msg"])
	require.Equal(t, "WARN", lines[3]["level"])
	require.EqualValues(t, 299, lines[3]["held_back"])
	require.NotEmpty(t, lines[3]["unreachable_for"])

	// Back up: the next loss is its first line again.
	log.Warn("hold batch failed", "err", lost)
	require.Len(t, buf.lines(t), 5)

	// Unwatched (the process stops): nothing is held back.
	unwatch()
	for range 3 {
		log.Warn("hold batch failed", "err", lost)
	}
	require.Len(t, buf.lines(t), 8)
}
