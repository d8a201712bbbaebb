package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/internal/debian"
)

// TestTestdeps: with everything installed it says nothing; as root it says
// in one line what it installs before it installs it; where it cannot (not
// root, apt-get failing) it stops with the packages, what needs each, and
// the command that installs them.
func TestTestdeps(t *testing.T) {
	there := debian.Need{Package: "sh-package", Programs: []string{"sh"}, For: "a shell"}
	gone := debian.Need{Package: "no-such-package", Programs: []string{"stockhold-no-such-program"}, For: "the walk-through"}
	gone2 := debian.Need{Package: "other-package", Files: []string{"/no/such/file"}, For: "the failover test"}
	never := func([]string) error { t.Error("install called"); return nil }

	var out, errs bytes.Buffer
	require.Equal(t, 0, run(&out, &errs, []debian.Need{there}, true, never))
	require.Empty(t, out.String()+errs.String(), "nothing to say when everything is there")

	var installed []string
	code := run(&out, &errs, []debian.Need{there, gone, gone2}, true, func(pkgs []string) error {
		require.Equal(t, "make test: installing with apt-get what the tests need: no-such-package (the walk-through), "+
			"other-package (the failover test)\n", out.String(), "said before it installs")
		installed = pkgs
		return nil
	})
	require.Equal(t, 0, code)
	require.Equal(t, []string{"no-such-package", "other-package"}, installed)
	require.Empty(t, errs.String())

	for name, c := range map[string]struct {
		root    bool
		install func([]string) error
		says    string
	}{
		"not root":   {false, never, "not running as root"},
		"no network": {true, func([]string) error { return errors.New("Temporary failure resolving") }, "apt-get said: Temporary failure resolving"},
	} {
		out.Reset()
		errs.Reset()
		require.Equal(t, 2, run(&out, &errs, []debian.Need{there, gone, gone2}, c.root, c.install), name)
		msg := errs.String()
		for _, want := range []string{c.says, "  no-such-package: the walk-through\n", "  other-package: the failover test\n",
			"  sudo apt-get install -y no-such-package other-package\n", "TEST_DEPS=skip"} {
			require.Contains(t, msg, want, name)
		}
		require.NotContains(t, msg, "sh-package", "%s: only what is missing", name)
		require.Equal(t, c.root, strings.Contains(out.String(), "installing"), "%s: says it installs only when it tries", name)
	}
}
