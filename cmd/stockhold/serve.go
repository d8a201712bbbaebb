package main

import (
	"context"
	"io"
	"runtime/debug"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
)

// serve runs the HTTP API and the workers until ctx ends.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := noFlags("serve", args, stdout); err != nil {
		return err
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	tuneGC(getenv)
	log := newLogger(cfg, stderr)
	for _, u := range config.UnknownOf(envNames()) {
		log.Warn("unknown setting, ignored: "+unknownText(u), "name", u.Name, "did_you_mean", u.Suggestion)
	}
	pool, err := app.OpenWaiting(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	a, err := app.New(cfg, pool, log)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx)
}

// Garbage collector settings of serve, unless GOGC or GOMEMLIMIT say
// otherwise. Under load the live heap is about 6 MB and Go's default
// (GOGC=100) collected it about ten times a second; profiled, marking and
// sweeping took a tenth of the server's CPU, on a machine whose two cores
// it shares with PostgreSQL. A heap allowed to grow to five times what is
// live collects a fifth as often, and the soft limit makes the collector
// work harder instead of letting a burst (a thousand connections at once)
// grow the heap past it.
const (
	gcPercent   = 400
	memoryLimit = 100 << 20
)

func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
