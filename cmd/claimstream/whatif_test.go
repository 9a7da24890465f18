package main

import (
	"bytes"
	"context"
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
	apiAddr, metricsAddr := freeAddr(t), freeAddr(t)
	poolFile := filepath.Join("..", "..", "deploy", "examples", "pool.yaml")
	o := serveOptions{
		config: poolFile, configPoll: time.Hour,
		dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		apiAddress: apiAddr, metricsAddress: metricsAddr,
		cluster: clusterOptions{scenario: filepath.Join("..", "..", "deploy", "examples", "scenario.yaml"), speed: 60},
	}
	from := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	to := time.Now().UTC().Add(3 * time.Hour).Format(time.RFC3339) // the scaled clock runs ahead
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var token string
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(o.dataDir, apiTokenFile))
		token = strings.TrimSpace(string(b))
		return err
	})
	cli := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"whatif", "--server", "http://" + apiAddr, "--token", token, "--cli-config", ""}, args...))
		err := root.Execute()
		return out.String(), errOut.String(), err
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
