package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/stockhold/stockhold/app/config"
)

// configCmd prints every setting: the value this process would use, its
// default and its meaning, secrets masked; then whether they are valid.
func configCmd(args []string, getenv func(string) string, stdout io.Writer) error {
	if err := noFlags("config", args, stdout); err != nil {
		return err
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
	if _, err := config.Load(getenv); err != nil {
		fmt.Fprintf(stdout, "\ninvalid:\n%v\n", err)
		return exitError(1)
	}
	return nil
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

// version prints the module version, the VCS revision and the Go version,
// from the build information Go stamps into the binary.
func version(args []string, stdout io.Writer) error {
	if err := noFlags("version", args, stdout); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "stockhold: no build information (built without module support)")
		return nil
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	fmt.Fprintf(stdout, "stockhold %s (module %s)\n", info.Main.Version, info.Main.Path)
	if rev := settings["vcs.revision"]; rev != "" {
		modified := ""
		if settings["vcs.modified"] == "true" {
			modified = ", with uncommitted changes"
		}
		fmt.Fprintf(stdout, "revision %s (%s, committed %s%s)\n", rev, settings["vcs"], settings["vcs.time"], modified)
	} else {
		fmt.Fprintln(stdout, "revision unknown (built without VCS information: outside a checkout, or with -buildvcs=false)")
	}
	fmt.Fprintf(stdout, "built with %s for %s/%s\n", info.GoVersion, settings["GOOS"], settings["GOARCH"])
	return nil
}
