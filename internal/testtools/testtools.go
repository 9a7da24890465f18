// Package testtools finds the programs a test drives (protocol servers and
// their reference clients) and decides what their absence means.
package testtools

import (
	"os"
	"os/exec"
	"testing"
)

// Require returns the path of each named program. One missing skips the
// test on a machine that has only Go, or fails it when the environment
// variable env is "1" (CI sets it: a missing install is a red run, not a
// silent skip). debs names the Debian packages that provide them.
func Require(t testing.TB, env, debs string, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv(env) == "1" {
				t.Fatalf("%s not found and %s=1: %v (Debian packages: %s)", name, env, err, debs)
			}
			t.Skipf("%s not found (Debian packages: %s; %s=1 fails instead): %v", name, debs, env, err)
		}
		paths[i] = p
	}
	return paths
}
