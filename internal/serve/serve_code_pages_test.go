package serve

import (
	"os"
	"strings"
	"testing"
)

// Only the executable's mappings that are neither writable nor written to
// are dropped: a written page (a relocated segment, the data) would come
// back from the file with other bytes than the process put there.
func TestExecutableCodeMappingsKeepsOnlyUnwrittenReadOnlyPagesOfTheExecutable(t *testing.T) {
	smaps, err := os.ReadFile("testdata/smaps.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := executableCodeMappings(smaps, "/opt/claim stream/bin/claimstream")
	if err != nil {
		t.Fatal(err)
	}
	want := []codeMapping{
		{start: 0x400000, end: 0x2a3f000, rss: 33000 << 10},
		{start: 0x2a3f000, end: 0x544a000, rss: 28000 << 10},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mappings %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	// Another path (a file replaced since the start reads "... (deleted)")
	// matches nothing.
	if got, err := executableCodeMappings(smaps, "/opt/claim stream/bin/claimstream (deleted)"); err != nil || len(got) != 0 {
		t.Fatalf("another path: got %+v, %v; want none", got, err)
	}
}

func TestExecutableCodeMappingsRefusesWhatIsNotSmaps(t *testing.T) {
	for name, in := range map[string]string{
		"no range": "00400000 r-xp 00000000 fd:01 1 /bin/cs\nRss: 4 kB\n",
		"bad hex":  "0040000g-00500000 r-xp 00000000 fd:01 1 /bin/cs\n",
		"empty":    "00500000-00400000 r-xp 00000000 fd:01 1 /bin/cs\n",
		"bad size": "00400000-00500000 r-xp 00000000 fd:01 1 /bin/cs\nRss: x kB\n",
		"negative": "00400000-00500000 r-xp 00000000 fd:01 1 /bin/cs\nAnonymous: -4 kB\n",
	} {
		if got, err := executableCodeMappings([]byte(in), "/bin/cs"); err == nil {
			t.Errorf("%s: got %+v and no error", name, got)
		} else if !strings.HasPrefix(err.Error(), "smaps: ") {
			t.Errorf("%s: error %q does not say what it read", name, err)
		}
	}
}
