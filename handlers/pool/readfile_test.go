package pool

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLoadRefusesWhatIsNotASmallRegularFile: a directory, a FIFO (no
// writer: the read would block for ever), /dev/zero (it never ends) and a
// file past MaxFileBytes are refused at once, saying what they are; a
// regular file within the limit loads.
func TestLoadRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]string{
		dir:           "not a regular file (a directory)",
		fifo:          "not a regular file (a named pipe)",
		"/dev/zero":   "not a regular file (a character device)",
		big:           "8388609 bytes, more than the limit of 8388608 (8 MiB)",
		dir + "/nope": "no such file",
	} {
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error saying %q", path, err, want)
		}
	}
	good := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(good, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good); err != nil {
		t.Fatalf("a pool file: %v", err)
	}
}

// TestParseRefusesWhatTheAPIServerWould: a group template's annotations
// past the API server's 256 KiB, and a lifecycle pod spec too large for
// one event of the log, are refused at their line; within the limits the
// file parses.
func TestParseRefusesWhatTheAPIServerWould(t *testing.T) {
	withAnnotation := func(n int) string {
		return edit(base, "maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 15m\n    template:\n      annotations: {example.com/note: \""+strings.Repeat("a", n)+"\"}")
	}
	if _, err := Parse("pool.yaml", []byte(withAnnotation(200<<10))); err != nil {
		t.Fatalf("200 KiB of annotations: %v", err)
	}
	_, err := Parse("pool.yaml", []byte(withAnnotation(2<<20)))
	if err == nil || !strings.Contains(err.Error(), "pool.yaml:6: groups[0].template.annotations: annotations of 2097168 bytes (keys and values): the API server's limit is 262144 (256 KiB)") {
		t.Fatalf("2 MiB of annotations: %v", err)
	}
	bigSpec := edit(base, "command: [/scripts/wake.sh]", "command: [/scripts/wake.sh, \""+strings.Repeat("x", 300<<10)+"\"]")
	_, err = Parse("pool.yaml", []byte(bigSpec))
	if err == nil || !strings.Contains(err.Error(), "slots[0].startup.podSpec: a pod spec of") || !strings.Contains(err.Error(), "at most 262144 (256 KiB)") {
		t.Fatalf("a 300 KiB pod spec: %v", err)
	}
}
