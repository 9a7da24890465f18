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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// buildCmd builds ./cmd/<name> of this repository into a test dir.
func buildCmd(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = filepath.Join(ChartDir(), "..", "..")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// The CLI commands NOTES.txt gives are real: the plugin it installs is
// this repository's at the chart's appVersion; each `kubectl claimstream`
// command runs through the plugin's own flag parsing (with --help, so
// nothing is contacted) without an unknown command or flag, in the
// release's namespace; and the Service it names is rendered with what the
// plugin finds it by (the chart's name label and a port named http).
func TestNotesCommandsAreReal(t *testing.T) {
	bin := buildCmd(t, "kubectl-claimstream")
	module := strings.TrimPrefix(strings.SplitN(repoFile(t, "go.mod"), "\n", 2)[0], "module ")
	appVersion := regexp.MustCompile(`(?m)^appVersion: "?v?([^"\s]+)"?`).FindStringSubmatch(repoFile(t, "deploy/chart/Chart.yaml"))
	if appVersion == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	install := "go install " + module + "/cmd/kubectl-claimstream@v" + appVersion[1]
	for _, doc := range []string{"", "rest: {tls: true}", "replicas: 3"} {
		notes := renderNotes(t, doc)
		var plugin []string
		installs := 0
		for _, line := range strings.Split(notes, "\n") {
			// Commands are indented; prose is not.
			l := strings.TrimSpace(line)
			if !strings.HasPrefix(line, " ") {
				continue
			}
			if strings.HasPrefix(l, "kubectl claimstream ") {
				plugin = append(plugin, l)
			}
			if strings.HasPrefix(l, "go install ") {
				installs++
				if l != install {
					t.Errorf("%s: %q, want %q", doc, l, install)
				}
			}
			if strings.Contains(l, "base64") || strings.Contains(l, "port-forward") {
				t.Errorf("%s: %q: the plugin finds the token and forwards by itself", doc, l)
			}
		}
		if installs != 1 || len(plugin) < 2 {
			t.Fatalf("%s: NOTES.txt gives %d go install and %d plugin commands:\n%s", doc, installs, len(plugin), notes)
		}
		for _, l := range plugin {
			args := append(strings.Fields(l)[2:], "--help")
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "unknown") {
				t.Errorf("%s: %q: %v\n%s", doc, l, err, out)
			}
			if !strings.Contains(l, " -n ns") {
				t.Errorf("%s: %q does not name the release's namespace", doc, l)
			}
		}
		if doc == "rest: {tls: true}" && !strings.Contains(notes, "CA") {
			t.Errorf("API over TLS, but NOTES.txt does not say the plugin trusts its CA:\n%s", notes)
		}
		objs := mustRender(t, doc)
		m := regexp.MustCompile(`Service \((\S+)\)`).FindStringSubmatch(notes)
		if m == nil {
			t.Fatalf("%s: NOTES.txt does not name the API Service:\n%s", doc, notes)
		}
		svc := find(objs, "Service", m[1])
		if svc == nil {
			t.Fatalf("%s: NOTES.txt names Service %s, which is not rendered", doc, m[1])
		}
		if svc.GetLabels()["app.kubernetes.io/name"] != "claimstream" {
			t.Errorf("%s: Service %s lacks the label app.kubernetes.io/name=claimstream the plugin finds it by: %v", doc, m[1], svc.GetLabels())
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		named := false
		for _, p := range ports {
			named = named || p.(map[string]any)["name"] == "http"
		}
		if !named {
			t.Errorf("%s: Service %s has no port named http: %v", doc, m[1], ports)
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
