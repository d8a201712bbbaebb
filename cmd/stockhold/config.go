package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/stockhold/stockhold/app/buildinfo"
	"github.com/stockhold/stockhold/app/config"
)

// configCmd prints every setting: the value this process would use, its
// default and its meaning, secrets masked; the STOCKHOLD_ variables that
// are no setting (ignored); then whether the values are valid. With
// --env-file it reads the settings from that file alone, as systemd's
// EnvironmentFile= does, and says what it read.
func configCmd(args []string, getenv func(string) string, names []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	file := fs.String("env-file", "", "read the settings from this `file` alone, as systemd's EnvironmentFile= does, instead of the environment")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: config takes no arguments (got %q)", errUsage, fs.Arg(0))
	}
	if *file != "" {
		raw, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		vars, problems := config.ParseEnvFile(string(raw))
		read := map[string]string{}
		names = names[:0:0]
		fmt.Fprintf(stdout, "%s: %d variables, as systemd's EnvironmentFile= reads them:\n", *file, len(vars))
		for _, v := range vars {
			read[v.Name] = v.Value
			names = append(names, v.Name)
			shown := v.Value
			for _, s := range config.Settings {
				if s.Name == v.Name {
					shown = s.Mask(v.Value)
				}
			}
			fmt.Fprintf(stdout, "  line %d: %s=%s\n", v.Line, v.Name, shown)
		}
		for _, p := range problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
		fmt.Fprintln(stdout)
		getenv = func(k string) string { return read[k] }
	}
	for _, s := range config.Settings {
		v, set := s.Value(getenv)
		shown := s.Mask(v)
		switch {
		case v == "":
			shown = "(not set)"
		case !set:
			shown += " (default)"
		}
		fmt.Fprintf(stdout, "%s=%s\n", s.Name, shown)
		fmt.Fprintf(stdout, "    %s (default: %s)\n", stripTicks(s.Meaning), stripTicks(s.DefaultDoc()))
	}
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return getenv(n) == "" }) // set, not empty
	if unknown := config.UnknownOf(names); len(unknown) > 0 {
		fmt.Fprintln(stdout, "\nunknown, ignored:")
		for _, u := range unknown {
			fmt.Fprintf(stdout, "%s\n", unknownText(u))
		}
	}
	if _, err := config.Load(getenv); err != nil {
		fmt.Fprintf(stdout, "\ninvalid:\n%v\n", err)
		return exitError(1)
	}
	return nil
}

// unknownText says which variable is no setting, and what it may mean.
func unknownText(u config.Unknown) string {
	if u.Suggestion != "" {
		return fmt.Sprintf("%s is not a setting: did you mean %s?", u.Name, u.Suggestion)
	}
	return fmt.Sprintf("%s is not a setting (stockhold config lists them)", u.Name)
}

// envNames is the names of the process's environment variables.
func envNames() []string {
	var names []string
	for _, kv := range os.Environ() {
		if name, _, ok := strings.Cut(kv, "="); ok {
			names = append(names, name)
		}
	}
	return names
}

func stripTicks(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '`' {
			out = append(out, s[i])
		}
	}
	return string(out)
}

// version prints the release version (buildinfo.Version, the newest
// version in CHANGELOG.md) on its first line, then the VCS revision and
// the Go version from the build information Go stamps into the binary.
func version(args []string, stdout io.Writer) error {
	if err := noFlags("version", args, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stockhold %s\n", buildinfo.Version)
	b, ok := buildinfo.Read()
	if !ok {
		fmt.Fprintln(stdout, "no build information (built without module support)")
		return nil
	}
	fmt.Fprintf(stdout, "module %s %s\n", b.Module, b.ModuleVersion)
	if b.Revision != "" {
		modified := ""
		if b.Modified {
			modified = ", with uncommitted changes"
		}
		fmt.Fprintf(stdout, "revision %s (%s, committed %s%s)\n", b.Revision, b.VCS, b.Time, modified)
	} else {
		fmt.Fprintln(stdout, "revision unknown (built without VCS information: outside a checkout, or with -buildvcs=false)")
	}
	fmt.Fprintf(stdout, "built with %s for %s/%s\n", b.GoVersion, b.OS, b.Arch)
	return nil
}
