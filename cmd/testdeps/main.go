// Command testdeps makes sure what the tests need from Debian is installed
// before `make test` runs them: the packages of debian.Needs that are
// missing are installed with apt-get when it runs as root, after one line
// saying so; where it cannot install them (not root, no network) it names
// them and the command that installs them, and exits 2.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stockhold/stockhold/internal/debian"
)

func main() {
	os.Exit(run(os.Stdout, os.Stderr, debian.Needs, os.Geteuid() == 0, debian.Install))
}

// run checks needs, installing what is missing with install when root.
func run(stdout, stderr io.Writer, needs []debian.Need, root bool, install func([]string) error) int {
	var missing []debian.Need
	var packages, what []string
	for _, n := range needs {
		if n.Missing() {
			missing = append(missing, n)
			packages = append(packages, n.Package)
			what = append(what, n.Package+" ("+n.For+")")
		}
	}
	if len(missing) == 0 {
		return 0
	}
	var err error
	if root {
		fmt.Fprintf(stdout, "make test: installing with apt-get what the tests need: %s\n", strings.Join(what, ", "))
		if err = install(packages); err == nil {
			return 0
		}
	}
	why := "it is not running as root, so it cannot install them"
	if err != nil {
		why = "it could not install them"
	}
	fmt.Fprintf(stderr, "make test needs these Debian packages, and %s:\n", why)
	for _, n := range missing {
		fmt.Fprintf(stderr, "  %s: %s\n", n.Package, n.For)
	}
	fmt.Fprintf(stderr, "Install them with\n  %s\nand run make test again; or run make test TEST_DEPS=skip to skip the tests that need them.\n",
		debian.InstallCommand(packages))
	if err != nil {
		fmt.Fprintf(stderr, "apt-get said: %v\n", err)
	}
	return 2
}
