package serve

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// The process's own file pages (RssFile) fall when its executable's pages
// are dropped, and the code it runs after comes back from the file intact.
func TestDropExecutableCodePagesLowersTheResidentFilePages(t *testing.T) {
	before := rssFileKiB(t)
	mappings, err := dropExecutableCodePages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if len(mappings) == 0 {
		t.Fatal("no mapping of the executable found")
	}
	var resident int64
	for _, m := range mappings {
		resident += m.rss
	}
	t.Logf("RssFile %.0f to %.0f KiB; %d mappings held %d KiB", before, after, len(mappings), resident>>10)
	if after >= before {
		t.Fatalf("RssFile %.0f KiB after the drop, %.0f KiB before", after, before)
	}

	// Code and read-only data the drop unmapped run and read as before.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(map[string][]int{"slots": {1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "{\"slots\":[1,2,3]}\n" {
		t.Fatalf("encoded %q", got)
	}
	if again, err := dropExecutableCodePages(); err != nil || len(again) != len(mappings) {
		t.Fatalf("second drop: %d mappings, %v; first: %d", len(again), err, len(mappings))
	}
}

// rssFileKiB is this process's RssFile (serve_start_bench_test.go reads
// /proc/PID/status).
func rssFileKiB(t *testing.T) float64 {
	t.Helper()
	kib, ok := procStatusKiB(t, os.Getpid())["RssFile"]
	if !ok {
		t.Fatal("no RssFile in /proc/self/status")
	}
	return kib
}
