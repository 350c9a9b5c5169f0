// Package buildinfo says what a paddock binary is: its version, the commit it was built from,
// the Go toolchain, and its flavour — whether it carries the dev environment (`paddock dev`)
// or only what runs in a cluster (the image's build, tag nodev). `paddock version` prints
// these facts; a build-info metric carries the same ones.
//
// The Makefile and the Dockerfile set the version and commit with
// -ldflags "-X github.com/paddock-dev/paddock/internal/buildinfo.version=… -X ….commit=…". A
// plain `go build` leaves them unset, and Get falls back on what the Go toolchain stamped into
// the binary (the module version, vcs.revision and vcs.modified).
//
// No I/O but reading the binary's own build information; no paddock imports.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time (-X); empty when built without the Makefile.
var (
	version string
	commit  string
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release version ("0.1.0") or, without one set at link time, the module
	// version the toolchain stamped ("v0.0.0-20260301120000-3fcdfae1b2c4+dirty", or
	// "(devel)").
	Version string
	// Commit is the revision built from, with "-modified" when the work tree had uncommitted
	// changes; "unknown" when neither the link flags nor the toolchain recorded one.
	Commit string
	// GoVersion is the toolchain that built it ("go1.26.8").
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
	// Flavour is "dev" (with the dev environment) or "slim" (without it: tag nodev).
	Flavour string
	// Tags are the build tags the binary was built with, comma-separated ("" for none).
	Tags string
}

// Get returns this binary's build facts.
func Get() Info {
	info := Info{
		Version: version, Commit: commit, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Flavour: Flavour,
	}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		fromToolchain(&info, bi)
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// fromToolchain fills what the link flags left empty from the build information the Go
// toolchain embeds, and reads the build tags.
func fromToolchain(info *Info, bi *debug.BuildInfo) {
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	var revision string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "-tags":
			info.Tags = s.Value
		}
	}
	if info.Commit == "" && revision != "" {
		info.Commit = revision
		if modified {
			info.Commit += "-modified"
		}
	}
}

// String is the `paddock version` text: one "key: value" line per fact.
func (i Info) String() string {
	var b strings.Builder
	for _, kv := range [][2]string{
		{"version", i.Version}, {"commit", i.Commit}, {"go", i.GoVersion},
		{"platform", i.Platform}, {"flavour", i.Flavour}, {"tags", i.Tags},
	} {
		b.WriteString(kv[0] + ": " + kv[1] + "\n")
	}
	return b.String()
}
