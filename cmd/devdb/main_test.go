package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheServerDoesNotInheritALock: a descriptor devdb inherited open
// across exec (a lock file flock(1) holds for the command that ran it) is
// not open in the programs devdb starts, so the cluster, which outlives
// devdb, does not keep the lock taken.
func TestTheServerDoesNotInheritALock(t *testing.T) {
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "held.lock"), syscall.O_CREAT|syscall.O_RDONLY, 0o600)
	require.NoError(t, err)
	defer syscall.Close(fd)
	open := func() []string {
		out, err := exec.Command("sh", "-c", "ls /proc/$$/fd").Output()
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	require.Contains(t, open(), strconv.Itoa(fd), "opened without close-on-exec, as an inherited descriptor is")

	closeInheritedOnExec()
	require.NotContains(t, open(), strconv.Itoa(fd))
	_, err = os.Stat("/proc/self/fd/" + strconv.Itoa(fd))
	require.NoError(t, err, "still open in devdb itself")
}

// TestSharedBuffersFromTheEnvironment: DEVDB_SHARED_BUFFERS sets the
// server's shared_buffers when it is a size, and anything else falls back
// to 256MB rather than reach the server's command line.
func TestSharedBuffersFromTheEnvironment(t *testing.T) {
	for v, want := range map[string]string{
		"": "256MB", "6GB": "6GB", "512MB": "512MB", "131072": "131072", " 1GB ": "1GB",
		"6 GB": "256MB", "lots": "256MB", "1GB -c fsync=off": "256MB", "GB": "256MB",
	} {
		t.Setenv("DEVDB_SHARED_BUFFERS", v)
		require.Equal(t, want, sharedBuffers(), "DEVDB_SHARED_BUFFERS=%q", v)
	}
}
