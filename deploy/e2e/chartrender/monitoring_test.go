package chartrender

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const monitoringOn = `
metrics:
  serviceMonitor: {enabled: true, labels: {release: prom}}
  prometheusRule: {enabled: true, alertLabels: {team: infra}}
  dashboard: {enabled: true}
clusterAutoscaler: {enabled: true}
`

func TestMonitoringOffByDefault(t *testing.T) {
	objs := mustRender(t, "")
	for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
		if n := count(objs, k); n != 0 {
			t.Errorf("%d %s by default", n, k)
		}
	}
	if find(objs, "ConfigMap", "claimstream-dashboard") != nil {
		t.Error("dashboard ConfigMap by default")
	}
}

// The ServiceMonitors select the metrics Services by their labels and
// scrape a port the Service has, which targets a port the Pods declare:
// claimstream's every replica, and the chart's cluster-autoscaler.
func TestServiceMonitors(t *testing.T) {
	objs := mustRender(t, monitoringOn)
	for _, c := range []struct{ monitor, service, workloadKind, workload, container string }{
		{"claimstream", "claimstream-metrics", "StatefulSet", "claimstream", "claimstream"},
		{"claimstream-cluster-autoscaler", "claimstream-cluster-autoscaler-metrics", "Deployment", "claimstream-cluster-autoscaler", "cluster-autoscaler"},
	} {
		sm := mustFind(t, objs, "ServiceMonitor", c.monitor)
		if sm.GetLabels()["release"] != "prom" {
			t.Errorf("%s: labels %v lack metrics.serviceMonitor.labels", c.monitor, sm.GetLabels())
		}
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		var matched []string
		for _, o := range objs {
			if o.GetKind() == "Service" && labelsMatch(sel, o.GetLabels()) {
				matched = append(matched, o.GetName())
			}
		}
		if !slices.Equal(matched, []string{c.service}) {
			t.Fatalf("%s selects Services %v, want [%s]", c.monitor, matched, c.service)
		}
		svc := mustFind(t, objs, "Service", c.service)
		if pub, _, _ := unstructured.NestedBool(svc.Object, "spec", "publishNotReadyAddresses"); c.service == "claimstream-metrics" && !pub {
			t.Error("the metrics Service leaves out not-ready replicas: a replica whose log cannot be written would not be scraped")
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("%s: endpoints %v", c.monitor, eps)
		}
		portName := eps[0].(map[string]any)["port"].(string)
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		var target any
		for _, p := range ports {
			if p := p.(map[string]any); p["name"] == portName {
				target = p["targetPort"]
			}
		}
		if target == nil {
			t.Fatalf("%s scrapes port %q that Service %s lacks", c.monitor, portName, c.service)
		}
		w := mustFind(t, objs, c.workloadKind, c.workload)
		podLabels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
		svcSel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if !labelsMatch(svcSel, podLabels) {
			t.Errorf("Service %s selects %v, not the %s Pods %v", c.service, svcSel, c.workload, podLabels)
		}
		cs, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
		found := false
		for _, ct := range cs {
			ct := ct.(map[string]any)
			if ct["name"] == c.container {
				cps, _ := ct["ports"].([]any)
				for _, cp := range cps {
					found = found || cp.(map[string]any)["name"] == target
				}
			}
		}
		if !found {
			t.Errorf("Service %s targets port %v that container %s does not declare", c.service, target, c.container)
		}
	}
	// No cluster-autoscaler: nothing to scrape for it.
	objs = mustRender(t, "metrics: {serviceMonitor: {enabled: true}}")
	if count(objs, "ServiceMonitor") != 1 || find(objs, "Service", "claimstream-cluster-autoscaler-metrics") != nil {
		t.Errorf("without cluster-autoscaler: %s", fmtKinds(objs))
	}
}

// The PrometheusRule passes Prometheus's own rule parser (PromQL and the
// annotation templates included); every alert is one
// docs/operations/alerting.md recommends, links a section that exists of a
// page of docs/operations/, and says what happened.
func TestPrometheusRule(t *testing.T) {
	objs := mustRender(t, monitoringOn)
	rule := mustFind(t, objs, "PrometheusRule", "claimstream")
	groups := parseRuleGroups(t, rule)
	ops := repoFile(t, alertingDoc)
	documented := documentedMetrics(t, ops)
	recommended := normalizeSpace(ops)
	const base = "https://github.com/claimstream/claimstream/blob/main/docs/"
	pageAnchors := map[string]map[string]bool{}
	isSection := func(url string) bool {
		rel, ok := strings.CutPrefix(url, base)
		if !ok {
			return false
		}
		page, anchor, ok := strings.Cut(rel, "#")
		if !ok || !runbookPage.MatchString(page) {
			return false
		}
		if _, read := pageAnchors[page]; !read {
			b, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", "docs", page))
			if err == nil {
				pageAnchors[page] = headingAnchors(string(b))
			} else {
				pageAnchors[page] = nil
			}
		}
		return pageAnchors[page][anchor]
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !strings.Contains(recommended, normalizeSpace(r.Expr)) {
				t.Errorf("%s: %q is not an expression %s recommends", r.Alert, r.Expr, alertingDoc)
			}
			for _, m := range metricNames(t, r.Expr) {
				// up is Prometheus's own: whether it scraped the target.
				if m != "up" && !documented.has(m) {
					t.Errorf("%s uses %s, not in %s's metric table", r.Alert, m, alertingDoc)
				}
			}
			url := r.Annotations["runbook_url"]
			if !isSection(url) {
				t.Errorf("%s: runbook_url %q is not a section of a page of docs/operations/", r.Alert, url)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
			if r.Labels["severity"] == "" || r.Labels["team"] != "infra" {
				t.Errorf("%s: labels %v", r.Alert, r.Labels)
			}
		}
	}
	if n < 15 {
		t.Errorf("%d alerts, want the recipes of %s", n, alertingDoc)
	}
	// docs.baseURL moves every link.
	objs = mustRender(t, "{metrics: {prometheusRule: {enabled: true}}, docs: {baseURL: 'https://docs.example.org/claimstream/'}}")
	for _, g := range parseRuleGroups(t, mustFind(t, objs, "PrometheusRule", "claimstream")).Groups {
		for _, r := range g.Rules {
			if !strings.HasPrefix(r.Annotations["runbook_url"], "https://docs.example.org/claimstream/operations/") {
				t.Errorf("%s: runbook_url %s ignores docs.baseURL", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
}

// The dashboard is valid JSON in a ConfigMap Grafana's sidecar finds by its
// (configurable) label; its panels cover what an operator watches, every
// query parses, and every metric it shows is documented.
func TestGrafanaDashboard(t *testing.T) {
	objs := mustRender(t, "metrics: {dashboard: {enabled: true, label: my_dashboards, labelValue: claimstream, namespace: monitoring}}")
	cm := mustFind(t, objs, "ConfigMap", "claimstream-dashboard")
	if cm.GetLabels()["my_dashboards"] != "claimstream" || cm.GetNamespace() != "monitoring" {
		t.Errorf("dashboard ConfigMap labels %v namespace %s", cm.GetLabels(), cm.GetNamespace())
	}
	if mustFind(t, mustRender(t, "metrics: {dashboard: {enabled: true}}"), "ConfigMap", "claimstream-dashboard").GetLabels()["grafana_dashboard"] != "1" {
		t.Error("default dashboard label is not grafana_dashboard=1")
	}
	raw := str(t, cm.Object, "data", "claimstream.json")
	file, err := os.ReadFile(filepath.Join(ChartDir(), "dashboards", "claimstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(raw) != strings.TrimSpace(string(file)) {
		t.Error("the ConfigMap does not carry dashboards/claimstream.json as is")
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("dashboard without uid or title")
	}
	documented := documentedMetrics(t, repoFile(t, alertingDoc))
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			// Grafana's variables, as Grafana substitutes them.
			expr := strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m")
			for _, m := range metricNames(t, expr) {
				used[documented.base(m)] = true
				if !documented.has(m) {
					t.Errorf("panel %q uses %s, not in %s's metric table", p.Title, m, alertingDoc)
				}
			}
		}
	}
	for _, m := range []string{
		"claimstream_claims", "claimstream_claim_time_to_ready_seconds", "claimstream_reaction_seconds",
		"claimstream_reactor_queue_depth", "claimstream_log_writable", "claimstream_append_duration_seconds",
		"claimstream_claim_failures_total",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

func parseRuleGroups(t *testing.T, rule *unstructured.Unstructured) *rulefmt.RuleGroups {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("rules: %v", err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("no rule groups in %s", b)
	}
	return groups
}

// metricNames lists the metric names an expression selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%q: %v", expr, err)
		return nil
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}

// alertingDoc holds the metric table and the recommended alerts.
const alertingDoc = "docs/operations/alerting.md"

// runbookPage is a page of docs/operations/, relative to docs/.
var runbookPage = regexp.MustCompile(`^operations/[a-z0-9-]+\.md$`)

// metricTable is docs/operations/alerting.md's metric table: name -> type.
type metricTable map[string]string

var metricRow = regexp.MustCompile("(?m)^\\| `(claimstream_[a-z0-9_]+)` \\| ([a-z]+) \\|")

func documentedMetrics(t *testing.T, ops string) metricTable {
	t.Helper()
	m := metricTable{}
	for _, row := range metricRow.FindAllStringSubmatch(ops, -1) {
		m[row[1]] = row[2]
	}
	if len(m) < 20 {
		t.Fatalf("only %d metrics found in %s's table", len(m), alertingDoc)
	}
	return m
}

// base is the documented name of a series: a histogram's _bucket, _count
// and _sum are its own.
func (m metricTable) base(name string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && m[b] == "histogram" {
			return b
		}
	}
	return name
}

func (m metricTable) has(name string) bool { return m[m.base(name)] != "" }

// headingAnchors are the GitHub anchors of a Markdown file's headings.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(md, "\n") {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out[b.String()] = true
	}
	return out
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
