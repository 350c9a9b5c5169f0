package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestLinkFlagsWinAndTheToolchainFillsTheRest(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main: debug.Module{Version: "v0.0.0-20260301120000-3fcdfae1b2c4+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "-tags", Value: "nodev"}, {Key: "vcs.revision", Value: "3fcdfae1b2c4"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		rule            string
		version, commit string // set at link time
		bi              *debug.BuildInfo
		want            Info
	}{
		{"a plain go build reports the toolchain's module version and revision, modified",
			"", "", stamped, Info{Version: "v0.0.0-20260301120000-3fcdfae1b2c4+dirty", Commit: "3fcdfae1b2c4-modified", Tags: "nodev"}},
		{"the Makefile's version and commit win over the toolchain's",
			"0.1.0", "abc", stamped, Info{Version: "0.1.0", Commit: "abc", Tags: "nodev"}},
		{"a clean work tree is not modified",
			"", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "r1"}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "(devel)", Commit: "r1"}},
		{"no VCS information (-buildvcs=false) leaves the commit to Get's unknown",
			"", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{Version: "(devel)"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := Info{Version: tc.version, Commit: tc.commit}
			fromToolchain(&got, tc.bi)
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGetNamesEveryFactEvenWithoutLinkFlags(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" || !strings.HasPrefix(i.GoVersion, "go") || i.Platform == "" || i.Flavour != Flavour {
		t.Fatalf("Get() = %+v: every fact must be named", i)
	}
	for _, key := range []string{"version: ", "commit: ", "go: ", "platform: ", "flavour: ", "tags: "} {
		if !strings.Contains(i.String(), "\n"+key) && !strings.HasPrefix(i.String(), key) {
			t.Errorf("paddock version lacks %q:\n%s", key, i)
		}
	}
}
