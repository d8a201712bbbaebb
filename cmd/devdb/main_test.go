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
