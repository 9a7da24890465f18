package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/claimstream/claimstream", Version: "v0.3.1"},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}},
	}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		ver, rev string
		want     Info
	}{
		{"stamped by the toolchain", stamped, "", "", Info{Version: "v0.3.1", Revision: "0123abcd-dirty", GoVersion: "go1.26.0"}},
		{"ldflags override both", stamped, "v1.0.0", "feedbeef", Info{Version: "v1.0.0", Revision: "feedbeef", GoVersion: "go1.26.0"}},
		{"a work tree build without VCS", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "", "", Info{Version: "(devel)", Revision: "unknown", GoVersion: "go1.26.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.bi, tc.ver, tc.rev); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := fromBuildInfo(nil, "", ""); got.Version != "(devel)" || got.Revision != "unknown" || got.GoVersion == "" {
		t.Fatalf("no build info: %+v", got)
	}
}
