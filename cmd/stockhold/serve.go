package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime/debug"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
)

// serve runs the HTTP API and the workers until ctx ends.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	check := fs.Bool("check-addr", false, "only check that the listen address (STOCKHOLD_ADDR) is free to serve on, and exit: 0 when it is, 1 naming why not")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments (got %q)", errUsage, fs.Arg(0))
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	if *check {
		return checkAddr(cfg.Addr, stderr)
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

// checkAddr binds addr, as serve would, and lets go of it at once: what
// make run does before it rotates the dev keys, so that a run that cannot
// serve (another instance has the port) never rotates the keys the
// running one answers to.
func checkAddr(addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "stockhold: cannot serve on %s: %v\n", addr, err)
		return exitError(1)
	}
	return ln.Close()
}
