package chartrender

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// requirePromtool makes a missing promtool a failure (CI) rather than a
// skip.
const requirePromtool = "CLAIMSTREAM_REQUIRE_PROMTOOL"

// rulesValues render every alert of the PrometheusRule.
const rulesValues = `{metrics: {prometheusRule: {enabled: true, clusterAutoscaler: true}}}`

// ruleTests are the rule unit tests, testdata/rules/*.test.yaml.
func ruleTests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "rules", "*.test.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule tests in testdata/rules: %v", err)
	}
	return files
}

// renderedRules is the PrometheusRule's spec as a Prometheus rules file.
// The annotations are left out: TestPrometheusRule checks them, and the
// unit tests are about when an alert fires and with which labels.
func renderedRules(t *testing.T) []byte {
	t.Helper()
	rule := mustFind(t, mustRender(t, rulesValues), "PrometheusRule", "claimstream")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			delete(r.(map[string]any), "annotations")
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The shipped alerts pass their unit tests under promtool: three replicas
// raise an alert once, a leader move or a pod restart raises none, a
// backup that never ran does.
func TestPrometheusRuleUnitTests(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		msg := fmt.Sprintf("\n*** %s: SKIPPING the rule unit tests: no promtool on PATH\n*** install Debian's prometheus (apt-get install -y prometheus), or set %s=1 to make this a failure ***", t.Name(), requirePromtool)
		if os.Getenv(requirePromtool) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "claimstream.rules.yaml"), renderedRules(t), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"test", "rules"}
	for _, f := range ruleTests(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	cmd := exec.Command(promtool, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// ruleTestFile is the part of a promtool unit test file read here.
type ruleTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTests []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every alert of the PrometheusRule has a unit test in which it fires,
// and the tests run against the rendered rules only.
func TestEveryAlertHasAUnitTest(t *testing.T) {
	var spec struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(renderedRules(t), &spec); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, f := range ruleTests(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf ruleTestFile
		if err := yaml.Unmarshal(b, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(tf.RuleFiles, []string{"claimstream.rules.yaml"}) {
			t.Errorf("%s: rule_files %v, want [claimstream.rules.yaml] (the rendered PrometheusRule)", f, tf.RuleFiles)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTests {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				}
			}
		}
	}
	n := 0
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s has no unit test in testdata/rules/*.test.yaml in which it fires", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts rendered")
	}
	t.Logf("%d alerts, each with a unit test; the rule files: %s", n, strings.Join(ruleTests(t), " "))
}
