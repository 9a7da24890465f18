package cli

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/internal/golden"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// runCLI runs one CLI invocation against the fixture's server at the
// fixture's clock, and returns stdout plus the error, if any.
func runCLI(t *testing.T, f *resttest.Fixture, args ...string) string {
	t.Helper()
	if f != nil {
		now := f.H.Clock.Now()
		cliNow = func() time.Time { return now }
	}
	defer func() { cliNow = time.Now }()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	full := append([]string{}, args...)
	if f != nil {
		full = append(full, "--server", f.Server.URL, "--token", resttest.Token, "--cli-config", "")
	}
	root.SetArgs(full)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		out.WriteString("error: " + err.Error() + "\n")
	}
	return out.String()
}

var (
	eventIDs = regexp.MustCompile(`"id":"[0-9a-f]{32}"`)
	hostPort = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)
)

func normalize(s string) string {
	s = eventIDs.ReplaceAllString(s, `"id":"<id>"`)
	return hostPort.ReplaceAllString(s, "http://127.0.0.1:<port>")
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "cli", name+".golden"), normalize(got), "go test ./internal/cli -run CLI")
}

// TestCLIGolden runs every read verb against a server with the scripted
// history (resttest.History) and compares the output with
// testdata/cli/<name>.golden.
func TestCLIGolden(t *testing.T) {
	f := resttest.Scripted(t)
	at := func(d time.Duration) string { return handlerstest.Start.Add(d).Format(time.RFC3339) }
	cases := []struct {
		name string
		args []string
	}{
		{"get-groups", []string{"get", "groups"}},
		{"get-groups-wide", []string{"get", "groups", "-o", "wide"}},
		{"get-group-json", []string{"get", "group", "gpu", "-o", "json"}},
		{"get-slots", []string{"get", "slots"}},
		{"get-slots-wide", []string{"get", "slots", "-o", "wide"}},
		{"get-claims", []string{"get", "claims"}},
		{"get-claims-wide", []string{"get", "claims", "-o", "wide"}},
		{"get-claims-group", []string{"get", "claims", "--group", "homelab", "--phase", "ready"}},
		{"get-claim-yaml", []string{"get", "claim", f.Claims["second"], "-o", "yaml"}},
		{"get-unknown", []string{"get", "claim", "nope-000000"}},
		{"get-slots-name", []string{"get", "slots", "-o", "name"}},
		{"get-claim-name", []string{"get", "claim", f.Claims["second"], "-o", "name"}},
		{"get-claims-jsonpath", []string{"get", "claims", "-o", "jsonpath={range .items[*]}{.name}{\"\\t\"}{.phase}{\"\\n\"}{end}"}},
		{"get-claim-jsonpath-relaxed", []string{"get", "claim", f.Claims["second"], "-o", "jsonpath=.slot"}},
		{"get-claims-jsonpath-bad", []string{"get", "claims", "-o", "jsonpath={.items[*"}},
		{"get-claims-no-headers", []string{"get", "claims", "--no-headers"}},
		{"get-slots-wide-no-headers", []string{"get", "slots", "-o", "wide", "--no-headers"}},
		{"get-bad-output", []string{"get", "claims", "-o", "xml"}},
		{"replay-claims-name", []string{"replay", "claims", "--seq", "8", "-o", "name"}},
		{"describe-slot", []string{"describe", "slot", "node-1.lan"}},
		{"describe-claim", []string{"describe", "claim", f.Claims["second"]}},
		{"describe-claim-pending", []string{"describe", "claim", f.Claims["manual"]}},
		{"describe-group", []string{"describe", "group", "homelab"}},
		{"describe-claim-failed", []string{"describe", "claim", f.Claims["broken"]}},
		{"audit-slot-one-claim", []string{"audit", "slot", "node-3.lan"}},
		{"events", []string{"events"}},
		{"events-slot-wide", []string{"events", "--slot", "gpu-1", "-o", "wide"}},
		{"events-type-json", []string{"events", "--type", "ClaimFailed", "-o", "json"}},
		{"events-claim-since", []string{"events", "--claim", f.Claims["second"], "--since", at(17 * time.Minute)}},
		{"events-last", []string{"events", "--last", "3"}},
		{"events-export", []string{"events", "export", "--slot", "gpu-1"}},
		{"audit-slot", []string{"audit", "slot", "node-1.lan"}},
		{"audit-claim", []string{"audit", "claim", f.Claims["second"]}},
		{"audit-collected-claim", []string{"audit", f.Claims["first"]}},
		{"audit-collected-claim-slot", []string{"audit", f.Claims["first"], "--slot", "node-1.lan"}},
		{"audit-unknown", []string{"audit", "claim", "node-1.lan-000000"}},
		{"audit-json", []string{"audit", "claim", f.Claims["manual"], "-o", "json"}},
		{"replay-claims-at", []string{"replay", "claims", "--at", at(14*time.Minute + 10*time.Second)}},
		{"replay-slots-at", []string{"replay", "slots", "--at", at(13*time.Minute + 11*time.Second), "-o", "wide"}},
		{"replay-groups-seq", []string{"replay", "groups", "--seq", "8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkGolden(t, c.name, runCLI(t, f, c.args...))
		})
	}
}

// TestCLICommandsGolden runs the writing verbs in order.
func TestCLICommandsGolden(t *testing.T) {
	f := resttest.Scripted(t)
	var out strings.Builder
	step := func(args ...string) string {
		s := runCLI(t, f, args...)
		out.WriteString("$ claimstream " + strings.Join(args, " ") + "\n" + s)
		return s
	}
	step("claim", "node-3.lan", "--by", "carol")
	step("recommission", "node-3.lan", "--by", "carol")
	step("recommission", "node-3.lan", "--by", "carol")
	s := step("claim", "node-3.lan", "--by", "carol", "--reason", "burn-in")
	name := strings.TrimSuffix(strings.TrimPrefix(strings.Split(s, "\n")[0], "claim/"), " created")
	step("get", "claims", "--slot", "node-3.lan")
	step("delete", "claim", name, "--by", "carol")
	step("delete", "claim", name, "--by", "carol")
	step("decommission", "node-2.lan", "--by", "carol", "--reason", "disk")
	step("get", "slots")
	step("audit", "slot", "node-3.lan")
	checkGolden(t, "commands", out.String())
}

// TestCLIUnreachableServer: a clear error naming the address.
func TestCLIUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"get", "claims", "--server", "http://" + addr, "--cli-config", ""})
	err = root.Execute()
	want := "cannot reach claimstream at http://" + addr + ": is `claimstream serve` running? (connection refused)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

// TestCLIConfigResolution: flag over env over config file over default.
func TestCLIConfigResolution(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cli.yaml")
	writeFile(t, cfg, "server: http://from-file:1\ntoken: file-token\n")
	o := &Options{configFile: cfg}
	t.Setenv("CLAIMSTREAM_SERVER", "")
	t.Setenv("CLAIMSTREAM_TOKEN", "")
	c, _ := o.Client()
	if c.BaseURL != "http://from-file:1" || c.Token != "file-token" {
		t.Fatalf("file: %+v", c)
	}
	t.Setenv("CLAIMSTREAM_SERVER", "from-env:2")
	t.Setenv("CLAIMSTREAM_TOKEN", "env-token")
	c, _ = o.Client()
	if c.BaseURL != "http://from-env:2" || c.Token != "env-token" {
		t.Fatalf("env: %+v", c)
	}
	o.server, o.token = "http://flag:3", "flag-token"
	c, _ = o.Client()
	if c.BaseURL != "http://flag:3" || c.Token != "flag-token" {
		t.Fatalf("flag: %+v", c)
	}
	t.Setenv("CLAIMSTREAM_SERVER", "")
	c, _ = (&Options{configFile: filepath.Join(dir, "none.yaml")}).Client()
	if c.BaseURL != DefaultServer {
		t.Fatalf("default: %+v", c)
	}
	writeFile(t, cfg, "server: x\nbogus: 1\n")
	if _, err := o.Client(); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("bad config file: %v", err)
	}
}

// TestCLICompletion: cobra's completion command is there and the verbs
// complete names from the server.
func TestCLICompletion(t *testing.T) {
	f := resttest.Scripted(t)
	root := newRoot()
	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs([]string{"__complete", "describe", "--server", f.Server.URL, "--token", resttest.Token, "--cli-config", "", "slot", ""})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "node-1.lan") || !strings.Contains(out, "gpu-1") {
		t.Fatalf("completion:\n%s", out)
	}
	if out := runCLI(t, nil, "completion", "bash"); !strings.Contains(out, "bash completion") {
		t.Fatalf("completion bash: %.200s", out)
	}
}

// Ages are measured against the server's clock (a simulator's may run
// ahead of this machine's): a CLI whose own clock is years off prints the
// same table.
func TestCLIAgesFollowTheServerClock(t *testing.T) {
	f := resttest.Scripted(t)
	want := runCLI(t, f, "get", "claims")
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	cliNow = func() time.Time { return time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) }
	defer func() { cliNow = time.Now }()
	root.SetArgs([]string{"get", "claims", "--server", f.Server.URL, "--token", resttest.Token, "--cli-config", ""})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Fatalf("with a wrong local clock:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestAgeIsNeverNegative: a time ahead of the clock it is measured
// against reads 0s, not a negative age.
func TestAgeIsNeverNegative(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, -3 * time.Hour} {
		if got := age(d); got != "0s" {
			t.Errorf("age(%s) = %q, want 0s", d, got)
		}
	}
	if got := age(90 * time.Second); got != "1m30s" {
		t.Errorf("age(90s) = %q", got)
	}
}
