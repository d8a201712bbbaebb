package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/config"
)

const unitFile = "stockhold.service"

// TestSystemdUnit checks deploy/stockhold.service: it reads its settings
// from the environment file, gives a SIGTERM the time stockhold's own
// drain takes, and passes systemd's checks (systemd-analyze verify, and
// an exposure of at most 2.0 out of 10 by systemd-analyze security).
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	unit := string(raw)
	require.Contains(t, unit, "\nEnvironmentFile=/etc/stockhold/stockhold.env\n")
	require.Contains(t, unit, "\nExecStart=/usr/local/bin/stockhold serve\n")
	// A local PostgreSQL starts first (serve also waits for it).
	require.Contains(t, unit, "\nWants=network-online.target postgresql.service\n")
	require.Contains(t, unit, "\nAfter=network-online.target postgresql.service\n")

	stop := regexp.MustCompile(`\nTimeoutStopSec=(\d+)s\n`).FindStringSubmatch(unit)
	require.NotNil(t, stop, "TimeoutStopSec in seconds")
	secs, err := strconv.Atoi(stop[1])
	require.NoError(t, err)
	var drain time.Duration
	for _, name := range []string{"STOCKHOLD_DRAIN_DELAY", "STOCKHOLD_SHUTDOWN_TIMEOUT"} {
		d, err := time.ParseDuration(config.Lookup(name).Default)
		require.NoError(t, err)
		drain += d
	}
	jobs, err := time.ParseDuration(config.Lookup("STOCKHOLD_JOB_STOP_TIMEOUT").Default)
	require.NoError(t, err)
	require.Greater(t, time.Duration(secs)*time.Second, max(drain, jobs),
		"systemd must not kill stockhold before its own drain ends")

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	// Verify a copy whose binary exists (this test's) and whose
	// environment file may be missing, as neither is installed here.
	self, err := os.Executable()
	require.NoError(t, err)
	copyUnit := filepath.Join(t.TempDir(), unitFile)
	local := strings.NewReplacer("ExecStart=/usr/local/bin/stockhold", "ExecStart="+self,
		"EnvironmentFile=/etc/", "EnvironmentFile=-/etc/").Replace(unit)
	require.NoError(t, os.WriteFile(copyUnit, []byte(local), 0o644))
	out, err := exec.Command(analyze, "verify", copyUnit).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify: %s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has something to say")

	out, err = exec.Command(analyze, "security", "--offline=true", copyUnit).CombinedOutput()
	require.NoError(t, err, "systemd-analyze security: %s", out)
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	exposure, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	require.LessOrEqual(t, exposure, 2.0, "the unit's sandboxing got weaker:\n%s", out)
}
