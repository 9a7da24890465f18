package cost

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
)

// TestTranscripts plays every testdata/*.txt: its events, in the order of
// their times (the log's order), then each "report" line's query, whose
// rows must be the lines after it, exactly.
func TestTranscripts(t *testing.T) {
	files := transcriptFiles(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			evs, reports := readTranscript(t, file)
			for _, r := range reports {
				f := NewFold(r.by, r.since, r.until)
				for _, e := range evs {
					f.Apply(e)
				}
				got := formatRows(f.Report(time.Time{}))
				if !slices.Equal(got, r.want) {
					t.Errorf("%s:%d: report by %s\n--- got\n%s\n--- want\n%s", file, r.line, r.by, strings.Join(got, "\n"), strings.Join(r.want, "\n"))
				}
			}
		})
	}
}

type wantReport struct {
	line         int
	since, until time.Time
	by           Dimension
	want         []string
}

func readTranscript(t *testing.T, file string) ([]events.Event, []wantReport) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var evs []events.Event
	var reports []wantReport
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "report "):
			r := wantReport{line: n}
			for _, kv := range strings.Fields(line)[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "since":
					r.since = mustTime(t, file, n, v)
				case "until":
					r.until = mustTime(t, file, n, v)
				case "by":
					if r.by, err = ParseDimension(v); err != nil {
						t.Fatalf("%s:%d: %v", file, n, err)
					}
				}
			}
			reports = append(reports, r)
		case len(line) > 0 && line[0] >= '0' && line[0] <= '9' && len(reports) == 0:
			parts := strings.SplitN(line, " ", 3)
			if len(parts) != 3 {
				t.Fatalf("%s:%d: want <time> <Type> <data>", file, n)
			}
			d, err := events.DecodeData(events.Type(parts[1]), []byte(parts[2]))
			if err != nil {
				t.Fatalf("%s:%d: %v", file, n, err)
			}
			evs = append(evs, events.Event{Seq: uint64(len(evs) + 1), Time: mustTime(t, file, n, parts[0]), Data: d})
		case len(reports) > 0:
			r := &reports[len(reports)-1]
			r.want = append(r.want, strings.Join(strings.Fields(line), " "))
		default:
			t.Fatalf("%s:%d: cannot read %q", file, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
	return evs, reports
}

func mustTime(t *testing.T, file string, line int, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("%s:%d: %v", file, line, err)
	}
	return v
}

func formatRows(r Report) []string {
	var out []string
	for _, row := range append(r.Rows, r.Totals...) {
		f := []string{row.Key, row.Currency, num(row.MachineHours), num(row.BootHours), num(row.KWh), num(row.Cost),
			strconv.Itoa(row.Boots), strconv.Itoa(row.FailedBoots)}
		for _, reason := range Reasons {
			f = append(f, num(row.UnwantedHours[reason]))
		}
		out = append(out, strings.Join(append(f, num(row.UnwantedShare)), " "))
	}
	return out
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// The report's JSON names its columns (what the REST endpoint serves).
func TestReportJSON(t *testing.T) {
	f := NewFold(ByGroup, time.Time{}, time.Time{})
	b, err := json.Marshal(f.Report(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil || !strings.Contains(string(b), `"rows":[]`) {
		t.Fatalf("%s %v", b, err)
	}
}

// transcriptFiles are the scripted logs under testdata/.
func transcriptFiles(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata/*.txt")
	}
	return files
}

// indexOf is an index fed evs.
func indexOf(evs []events.Event) *Index {
	// Chunks of 3 spans (and marks) in the tests' history file: the
	// tests' short logs are read back from disk too.
	x := newIndex(testHistory())
	x.chunkSpans = 3
	for _, e := range evs {
		x.Apply(e)
	}
	return x
}
