// Package debian finds a program the tests need and, when it is missing and
// the process runs as root (as CI does), installs the Debian package that
// ships it with apt-get, the way cmd/devdb installs PostgreSQL: the project
// itself brings what its tests need to a fresh machine.
package debian

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// ErrNotRoot means the program is missing and cannot be installed by this
// process; the caller may skip what needs it.
var ErrNotRoot = errors.New("not root, so it cannot be installed here")

// lockFile serialises this project's installs: test binaries run in
// parallel, and apt-get refuses to run twice at once.
const lockFile = "/tmp/stockhold-apt.lock"

// Ensure returns the path of program, installing package pkg first when it
// is missing.
func Ensure(program, pkg string) (string, error) {
	if path, err := exec.LookPath(program); err == nil {
		return path, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%s not found (apt-get install -y %s): %w", program, pkg, ErrNotRoot)
	}
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lockFile, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if path, err := exec.LookPath(program); err == nil {
		return path, nil // installed while we waited
	}
	for _, args := range [][]string{
		{"-o", "DPkg::Lock::Timeout=600", "update"},
		{"-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", pkg},
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %v: %w\n%s", args, err, out)
		}
	}
	return exec.LookPath(program)
}
