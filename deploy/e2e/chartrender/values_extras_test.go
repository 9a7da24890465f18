package chartrender

import (
	"context"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// everything turns on each value of sinks, nats.subscriber, eventSource,
// rest.readToken and the extra volumes.
const everything = `
eventSource: /claimstream/prod-eu
rest: {readToken: {enabled: true}}
nats: {subscriber: {enabled: true, port: 4333, user: audit}}
sinks:
  config:
    sinks:
      - name: alerts
        url: https://alerts.example.com/hooks/claimstream
        headers:
          Authorization: {prefix: "Bearer ", valueFrom: {env: ALERTS_TOKEN}}
          X-Key: {valueFrom: {file: /etc/claimstream/sink-secrets/audit-key/key}}
  secretEnv: [{name: ALERTS_TOKEN, secretName: alerts, key: token}]
  secretFiles: [audit-key]
extraVolumes: [{name: ca-bundle, configMap: {name: corp-ca}}]
extraVolumeMounts: [{name: ca-bundle, mountPath: /etc/ssl/corp, readOnly: true}]
`

// podSpec returns the StatefulSet's Pod spec.
func podSpec(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(mustFind(t, objs, "StatefulSet", "claimstream").Object, "spec", "template", "spec")
	return spec
}

// byName indexes a list of named objects (env, volumes, mounts, ports).
func byName(list any) map[string]map[string]any {
	out := map[string]map[string]any{}
	l, _ := list.([]any)
	for _, x := range l {
		m := x.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// mountOf is the path where the container mounts volume name ("" if not).
func mountOf(c map[string]any, name string) string {
	if m, ok := byName(c["volumeMounts"])[name]; ok {
		return m["mountPath"].(string)
	}
	return ""
}

func TestSinksValues(t *testing.T) {
	objs := mustRender(t, everything)
	a := args(t, objs)
	if a["--sinks"] != "/etc/claimstream/sinks/sinks.yaml" {
		t.Fatalf("--sinks = %q", a["--sinks"])
	}
	cm := mustFind(t, objs, "ConfigMap", "claimstream-sinks")
	var file map[string]any
	if err := yaml.Unmarshal([]byte(str(t, cm.Object, "data", "sinks.yaml")), &file); err != nil {
		t.Fatal(err)
	}
	if want := values(t, everything)["sinks"].(map[string]any)["config"]; !reflect.DeepEqual(file, want) {
		t.Errorf("sinks.yaml = %v, want the values' config %v", file, want)
	}
	c := server(t, objs)
	vols := byName(podSpec(t, objs)["volumes"])
	if mountOf(c, "sinks") != "/etc/claimstream/sinks" || vols["sinks"]["configMap"].(map[string]any)["name"] != "claimstream-sinks" {
		t.Errorf("sinks volume %v mounted at %q", vols["sinks"], mountOf(c, "sinks"))
	}
	env := byName(c["env"])
	if got := env["ALERTS_TOKEN"]["valueFrom"]; !reflect.DeepEqual(got, map[string]any{"secretKeyRef": map[string]any{"name": "alerts", "key": "token"}}) {
		t.Errorf("ALERTS_TOKEN from %v", got)
	}
	// The file's valueFrom path is where the Secret is mounted.
	if mountOf(c, "sink-secret-0") != "/etc/claimstream/sink-secrets/audit-key" || vols["sink-secret-0"]["secret"].(map[string]any)["secretName"] != "audit-key" {
		t.Errorf("audit-key Secret: volume %v mounted at %q", vols["sink-secret-0"], mountOf(c, "sink-secret-0"))
	}

	// A change of the file rolls the Pods; none without sinks.
	sum := func(doc string) string {
		ann, _, _ := unstructured.NestedStringMap(mustFind(t, mustRender(t, doc), "StatefulSet", "claimstream").Object, "spec", "template", "metadata", "annotations")
		return ann["checksum/sinks"]
	}
	if s1, s2 := sum(everything), sum(strings.Replace(everything, "hooks/claimstream", "hooks/other", 1)); s1 == "" || s1 == s2 {
		t.Errorf("checksum/sinks %q then %q: a changed file does not roll the Pods", s1, s2)
	}
	def := mustRender(t, "")
	if _, ok := args(t, def)["--sinks"]; ok || find(def, "ConfigMap", "claimstream-sinks") != nil || sum("") != "" {
		t.Error("sinks rendered by default")
	}

	ex := mustRender(t, "sinks: {existingConfigMap: my-sinks}")
	if args(t, ex)["--sinks"] != "/etc/claimstream/sinks/sinks.yaml" || find(ex, "ConfigMap", "claimstream-sinks") != nil {
		t.Error("existingConfigMap: want --sinks and no chart ConfigMap")
	}
	if got := byName(podSpec(t, ex)["volumes"])["sinks"]["configMap"].(map[string]any)["name"]; got != "my-sinks" {
		t.Errorf("existingConfigMap mounts %v", got)
	}
}

func TestNATSSubscriberValues(t *testing.T) {
	objs := mustRender(t, everything)
	a := args(t, objs)
	for flag, want := range map[string]string{
		"--nats-listen":                   "0.0.0.0:4333",
		"--nats-tls-cert":                 "/etc/claimstream/tls/tls.crt",
		"--nats-tls-key":                  "/etc/claimstream/tls/tls.key",
		"--nats-subscriber-user":          "audit",
		"--nats-subscriber-password-file": "/etc/claimstream/nats-subscriber/password",
	} {
		if a[flag] != want {
			t.Errorf("%s = %q, want %q", flag, a[flag], want)
		}
	}
	c := server(t, objs)
	if !containerPort(c, "nats", 4333) {
		t.Errorf("no nats container port 4333: %v", c["ports"])
	}
	if !servicePort(mustFind(t, objs, "Service", "claimstream-nats"), "nats", 4333) {
		t.Error("Service claimstream-nats has no port nats 4333")
	}
	sec := mustFind(t, objs, "Secret", "claimstream-nats-subscriber")
	if pw := str(t, sec.Object, "data", "password"); len(pw) < 40 {
		t.Errorf("generated password %q", pw)
	}
	vol := byName(podSpec(t, objs)["volumes"])["nats-subscriber"]
	if mountOf(c, "nats-subscriber") != "/etc/claimstream/nats-subscriber" || vol["secret"].(map[string]any)["secretName"] != "claimstream-nats-subscriber" {
		t.Errorf("password volume %v at %q", vol, mountOf(c, "nats-subscriber"))
	}
	// The server certificate names the Service subscribers connect to.
	cert := parseCert(t, str(t, mustFind(t, objs, "Secret", "claimstream-server-tls").Object, "data", "tls.crt"))
	if !contains(cert.DNSNames, "claimstream-nats.ns.svc") {
		t.Errorf("server certificate names %v, not the NATS Service", cert.DNSNames)
	}

	ex := mustRender(t, "nats: {subscriber: {enabled: true, existingPasswordSecret: nats-pw}}")
	if find(ex, "Secret", "claimstream-nats-subscriber") != nil {
		t.Error("a generated password beside existingPasswordSecret")
	}
	if got := byName(podSpec(t, ex)["volumes"])["nats-subscriber"]["secret"].(map[string]any)["secretName"]; got != "nats-pw" {
		t.Errorf("existingPasswordSecret: volume from %v", got)
	}
	def := mustRender(t, "")
	if _, ok := args(t, def)["--nats-listen"]; ok || find(def, "Service", "claimstream-nats") != nil {
		t.Error("a NATS client port by default")
	}

	peers := ingressByPort(t, "{nats: {subscriber: {enabled: true}}, networkPolicy: {enabled: true, natsSubscriber: {podSelector: {matchLabels: {app: audit}}}}}")
	if want := []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "audit"}}}}; !reflect.DeepEqual(peers["4222"], want) {
		t.Errorf("NATS port peers %v, want %v", peers["4222"], want)
	}
	if peers := ingressByPort(t, "{nats: {subscriber: {enabled: true}}, networkPolicy: {enabled: true}}"); peers["4222"] != nil {
		t.Errorf("NATS port open to %v with no selector", peers["4222"])
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// eventSource reaches serve; without it serve names the cluster by the
// kube-system Namespace's UID, and the ClusterRole lets it read that one
// Namespace, and nothing else about namespaces.
func TestEventSourceValues(t *testing.T) {
	nsRules := func(objs []*unstructured.Unstructured) []any {
		var out []any
		rules, _, _ := unstructured.NestedSlice(mustFind(t, objs, "ClusterRole", "claimstream").Object, "rules")
		for _, r := range rules {
			for _, res := range r.(map[string]any)["resources"].([]any) {
				if res == "namespaces" {
					out = append(out, r)
				}
			}
		}
		return out
	}
	def := mustRender(t, "")
	if _, ok := args(t, def)["--event-source"]; ok {
		t.Error("--event-source by default")
	}
	want := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"namespaces"}, "resourceNames": []any{"kube-system"}, "verbs": []any{"get"}}}
	if got := nsRules(def); !reflect.DeepEqual(got, want) {
		t.Errorf("namespace rules %v, want %v", got, want)
	}
	objs := mustRender(t, everything)
	if got := args(t, objs)["--event-source"]; got != "/claimstream/prod-eu" {
		t.Errorf("--event-source = %q", got)
	}
	if got := nsRules(objs); got != nil {
		t.Errorf("namespace rules %v with eventSource given", got)
	}
}

func TestReadTokenValues(t *testing.T) {
	objs := mustRender(t, everything)
	env := byName(server(t, objs)["env"])
	ref := map[string]any{"secretKeyRef": map[string]any{"name": "claimstream-api-read-token", "key": "token"}}
	if got := env["CLAIMSTREAM_API_READ_TOKEN"]["valueFrom"]; !reflect.DeepEqual(got, ref) {
		t.Errorf("CLAIMSTREAM_API_READ_TOKEN from %v", got)
	}
	read := str(t, mustFind(t, objs, "Secret", "claimstream-api-read-token").Object, "data", "token")
	admin := str(t, mustFind(t, objs, "Secret", "claimstream-api-token").Object, "data", "token")
	if len(read) < 48 || read == admin {
		t.Errorf("read token %q beside admin %q", read, admin)
	}

	ex := mustRender(t, "rest: {readToken: {enabled: true, existingSecret: viewers}}")
	if find(ex, "Secret", "claimstream-api-read-token") != nil {
		t.Error("a generated read token beside existingSecret")
	}
	if got := byName(server(t, ex)["env"])["CLAIMSTREAM_API_READ_TOKEN"]["valueFrom"].(map[string]any)["secretKeyRef"].(map[string]any)["name"]; got != "viewers" {
		t.Errorf("existingSecret: token from %v", got)
	}
	for _, doc := range []string{"", "rest: {enabled: false, readToken: {enabled: true}}"} {
		o := mustRender(t, doc)
		if _, ok := byName(server(t, o)["env"])["CLAIMSTREAM_API_READ_TOKEN"]; ok || find(o, "Secret", "claimstream-api-read-token") != nil {
			t.Errorf("%q: a read token", doc)
		}
	}
}

func TestExtraVolumes(t *testing.T) {
	objs := mustRender(t, everything)
	if got := byName(podSpec(t, objs)["volumes"])["ca-bundle"]; !reflect.DeepEqual(got, map[string]any{"name": "ca-bundle", "configMap": map[string]any{"name": "corp-ca"}}) {
		t.Errorf("extra volume %v", got)
	}
	if got := mountOf(server(t, objs), "ca-bundle"); got != "/etc/ssl/corp" {
		t.Errorf("extra mount at %q", got)
	}
}

// priorityClassName is system-cluster-critical, like the chart's
// cluster-autoscaler; "" leaves it out for clusters whose quota refuses it.
func TestPriorityClass(t *testing.T) {
	for doc, want := range map[string]any{
		"":                         "system-cluster-critical",
		`priorityClassName: ""`:    nil,
		"priorityClassName: batch": "batch",
	} {
		if got := podSpec(t, mustRender(t, doc))["priorityClassName"]; got != want {
			t.Errorf("%q: priorityClassName %v, want %v", doc, got, want)
		}
	}
}

func TestSchemaRefusesBadNewValues(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"sinks: {confg: {}}", "confg"},
		{"sinks: {secretEnv: [{name: A, secretName: s, key: k, optional: true}]}", "optional"},
		{"sinks: {secretEnv: [{name: A-B, secretName: s, key: k}]}", "name"},
		{"sinks: {secretEnv: [{name: A, key: k}]}", "secretName"},
		{"sinks: {secretFiles: [../etc]}", "secretFiles"},
		{"sinks: {config: [a]}", "config"},
		{"nats: {subscriber: {enabeld: true}}", "enabeld"},
		{"nats: {subscriber: {port: 0}}", "port"},
		{"rest: {readToken: {existingSecert: x}}", "existingSecert"},
		{"networkPolicy: {natsSubscriber: {podSelecter: {}}}", "podSelecter"},
		{"eventSource: two words", "eventSource"},
		{"extraVolumes: {a: b}", "extraVolumes"},
	} {
		mustErr(t, c.doc, c.want)
	}
}

// Every flag the chart passes to serve is one of serve's: checked against
// `serve --help` of this repository's binary, with every value on.
func TestServeFlagsAreReal(t *testing.T) {
	bin := buildCmd(t, "claimstream")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	for _, doc := range []string{"", everything, "replicas: 3", "{rest: {enabled: false}, metrics: {enabled: false}}"} {
		for flag := range args(t, mustRender(t, doc)) {
			if flag != "serve" && !known[flag] {
				t.Errorf("values %q: the chart passes %s, which serve does not know", doc, flag)
			}
		}
	}
}

// NOTES.txt tells where the read-only token, the NATS subscriber's
// password and the sinks file are, by the names the chart renders; and
// says nothing of them when they are off.
func TestNotesNameTheNewSecrets(t *testing.T) {
	objs := mustRender(t, everything)
	notes := renderNotes(t, everything)
	for _, want := range []string{
		"get secret claimstream-api-read-token -o jsonpath='{.data.token}'",
		"tls://claimstream-nats.ns.svc:4333, user audit",
		"get secret claimstream-nats-subscriber -o jsonpath='{.data.password}'",
		"the ConfigMap claimstream-sinks",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	for _, s := range []string{"claimstream-api-read-token", "claimstream-nats-subscriber"} {
		mustFind(t, objs, "Secret", s)
	}
	mustFind(t, objs, "Service", "claimstream-nats")
	if def := renderNotes(t, ""); strings.Contains(def, "Read-only token") || strings.Contains(def, "NATS subscribers") || strings.Contains(def, "Webhook sinks") {
		t.Errorf("NOTES.txt speaks of what is off:\n%s", def)
	}
}
