// Package buildinfo says what a stockhold binary is: its release version
// (the newest released section of CHANGELOG.md) and what Go stamped into
// it when it was built (the VCS revision, the Go version).
package buildinfo

import "runtime/debug"

// Version is stockhold's release version, in semantic versioning: the
// newest version CHANGELOG.md has a section for (TestChangelog in
// internal/readme holds the two together). A release raises it in the same
// commit that turns the changelog's Unreleased section into the version's.
const Version = "0.1.0"

// Build is what Go stamped into the binary.
type Build struct {
	// Module is the main module's path, ModuleVersion its version as Go
	// knows it ("(devel)" for a build from a checkout).
	Module, ModuleVersion string
	// Revision is the VCS revision the binary was built from, "" when Go
	// stamped none (a build outside a checkout, or with -buildvcs=false);
	// VCS names the system, Time the revision's commit time, and Modified
	// says the checkout had uncommitted changes.
	Revision, VCS, Time string
	Modified            bool
	// GoVersion, OS and Arch are the toolchain and the target.
	GoVersion, OS, Arch string
}

// Read returns the binary's build information, and false when it has
// none (a binary built without module support).
func Read() (Build, bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{}, false
	}
	b := Build{Module: info.Main.Path, ModuleVersion: info.Main.Version, GoVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs":
			b.VCS = s.Value
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "GOOS":
			b.OS = s.Value
		case "GOARCH":
			b.Arch = s.Value
		}
	}
	return b, true
}
