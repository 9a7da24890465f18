package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
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
	t.Logf("RssFile %d to %d KiB; %d mappings held %d KiB", before, after, len(mappings), resident>>10)
	if after >= before {
		t.Fatalf("RssFile %d KiB after the drop, %d KiB before", after, before)
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

func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("RssFile %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
