package debian

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnsureTakesOnlyWhatNeedsLists: a package, a program or a file the
// tests would install that Needs does not list is refused before anything
// is looked up or installed, so make test's check cannot miss it.
func TestEnsureTakesOnlyWhatNeedsLists(t *testing.T) {
	_, err := Ensure("sl", "sl")
	require.ErrorContains(t, err, "sl is not in debian.Needs")
	_, err = Ensure("chromedriver", "chromium")
	require.ErrorContains(t, err, "does not list chromedriver as a program of chromium")
	require.ErrorContains(t, EnsureFiles("postgresql-15-auto-failover", "/usr/bin/pg_autoctl", "/etc/shadow"),
		"does not list /etc/shadow as a file of postgresql-15-auto-failover")
	path, err := Ensure("sh", "sh")
	require.ErrorContains(t, err, "not in debian.Needs", "even a program that is there: %s", path)
	for _, n := range Needs {
		require.NotEmpty(t, n.For, n.Package)
		require.NotEmpty(t, append(n.Programs, n.Files...), "%s: how to tell it is installed", n.Package)
	}
}

// TestSkipInstalls: with TEST_DEPS=skip a missing package is not
// installed, even as root; the caller is told to skip (ErrNotRoot).
func TestSkipInstalls(t *testing.T) {
	t.Setenv("TEST_DEPS", "skip")
	saved := Needs
	t.Cleanup(func() { Needs = saved })
	Needs = append(slices.Clone(Needs), Need{Package: "stockhold-no-such-package", Programs: []string{"stockhold-no-such-program"}, For: "this test"})
	_, err := Ensure("stockhold-no-such-program", "stockhold-no-such-package")
	require.ErrorIs(t, err, ErrNotRoot)
	require.ErrorContains(t, err, "stockhold-no-such-program not found and ")
}
