package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/internal/debian"
	"github.com/stockhold/stockhold/internal/drill"
	"github.com/stockhold/stockhold/internal/formation"
)

// logWriter passes each line written to it to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestFailoverLosesNothing is `make drill-failover` made short: a
// pg_auto_failover formation on this machine (a monitor and two nodes with
// synchronous replication), two real `stockhold serve` processes on its
// multi-host URL under mixed load from eight clients, a rollback in
// progress and a webhook receiver; kill -9 of the primary's postmaster;
// the load goes on through the standby's promotion. Every acknowledged
// hold, confirm, release and partial release is on the new primary, the
// books balance, no hold was released twice, no request answered 500, and
// the rollback, the webhook feed, expiry and the leader loops carried on
// there. It installs postgresql-15-auto-failover when missing and running
// as root (CI); elsewhere, without it, it is skipped.
func TestFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	if err := formation.Install(); errors.Is(err, debian.ErrNotRoot) {
		t.Skipf("pg_auto_failover is not installed and cannot be here: %v", err)
	} else {
		require.NoError(t, err)
	}
	checkout, err := drill.Checkout()
	require.NoError(t, err)
	logs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := drill.Run(ctx, drill.Options{
		Formation: formation.Options{Name: "failovertest", Checkout: checkout},
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=serve")
			return cmd
		},
		LogDir:        logs,
		Clients:       8,
		Warmup:        5 * time.Second,
		AfterFailover: 5 * time.Second,
		RollbackHolds: 1000,
		Log:           logWriter{t},
	})
	if err != nil || len(res.Problems) > 0 {
		files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("--- %s (the end):\n%s", filepath.Base(f), b)
		}
	}
	require.NoError(t, err)
	t.Log(res.Line())
	require.Empty(t, res.Problems)
	require.Zero(t, res.Lost)
	require.Positive(t, res.Acknowledged)
}
