// Package debian finds a program the tests need and, when it is missing and
// the process runs as root (as CI does), installs the Debian package that
// ships it with apt-get, the way cmd/devdb installs PostgreSQL: the project
// itself brings what its tests need to a fresh machine. Needs lists every
// such package; `make test` checks them first (cmd/testdeps), says what it
// installs, and where it cannot install them stops with the command to run.
package debian

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// Need is a Debian package the tests need, and how to tell it is there.
type Need struct {
	// Package is the Debian package.
	Package string
	// Programs are on PATH once it is installed.
	Programs []string
	// Files exist once it is installed.
	Files []string
	// For says which tests need it.
	For string
}

// Needs is every package the tests install with Ensure or EnsureFiles,
// which refuse any other: a test that needs a new one adds it here, so
// that `make test` says it installs it.
var Needs = []Need{
	{Package: "curl", Programs: []string{"curl"}, For: "the README's walk-through"},
	{Package: "jq", Programs: []string{"jq"}, For: "the README's walk-through"},
	{Package: "prometheus", Programs: []string{"promtool"}, For: "promtool, for the Prometheus rules' tests"},
	{Package: "chromium", Programs: []string{"chromium"}, For: "the browser tests of the console and the API reference"},
	{Package: "pgbouncer", Programs: []string{"pgbouncer"}, For: "the test through PgBouncer"},
	{Package: "postgresql-15-auto-failover", For: "pg_autoctl, for the failover test",
		Files: []string{"/usr/bin/pg_autoctl", "/usr/lib/postgresql/15/lib/pgautofailover.so", "/usr/lib/postgresql/15/bin/pg_ctl"}},
}

// Missing reports whether some of what n brings is not there.
func (n Need) Missing() bool {
	for _, p := range n.Programs {
		if _, err := exec.LookPath(p); err != nil {
			return true
		}
	}
	for _, f := range n.Files {
		if _, err := os.Stat(f); err != nil {
			return true
		}
	}
	return false
}

// InstallCommand is the command that installs packages, for a person.
func InstallCommand(packages []string) string {
	return "sudo apt-get install -y " + strings.Join(packages, " ")
}

// Install installs packages with apt-get, in one go, under the project's
// lock; it must run as root.
func Install(packages []string) error {
	if len(packages) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("this is not root (%s), %w", InstallCommand(packages), ErrNotRoot)
	}
	return withLock(func() error { return aptGet(packages...) })
}

// listed returns the Need of pkg, or an error naming where to list it.
func listed(pkg string) (Need, error) {
	i := slices.IndexFunc(Needs, func(n Need) bool { return n.Package == pkg })
	if i < 0 {
		return Need{}, fmt.Errorf("debian package %s is not in debian.Needs: add it there, so that make test says it installs it", pkg)
	}
	return Needs[i], nil
}

// ErrNotRoot means the program is missing and cannot be installed by this
// process (not root, or TEST_DEPS=skip); the caller may skip what needs it.
var ErrNotRoot = errors.New("so it cannot be installed here")

// lockFile serialises this project's installs: test binaries run in
// parallel, and apt-get refuses to run twice at once.
const lockFile = "/tmp/stockhold-apt.lock"

// Ensure returns the path of program, installing package pkg first when it
// is missing.
func Ensure(program, pkg string) (string, error) {
	if n, err := listed(pkg); err != nil {
		return "", err
	} else if !slices.Contains(n.Programs, program) {
		return "", fmt.Errorf("debian.Needs does not list %s as a program of %s: add it there", program, pkg)
	}
	found := func() bool { _, err := exec.LookPath(program); return err == nil }
	if err := ensure(found, program+" not found", pkg); err != nil {
		return "", err
	}
	return exec.LookPath(program)
}

// EnsureFiles installs package pkg when any of paths is missing, and
// fails when one is still missing afterwards.
func EnsureFiles(pkg string, paths ...string) error {
	n, err := listed(pkg)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if !slices.Contains(n.Files, p) {
			return fmt.Errorf("debian.Needs does not list %s as a file of %s: add it there", p, pkg)
		}
	}
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
		return fmt.Errorf("%s and this is not root (apt-get install -y %s), %w", what, pkg, ErrNotRoot)
	}
	if os.Getenv("TEST_DEPS") == "skip" {
		return fmt.Errorf("%s and TEST_DEPS=skip says not to install %s, %w", what, pkg, ErrNotRoot)
	}
	return withLock(func() error {
		if found() {
			return nil // installed while we waited
		}
		fmt.Fprintf(os.Stderr, "debian: %s: installing %s with apt-get\n", what, pkg)
		return aptGet(pkg)
	})
}

// withLock runs f under the project's install lock.
func withLock(f func() error) error {
	lock, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lockFile, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	return f()
}

// aptGet runs apt-get update, then installs packages.
func aptGet(packages ...string) error {
	for _, args := range [][]string{
		{"-o", "DPkg::Lock::Timeout=600", "update"},
		append([]string{"-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends"}, packages...),
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
