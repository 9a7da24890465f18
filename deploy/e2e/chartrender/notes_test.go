package chartrender

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func renderNotes(t *testing.T, doc string) string {
	t.Helper()
	files, err := RenderFiles("claimstream", "ns", values(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	notes, ok := files["claimstream/templates/NOTES.txt"]
	if !ok || notes == "" {
		t.Fatal("no NOTES.txt rendered")
	}
	return notes
}

// buildCLI builds ./cmd/claimstream of this repository into a test dir.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "claimstream")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/claimstream")
	cmd.Dir = filepath.Join(ChartDir(), "..", "..")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/claimstream: %v\n%s", err, out)
	}
	return bin
}

// The CLI commands NOTES.txt gives are real: each runs through the CLI's
// own flag parsing (with --help, so nothing is contacted) without an
// unknown command or flag; and the Service and Secret they use are
// rendered.
func TestNotesCommandsAreReal(t *testing.T) {
	bin := buildCLI(t)
	for _, doc := range []string{"", "rest: {tls: true}", "replicas: 3"} {
		notes := renderNotes(t, doc)
		var cli []string
		for _, line := range strings.Split(notes, "\n") {
			// Commands are indented; prose is not.
			if l := strings.TrimSpace(line); strings.HasPrefix(line, " ") && strings.HasPrefix(l, "claimstream ") {
				cli = append(cli, l)
			}
		}
		if len(cli) < 2 {
			t.Fatalf("%s: NOTES.txt gives %d CLI commands:\n%s", doc, len(cli), notes)
		}
		for _, l := range cli {
			args := append(strings.Fields(l)[1:], "--help")
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "unknown") {
				t.Errorf("%s: %q: %v\n%s", doc, l, err, out)
			}
			if !strings.Contains(l, "--server ") {
				t.Errorf("%s: %q does not name the server it reaches", doc, l)
			}
		}
		if doc == "rest: {tls: true}" && !strings.Contains(notes, "--server https://") {
			t.Errorf("API over TLS, but NOTES.txt does not use https:\n%s", notes)
		}
		objs := mustRender(t, doc)
		for _, m := range regexp.MustCompile(`port-forward svc/(\S+)`).FindAllStringSubmatch(notes, -1) {
			if find(objs, "Service", m[1]) == nil {
				t.Errorf("%s: NOTES.txt port-forwards to Service %s, which is not rendered", doc, m[1])
			}
		}
		secrets := regexp.MustCompile(`get secret (\S+)`).FindAllStringSubmatch(notes, -1)
		if len(secrets) == 0 {
			t.Errorf("%s: NOTES.txt does not say where the API token is", doc)
		}
		for _, m := range secrets {
			if find(objs, "Secret", m[1]) == nil {
				t.Errorf("%s: NOTES.txt reads Secret %s, which is not rendered", doc, m[1])
			}
		}
		// The token the CLI is given is the one the server is given.
		env := server(t, objs)["env"].([]any)
		for _, e := range env {
			e := e.(map[string]any)
			if e["name"] == "CLAIMSTREAM_API_TOKEN" {
				if want := str(t, e, "valueFrom", "secretKeyRef", "name"); !strings.Contains(notes, "get secret "+want+" ") {
					t.Errorf("%s: the server's token is in Secret %s, NOTES.txt reads another", doc, want)
				}
			}
		}
	}
}

// NOTES.txt points at the metrics and dashboards, and calls the default
// pool a placeholder (only while it is the default).
func TestNotesMonitoringAndPlaceholder(t *testing.T) {
	notes := renderNotes(t, "metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}")
	for _, want := range []string{"/metrics", "ServiceMonitor claimstream", "PrometheusRule claimstream", "ConfigMap claimstream-dashboard", "placeholder"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	own := renderNotes(t, `pool: {config: {groups: [{name: lab}], slots: [{name: n1, group: lab}]}}`)
	if strings.Contains(own, "placeholder") {
		t.Errorf("NOTES.txt calls the user's own pool a placeholder:\n%s", own)
	}
}
