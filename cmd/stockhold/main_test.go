package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// childEnv, when set, makes the test binary run stockhold instead of the
// tests: startInstance re-executes it as a real `stockhold serve` process,
// which a test can kill -9.
const childEnv = "STOCKHOLD_TEST_CHILD"

func TestMain(m *testing.M) {
	if cmd := os.Getenv(childEnv); cmd != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, []string{cmd}, os.Getenv, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
