// Package buildinfo says which build of claimstream is running: the
// version `claimstream version` prints, claimstream_build_info reports and
// the traces carry as service.version, so the three always agree.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set at link time to override what the Go toolchain stamped (a release
// build without a VCS checkout, the Dockerfile):
//
//	go build -ldflags "-X github.com/claimstream/claimstream/internal/buildinfo.version=v1.2.3 -X github.com/claimstream/claimstream/internal/buildinfo.revision=abc123"
var (
	version  string
	revision string
)

// Info is one build's identity.
type Info struct {
	// Version is the main module's version ("v1.2.3", a pseudo-version, or
	// "(devel)" for a build from a work tree), unless overridden.
	Version string
	// Revision is the VCS commit the binary was built from ("unknown" when
	// the toolchain stamped none), with "-dirty" when the tree had changes.
	Revision  string
	GoVersion string
}

// Get reads the build's identity once from the toolchain's stamp and the
// link-time overrides.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, revision)
}

// fromBuildInfo is Get over an explicit stamp (tests).
func fromBuildInfo(bi *debug.BuildInfo, versionOverride, revisionOverride string) Info {
	in := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	if bi != nil {
		if v := bi.Main.Version; v != "" {
			in.Version = v
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		var rev string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			in.Revision = rev
		}
	}
	if versionOverride != "" {
		in.Version = versionOverride
	}
	if revisionOverride != "" {
		in.Revision = revisionOverride
	}
	return in
}
