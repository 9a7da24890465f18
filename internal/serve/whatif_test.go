package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/whatif"
)

// serve in the simulator, playing the example scenario: `claimstream
// whatif` replays what it recorded under the example pool file, prints the
// runs side by side and tells its progress on stderr; a bad pool file is
// refused at its line before anything is sent.
func TestWhatIfInTheSimulator(t *testing.T) {
	poolFile := examplePool
	from := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	to := time.Now().UTC().Add(3 * time.Hour).Format(time.RFC3339) // the scaled clock runs ahead
	apiAddr, _, token := exampleServe(t)
	cli := func(args ...string) (string, string, error) {
		return cliAgainst(apiAddr, token, append([]string{"whatif"}, args...)...)
	}
	var rep whatif.Report
	var progress string
	eventstest.CheckFor(t, 90*time.Second, 500*time.Millisecond, func() error {
		out, stderr, err := cli("--from", from, "--to", to, "--config", poolFile, "-o", "json")
		if err != nil {
			return err
		}
		rep = whatif.Report{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if rep.Requests < 3 || rep.Recorded.Boots < 3 {
			return fmt.Errorf("not yet recorded enough: %d calls, %d boots", rep.Requests, rep.Recorded.Boots)
		}
		progress = stderr
		return nil
	})
	if len(rep.Candidates) != 1 || rep.Candidates[0].Name != "pool.yaml" || rep.Baseline.Boots == 0 {
		t.Fatalf("report: %+v", rep)
	}
	for _, want := range []string{"what-if: baseline", "what-if: pool.yaml", "100%"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress on stderr does not say %q:\n%s", want, progress)
		}
	}
	out, _, err := cli("--from", from, "--to", to, "--config", poolFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN", "MACHINE-HOURS", "recorded", "baseline", "pool.yaml", "vs baseline", "EUR"} {
		if !strings.Contains(out, want) {
			t.Errorf("table does not show %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("groups:\n  - name: g\n    minSize: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli("--from", from, "--to", to, "--config", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("a bad pool file: %v, want an error naming it", err)
	}
	if _, _, err := cli("--from", to, "--to", from, "--config", poolFile); err == nil {
		t.Error("a reversed period was accepted")
	}
}
