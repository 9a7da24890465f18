// Package golden compares a test's output with a file under testdata, and
// rewrites the file when the test binary runs with -update.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check compares got with the file at path; with -update it writes got
// there first. rerun says how to update the files, for the failure message.
func Check(t testing.TB, path, got, rerun string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s -update)", err, rerun)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", filepath.Base(path), got, want)
	}
}
