// Package logging builds stockhold's slog logger and carries per-request
// and per-job attributes (request id, hold id, SKU, job id and kind) in the
// context, so every line logged while serving a request or working a job
// says which one it belongs to without each call site repeating them.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Formats of log output.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// New returns a logger writing to w in format (FormatJSON or FormatText) at
// level (debug, info, warn or error). Records logged with a context made by
// With also carry that context's attributes. Once WatchDatabase gives it a
// probe, the lines an outage of the database makes are collapsed.
func New(format, level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case FormatJSON, "":
		h = slog.NewJSONHandler(w, opts)
	case FormatText:
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want json or text", format)
	}
	ctxAttrs := Handler{Handler: h}
	return slog.New(outageHandler{Handler: ctxAttrs, o: &outage{out: ctxAttrs}}), nil
}

// Handler adds the attributes of a record's context (see With and Add) to
// the record before handing it to the handler it wraps.
type Handler struct{ slog.Handler }

// Handle adds ctx's attributes, then passes the record on.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	if b, ok := ctx.Value(bagKey{}).(*bag); ok {
		if attrs := b.all(); len(attrs) > 0 {
			r = r.Clone()
			r.AddAttrs(attrs...)
		}
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler.
func (h Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Handler{Handler: h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper around the derived handler.
func (h Handler) WithGroup(name string) slog.Handler {
	return Handler{Handler: h.Handler.WithGroup(name)}
}

type bagKey struct{}

// bag is the attributes of one request or job. It is shared by every
// context derived from the one With made, so attributes a handler adds
// late (the id of the hold it created) still reach the request's own line,
// which is logged by middleware further out.
type bag struct {
	parent *bag
	mu     sync.Mutex
	attrs  []slog.Attr
}

func (b *bag) all() []slog.Attr {
	var out []slog.Attr
	if b.parent != nil {
		out = b.parent.all()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(out, b.attrs...)
}

// With returns a context whose log records carry attrs, after those of
// ctx's own bag if it has one.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	parent, _ := ctx.Value(bagKey{}).(*bag)
	return context.WithValue(ctx, bagKey{}, &bag{parent: parent, attrs: attrs})
}

// Add adds attrs to the bag With put in ctx, so every record logged with a
// context sharing that bag carries them, including records logged later by
// code further out. Without a bag it does nothing.
func Add(ctx context.Context, attrs ...slog.Attr) {
	b, ok := ctx.Value(bagKey{}).(*bag)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range attrs {
		replaced := false
		for i := range b.attrs {
			if b.attrs[i].Key == a.Key {
				b.attrs[i], replaced = a, true
				break
			}
		}
		if !replaced {
			b.attrs = append(b.attrs, a)
		}
	}
}
