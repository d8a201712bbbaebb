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
	found := func() bool { _, err := exec.LookPath(program); return err == nil }
	if err := ensure(found, program+" not found", pkg); err != nil {
		return "", err
	}
	return exec.LookPath(program)
}

// EnsureFiles installs package pkg when any of paths is missing, and
// fails when one is still missing afterwards.
func EnsureFiles(pkg string, paths ...string) error {
	missing := func() string {
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return p
			}
		}
		return ""
	}
	if err := ensure(func() bool { return missing() == "" }, "no "+missing(), pkg); err != nil {
		return err
	}
	if p := missing(); p != "" {
		return fmt.Errorf("%s installed, but there is no %s", pkg, p)
	}
	return nil
}

// ensure runs apt-get update and install pkg, under the project's lock,
// unless found reports that what pkg brings is there.
func ensure(found func() bool, what, pkg string) error {
	if found() {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s (apt-get install -y %s): %w", what, pkg, ErrNotRoot)
	}
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lockFile, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if found() {
		return nil // installed while we waited
	}
	for _, args := range [][]string{
		{"-o", "DPkg::Lock::Timeout=600", "update"},
		{"-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", pkg},
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %v: %w\n%s", args, err, out)
		}
	}
	return nil
}
