package cost

import (
	"os"
	"strings"
	"testing"
)

// docs/cost.md's worked example is testdata/worked-example.txt: each of its
// tables is the report of that log for the day, as markdownTable writes it.
func TestDocWorkedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	evs, reports := readTranscript(t, "testdata/worked-example.txt")
	for _, r := range reports[:2] { // by group, by requester
		f := NewFold(r.by, r.since, r.until)
		for _, e := range evs {
			f.Apply(e)
		}
		table := markdownTable(f.Report(r.until))
		if !strings.Contains(string(doc), table) {
			t.Errorf("docs/cost.md lacks the worked example's report by %s:\n%s", r.by, table)
		}
	}
}

func markdownTable(r Report) string {
	var b strings.Builder
	b.WriteString("| " + string(r.By) + " | currency | machine-hours | boot-hours | kWh | cost | boots | failed boots | no-claim h | input-law-pause h | drain h | shutdown-refused h | unwanted share |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, line := range formatRows(r) {
		b.WriteString("| " + strings.ReplaceAll(line, " ", " | ") + " |\n")
	}
	return b.String()
}
